"""`apex docs index` and `apex docs search` as a user runs them: summaries, JSON, one-line errors."""

from __future__ import annotations

import json
import textwrap

import pytest


@pytest.fixture(scope="module")
def docs_corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("docs-corpus")
    (folder / "notes.md").write_text(textwrap.dedent("""\
        # Notes

        ## Bank conflicts

        Pad each LDS row by one element so that a column read touches every bank once.

        ## Launch bounds

        Keep the workgroup at 256 threads so the register budget allows two waves per SIMD.
        """))
    (folder / "kern.py").write_text('def gemm_tile(a, b):\n    """Multiply one output tile with MFMA instructions."""\n')
    return folder


def _one_line_error(done) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("apex: error: ") and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_index_then_search_with_json_output(apex_cli, docs_corpus, tmp_path):
    index_dir = tmp_path / "index"
    built = apex_cli("docs", "index", str(docs_corpus), "--index-dir", str(index_dir), "--json")
    assert built.returncode == 0, built.stderr
    report = json.loads(built.stdout)
    assert sorted(report["added"]) == [str(docs_corpus / "kern.py"), str(docs_corpus / "notes.md")]
    assert report["chunks"] == 3 and report["index_dir"] == str(index_dir)

    found = apex_cli("docs", "search", "pad the LDS row to avoid bank conflicts", "--k", "2", "--json", "--index-dir", str(index_dir))
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert isinstance(hits, list) and len(hits) == 2
    assert {"text", "source", "score", "section", "page", "line_start", "line_end", "kind"} <= set(hits[0])
    assert (hits[0]["source"], hits[0]["section"], hits[0]["kind"]) == (str(docs_corpus / "notes.md"), "Notes > Bank conflicts", "doc")
    assert isinstance(hits[0]["score"], float)

    again = apex_cli("docs", "index", str(docs_corpus), "--index-dir", str(index_dir))
    assert again.returncode == 0, again.stderr
    assert "0 added, 0 updated, 2 unchanged, 0 removed; 3 chunks in the index (0 written)" in again.stdout


def test_search_prints_a_readable_list_and_the_environment_chooses_the_index(apex_cli, docs_corpus, tmp_path):
    index_dir = tmp_path / "index"
    assert apex_cli("docs", "index", str(docs_corpus / "kern.py"), "--index-dir", str(index_dir)).returncode == 0
    done = apex_cli("docs", "search", "MFMA output tile", "--kind", "docstring", env={"APEX_DOCS_INDEX": str(index_dir)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"1. [docstring] {docs_corpus / 'kern.py'}:1-2  score ")
    assert "kern.gemm_tile(a, b)" in done.stdout and "Multiply one output tile" in done.stdout


@pytest.mark.parametrize(("arguments", "message"), [
    (["docs", "index", "/no/such/file.md"], "no such file or folder"),
    (["docs", "index", "pyproject.toml"], "unsupported file type '.toml'"),
    (["docs", "search", "tiles", "--k", "0"], "not a number of results from 1 to 50"),
    (["docs", "search", "tiles", "--kind", "pdfs"], "unknown document kind 'pdfs'"),
    (["docs", "search", "  "], "the query is empty"),
])
def test_bad_input_is_one_line_and_exit_code_2(apex_cli, tmp_path, arguments, message):
    done = apex_cli(*arguments, env={"APEX_DOCS_INDEX": str(tmp_path / "never-built")})
    assert message in _one_line_error(done)
    assert not (tmp_path / "never-built").exists()  # a bad argument is said before any index is built


def test_a_file_is_taken_out_with_remove_and_remove_with_paths_is_one_line(apex_cli, docs_corpus, tmp_path):
    index_dir = tmp_path / "index"
    assert apex_cli("docs", "index", str(docs_corpus), "--index-dir", str(index_dir)).returncode == 0
    removed = apex_cli("docs", "index", "--remove", str(docs_corpus / "notes.md"), "--index-dir", str(index_dir), "--json")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(removed.stdout)["removed"] == [str(docs_corpus / "notes.md")]
    both = _one_line_error(apex_cli("docs", "index", str(docs_corpus), "--remove", str(docs_corpus), "--index-dir", str(index_dir)))
    assert "--remove takes files out of the index on its own" in both

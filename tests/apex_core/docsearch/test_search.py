import functools
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from apex_core.docsearch import DocHit, search
from apex_core.docsearch import store
from apex_core.docsearch.corpus import default_units
from apex_core.errors import ApexUserError

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("query", "source", "section"), [
    ("how does swizzling the program id raise the L2 hit rate", "guide.md", "Tiling guide > Swizzling"),
    ("wavefronts resident per compute unit and register pressure", "guide.md", "Tiling guide > Occupancy"),
    ("fused rmsnorm weight multiply", "kernels.py", "fused_rmsnorm"),
    ("which tile shapes fit the shared-memory budget", "kernels.py", "TileConfig.autotune_space"),
    ("MFMA accumulation registers", "manual.pdf", "Matrix cores"),
])
def test_a_clear_query_finds_the_chunk_that_answers_it_first(small_index, small_corpus, query, source, section):
    hits = search(query, 3, index_dir=small_index)
    assert (hits[0].source, hits[0].section) == (str(small_corpus / source), section)


def test_a_hit_carries_its_text_fused_score_lines_and_kind(small_index, small_corpus):
    hit = search("fused rmsnorm", 1, index_dir=small_index)[0]
    assert isinstance(hit, DocHit) and hit.kind == "docstring"
    assert hit.text.startswith("kernels.fused_rmsnorm(x, weight, eps=1e-06)")
    lines = (small_corpus / "kernels.py").read_text().splitlines()
    assert lines[hit.line_start - 1].startswith("def fused_rmsnorm")
    assert 0 < hit.score <= 2 / 61 and (hit.vector_rank or hit.lexical_rank) == 1
    page = search("MFMA accumulation registers", 1, index_dir=small_index)[0]
    assert (page.kind, page.page, page.line_start) == ("pdf", 2, 1)


def test_results_are_best_first_at_most_k_and_only_of_the_kinds_asked(small_index):
    hits = search("tiles", 50, index_dir=small_index)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(search("tiles", 2, index_dir=small_index)) == 2
    only_pdf = search("matrix tiles occupancy", 10, index_dir=small_index, kinds=["pdf"])
    assert only_pdf and {h.kind for h in only_pdf} == {"pdf"}


@pytest.mark.parametrize(("query", "k", "kinds", "message"), [
    ("   ", 5, None, "the query is empty"),
    ("tiles", 0, None, "not a number of results from 1 to 50"),
    ("tiles", 51, None, "not a number of results from 1 to 50"),
    ("tiles", 5, ["docs"], "unknown document kind 'docs': did you mean 'doc'"),
])
def test_bad_input_is_a_one_line_user_error(small_index, query, k, kinds, message):
    with pytest.raises(ApexUserError, match=message) as caught:
        search(query, k, index_dir=small_index, kinds=kinds)
    assert "\n" not in str(caught.value)


def test_searching_where_no_index_exists_builds_the_default_one_first_and_says_so(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "page.md").write_text("# Bank conflicts\n\nPad the LDS row to avoid bank conflicts.\n")
    monkeypatch.setattr(store, "default_units", functools.partial(default_units, root=project, packages=()))
    said = []
    hits = search("avoid LDS bank conflicts", 3, index_dir=tmp_path / "index", progress=lambda f, m: said.append(m))
    assert hits[0].source == "docs/page.md"
    assert "building the default one first" in said[0]
    assert (tmp_path / "index" / "manifest.json").is_file()


def test_indexing_and_searching_never_touch_the_network(tmp_path, small_corpus):
    """In a fresh process whose Python sockets refuse and record every attempt (even one a library
    would swallow), inside a network namespace of its own where ``unshare`` works, with no hub
    variables and an empty home: the embedding model, chromadb and BM25 work from what is installed."""
    folder = tmp_path / "index"
    script = textwrap.dedent(f"""
        import socket
        attempts = []
        def refuse(*args, **kwargs):
            attempts.append(repr(args))
            raise OSError("network use refused by the test")
        socket.socket.connect = socket.socket.connect_ex = refuse
        socket.create_connection = socket.getaddrinfo = refuse
        try:
            socket.create_connection(("127.0.0.1", 9))
        except OSError:
            pass
        assert attempts, "the guard is not in place"
        attempts.clear()
        from pathlib import Path
        from apex_core.docsearch import index, search
        index([Path({str(small_corpus)!r})], index_dir=Path({str(folder)!r}))
        print(search("MFMA accumulation registers", 1, index_dir=Path({str(folder)!r}))[0].section)
        print("attempts:", attempts)
    """)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "TRANSFORMERS_"))}
    env["HOME"] = str(tmp_path)
    command = [sys.executable, "-c", script]
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        command = ["unshare", "-n", *command]
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-2:] == ["Matrix cores", "attempts: []"]


QUERY_OF_THE_GUIDE = "how does swizzling the program id raise the L2 hit rate"
READ_ONLY_SEARCH = """
import sys
from pathlib import Path
from apex_core.docsearch import search
hits = search(sys.argv[2], 3, index_dir=Path(sys.argv[1]))
print(hits[0].source)
"""


def test_an_index_this_user_cannot_write_still_answers_from_a_private_copy(small_index, small_corpus):
    """A shared index on a read-only mount, or another user's: chromadb cannot open it in place
    (it writes even to read). Root writes read-only folders, so as root this runs as nobody."""
    as_root = os.geteuid() == 0
    if as_root and not Path("/usr/bin/setpriv").exists():
        pytest.skip("running as root without setpriv: no unprivileged user to search as")
    top = Path(tempfile.mkdtemp(prefix="apex-readonly-index-", dir="/tmp" if as_root else None))
    try:
        os.chmod(top, 0o755)
        shared = top / "index"
        shutil.copytree(small_index, shared)
        (top / "home").mkdir()
        if as_root:
            os.chown(top / "home", 65534, 65534)
        for folder, _, files in os.walk(shared):
            os.chmod(folder, 0o555)
            for name in files:
                os.chmod(Path(folder) / name, 0o444)
        prefix = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if as_root else []
        done = subprocess.run([*prefix, sys.executable, "-c", READ_ONLY_SEARCH, str(shared), QUERY_OF_THE_GUIDE],
                              capture_output=True, text=True, timeout=300, check=False, cwd=top,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "HOME": str(top / "home"),
                                   "APEX_CACHE_DIR": str(top / "home" / "cache")})
        assert done.returncode == 0, done.stderr[-1500:]
        assert done.stdout.strip() == str(small_corpus / "guide.md"), done.stdout
        assert list((top / "home" / "cache" / "docs-index-copies").iterdir())  # the copy, in the searcher's cache
    finally:
        for folder, _, _ in os.walk(top):
            os.chmod(folder, 0o755)
        shutil.rmtree(top, ignore_errors=True)

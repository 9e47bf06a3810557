import functools
import json

import pytest

from apex_core.docsearch import index, search
from apex_core.docsearch import store
from apex_core.docsearch.corpus import default_units
from apex_core.errors import ApexUserError

from .conftest import write_pdf


def _sources(index_dir):
    return {record["source"]: record for record in json.loads((index_dir / "manifest.json").read_text())["units"].values()}


def test_an_unchanged_file_is_not_indexed_again_a_changed_one_is_replaced_and_a_vanished_one_dropped(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nThe alpha section talks about occupancy.\n")
    (docs / "b.md").write_text("# Beta\n\nThe beta section talks about swizzling.\n")
    folder = tmp_path / "index"

    first = index([docs], index_dir=folder)
    assert (sorted(first.added), first.updated, first.unchanged, first.chunks) == ([str(docs / "a.md"), str(docs / "b.md")], [], 0, 2)
    assert (folder / store.QUERY_WEIGHTS).is_file() and (folder / store.LEXICAL_DIR / "ids.json").is_file()

    again = index([docs], index_dir=folder)
    assert (again.added, again.updated, again.removed, again.unchanged, again.chunks_written) == ([], [], [], 2, 0)
    assert not again.changed

    (docs / "a.md").write_text("# Alpha\n\nThe alpha section now talks about bank conflicts.\n\n## More\n\nAnd a second part.\n")
    changed = index([docs], index_dir=folder)
    assert (changed.updated, changed.unchanged, changed.chunks) == ([str(docs / "a.md")], 1, 3)
    texts = [hit.text for hit in search("alpha section", 10, index_dir=folder)]
    assert any("bank conflicts" in t for t in texts) and not any("occupancy" in t for t in texts)

    (docs / "b.md").unlink()
    dropped = index([docs], index_dir=folder)
    assert (dropped.removed, dropped.chunks) == ([str(docs / "b.md")], 2)
    assert all(hit.source != str(docs / "b.md") for hit in search("beta swizzling", 10, index_dir=folder))


def test_a_deleted_default_corpus_file_drops_its_chunks_and_files_added_by_hand_are_kept(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "skills" / "tile").mkdir(parents=True)
    (project / "docs").mkdir()
    (project / "skills" / "tile" / "SKILL.md").write_text("# Tiles\n\nPick BLOCK_M from the occupancy table.\n")
    (project / "docs" / "gone.md").write_text("# Gone\n\nThis page will be deleted.\n")
    (project / "README.md").write_text("# Project\n\nA readme.\n")
    (project / "docs_index" / "pdfs").mkdir(parents=True)
    write_pdf(project / "docs_index" / "pdfs" / "isa.pdf", [["MFMA instructions run on matrix cores."]])
    monkeypatch.setattr(store, "default_units", functools.partial(default_units, root=project, packages=()))
    extra = tmp_path / "extra.md"
    extra.write_text("# Extra\n\nAdded by hand.\n")
    folder = tmp_path / "index"

    built = index(index_dir=folder)
    assert sorted(built.added) == ["README.md", "apex_core/hardware/specs.py", "docs/gone.md", "docs_index/pdfs/isa.pdf",
                                   "skills/tile/SKILL.md"]
    kinds = {source: record["kind"] for source, record in _sources(folder).items()}
    assert kinds["skills/tile/SKILL.md"] == "skill" and kinds["docs/gone.md"] == "doc" and kinds["docs_index/pdfs/isa.pdf"] == "pdf"
    index([extra], index_dir=folder)

    (project / "docs" / "gone.md").unlink()
    refreshed = index(index_dir=folder)
    assert refreshed.removed == ["docs/gone.md"]
    assert refreshed.unchanged == 5  # four default units and the hand-added file, all re-checked
    assert str(extra) in _sources(folder)

    extra.unlink()
    assert index(index_dir=folder).removed == [str(extra)]


def test_an_index_of_another_format_is_rebuilt_from_scratch(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Page\n\nSome text.\n")
    folder = tmp_path / "index"
    index([page], index_dir=folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["embedder"] = "some-other-model"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    rebuilt = index([page], index_dir=folder)
    assert rebuilt.added == [str(page)] and rebuilt.chunks == 1


def test_the_index_folder_comes_from_the_argument_else_the_environment_else_docs_index(tmp_path, monkeypatch):
    monkeypatch.delenv(store.ENV_VAR, raising=False)
    assert store.resolve_index_dir() == store.DEFAULT_INDEX_DIR
    assert store.DEFAULT_INDEX_DIR.parts[-2:] == ("docs_index", "index")
    monkeypatch.setenv(store.ENV_VAR, str(tmp_path / "from-env"))
    assert store.resolve_index_dir() == tmp_path / "from-env"
    assert store.resolve_index_dir(tmp_path / "given") == tmp_path / "given"


def test_bad_paths_are_one_line_user_errors_and_nothing_is_indexed(tmp_path):
    (tmp_path / "notes.toml").write_text("x = 1")
    (tmp_path / "empty").mkdir()
    folder = tmp_path / "index"
    for paths, message in (([tmp_path / "missing.md"], "no such file or folder"),
                           ([tmp_path / "notes.toml"], "unsupported file type '.toml'"),
                           ([tmp_path / "empty"], "no .md, .markdown, .txt, .py or .pdf file")):
        with pytest.raises(ApexUserError, match=message) as caught:
            index(paths, index_dir=folder)
        assert "\n" not in str(caught.value)
    assert not (folder / "manifest.json").exists()


def test_an_index_folder_that_cannot_be_created_is_a_user_error(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Page\n\ntext\n")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ApexUserError, match="cannot create it"):
        index([page], index_dir=blocker / "index")


def _docs(tmp_path, **files: str):
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for name, text in files.items():
        (docs / f"{name}.md").write_text(text)
    return docs


def _texts(query, folder):
    return " ".join(hit.text for hit in search(query, 10, index_dir=folder))


def test_a_file_over_the_size_cap_is_skipped_with_the_reason_and_nothing_of_it_stored(tmp_path, monkeypatch):
    docs = _docs(tmp_path, small="# Small\n\nOccupancy of the small page.\n",
                 dump="# Dump\n\n" + "QUJDRA== base64 garbage blob " * 20 + "\n")
    monkeypatch.setattr(store, "MAX_TEXT_BYTES", 300)
    folder = tmp_path / "index"
    report = index([docs], index_dir=folder)
    assert report.added == [str(docs / "small.md")]
    assert len(report.skipped) == 1 and report.skipped[0].startswith(f"{docs / 'dump.md'}: ") and "over the 0 MiB cap" in report.skipped[0]
    assert str(docs / "dump.md") not in _sources(folder) and "garbage" not in _texts("base64 garbage blob", folder)


def test_a_file_that_fails_half_way_leaves_nothing_behind_and_the_others_are_indexed(tmp_path, monkeypatch):
    """chromadb refused the second batch of a big file ("too many SQL variables"): its first batch
    must not stay in the index, unlisted, to be ranked first for good."""
    docs = _docs(tmp_path, good="# Good\n\nThe good page talks about LDS.\n",
                 bad="# Bad\n\nFirst part of the bad page.\n\n## Second\n\nSecond part of the bad page.\n")
    real = store._replace_chunks

    def refuse_the_second_batch(collection, unit_key, chunks):
        if unit_key.endswith("bad.md"):
            real(collection, unit_key, chunks[:1])
            raise RuntimeError("too many SQL variables")
        real(collection, unit_key, chunks)

    monkeypatch.setattr(store, "_replace_chunks", refuse_the_second_batch)
    folder = tmp_path / "index"
    report = index([docs], index_dir=folder)
    assert report.added == [str(docs / "good.md")] and report.failed == [f"{docs / 'bad.md'}: too many SQL variables"]
    assert str(docs / "bad.md") not in _sources(folder) and "bad page" not in _texts("bad page", folder)
    monkeypatch.setattr(store, "_replace_chunks", real)
    assert index([docs], index_dir=folder).added == [str(docs / "bad.md")]  # tried again next time, and indexed


def test_chunks_an_interrupted_run_left_are_deleted_by_the_next_run(tmp_path):
    docs = _docs(tmp_path, kept="# Kept\n\nThe kept page talks about wavefronts.\n")
    folder = tmp_path / "index"
    index([docs], index_dir=folder)
    ghost = store.Chunk(text="ghost text of a killed run", source="ghost.md", kind="doc", section="Ghost")
    store._replace_chunks(store.open_collection(folder), "file:/gone/ghost.md", [ghost])  # written, never listed: then killed
    (folder / store.DIRTY).write_text("12345\n")
    again = index([docs], index_dir=folder)
    assert again.orphans_removed == 1 and again.unchanged == 1 and not (folder / store.DIRTY).exists()
    assert "ghost" not in _texts("ghost text of a killed run", folder)


def test_files_are_removed_from_the_index_by_path_or_folder_and_a_rebuild_starts_empty(tmp_path):
    docs = _docs(tmp_path, one="# One\n\nPage one about swizzles.\n", two="# Two\n\nPage two about barriers.\n")
    folder = tmp_path / "index"
    index([docs], index_dir=folder)
    removed = store.remove([docs / "one.md"], index_dir=folder)
    assert removed.removed == [str(docs / "one.md")] and removed.chunks == 1
    assert "swizzles" not in _texts("page one swizzles", folder) and "barriers" in _texts("page two barriers", folder)
    with pytest.raises(ApexUserError, match=r"one\.md: not in the index"):
        store.remove([docs / "one.md"], index_dir=folder)
    rebuilt = index([docs], index_dir=folder, rebuild=True)
    assert sorted(rebuilt.added) == [str(docs / "one.md"), str(docs / "two.md")] and rebuilt.chunks == 2
    assert store.remove([docs], index_dir=folder).chunks == 0

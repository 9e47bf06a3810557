"""The integrity snapshot covers the MCP servers and the top of site-packages (integrity.py)."""

from pathlib import Path

from apex_core.grader import integrity


def _trees(tmp_path: Path) -> dict:
    apex, servers, site = tmp_path / "apex_core", tmp_path / "servers", tmp_path / "site-packages"
    for directory in (apex, servers, site, site / "numpy"):
        directory.mkdir()
    (apex / "score.py").write_text("POINTS = 20\n")
    (servers / "grader.py").write_text("def serve(): ...\n")
    (site / "numpy" / "__init__.py").write_text("")
    (site / "six.py").write_text("")
    return {"apex_root": apex, "servers_root": servers, "site_directories": [site], "library_roots": [site / "numpy"]}


def test_a_changed_server_is_found_and_put_back(tmp_path):
    trees = _trees(tmp_path)
    before = integrity.take_snapshot(**trees)
    grader = trees["servers_root"] / "grader.py"
    grader.write_text("def serve(): return 'ok'\n")
    changes = integrity.compare(before, **trees)
    assert changes.apex_files == [grader]
    integrity.restore(before, changes)
    assert grader.read_text() == "def serve(): ...\n"


def test_a_pth_file_or_module_added_to_site_packages_is_found_and_removed(tmp_path):
    trees = _trees(tmp_path)
    before = integrity.take_snapshot(**trees)
    site = trees["site_directories"][0]
    (site / "zz-apex.pth").write_text("import os; os.system('true')\n")
    (site / "sitecustomize.py").write_text("import os\n")
    changes = integrity.compare(before, **trees)
    assert sorted(Path(p).name for p in changes.library_files) == ["sitecustomize.py", "zz-apex.pth"]
    integrity.restore(before, changes)
    assert not (site / "zz-apex.pth").exists() and not (site / "sitecustomize.py").exists()
    assert (site / "six.py").exists()  # what was there before stays


def test_a_new_byte_code_cache_in_site_packages_is_no_change(tmp_path):
    trees = _trees(tmp_path)
    before = integrity.take_snapshot(**trees)
    cache = trees["site_directories"][0] / "__pycache__"
    cache.mkdir()
    (cache / "six.cpython-311.pyc").write_bytes(b"\0")
    assert not integrity.compare(before, **trees)


def test_the_real_snapshot_holds_the_servers_and_site_packages():
    snapshot = integrity.take_snapshot()
    assert integrity.SERVERS_ROOT / "grader.py" in snapshot.contents
    assert snapshot.site_directories and any(name.endswith(".pth") for name in snapshot.stats)


def test_a_changed_header_of_the_hip_build_is_found_and_put_back(tmp_path):
    trees = _trees(tmp_path)
    header = trees["apex_root"] / "grader" / "isolation" / "hip_on_cuda" / "hip" / "hip_runtime.h"
    header.parent.mkdir(parents=True)
    header.write_text("#pragma once\n")
    before = integrity.take_snapshot(**trees)
    header.write_text("#pragma once\n#define hipMemcpy(...) 0  /* every copy skipped */\n")
    changes = integrity.compare(before, **trees)
    assert changes.apex_files == [header]
    integrity.restore(before, changes)
    assert header.read_text() == "#pragma once\n"


def test_the_real_snapshot_holds_the_headers_hip_solutions_compile_against():
    headers = list((integrity.APEX_ROOT / "grader" / "isolation" / "hip_on_cuda").rglob("*.h"))
    assert headers and set(headers) <= set(integrity.take_snapshot().contents)


"""One way Apex writes a file another process may read: whole or not at all, never through a planted
link; and one rule for the cache folder."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from apex_core import storage


def test_a_write_that_fails_half_way_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "state.json"
    target.write_text("old")

    def fail_after_some_bytes(writer):
        writer.write(b"new, half")
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError):
        storage.replace_file(target, fail_after_some_bytes)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]
    storage.atomic_write_text(target, "new", mode=0o640)
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_link_planted_at_the_temporary_name_is_not_written_through(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    monkeypatch.setattr(storage, "temporary_for", lambda target: target.with_name(".guessed.tmp"))
    (tmp_path / ".guessed.tmp").symlink_to(victim)
    storage.atomic_write(tmp_path / "config.json", b"{}")
    assert victim.read_text() == "precious" and (tmp_path / "config.json").read_bytes() == b"{}"


def test_the_cache_folder_is_apex_cache_dir_else_xdg_else_home(tmp_path, monkeypatch):
    monkeypatch.setenv("APEX_CACHE_DIR", str(tmp_path / "mine"))
    assert storage.cache_root() == tmp_path / "mine"
    monkeypatch.delenv("APEX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert storage.cache_root() == tmp_path / "xdg" / "apex"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert storage.cache_root() == Path.home() / ".cache" / "apex"

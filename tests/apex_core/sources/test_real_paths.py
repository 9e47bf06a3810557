"""A file of an indexed tree is read only where it really lies inside the tree: a link that leads
out is refused, one that stays inside is read, and a FIFO under a source file's name is refused at
once instead of blocking its reader."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from apex_core.sources.real_paths import OutsideTreeError, is_inside, read_text_inside, real_root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "norm.py").write_text("x = 1\r\ny = 2\n")
    (tmp_path / "secret.txt").write_text("TOKEN=hunter2\n")
    return root


def test_a_file_inside_the_tree_is_read_with_newlines_as_text_mode_gives_them(tree):
    assert read_text_inside(tree / "ops" / "norm.py", real_root(tree)) == "x = 1\ny = 2\n"
    assert read_text_inside(tree / "ops" / "norm.py", real_root(tree), max_bytes=4) is None


def test_a_link_leading_out_of_the_tree_is_refused_and_one_staying_inside_is_read(tree, tmp_path):
    (tree / "leak.py").symlink_to(tmp_path / "secret.txt")
    (tree / "alias.py").symlink_to(tree / "ops" / "norm.py")
    (tree / "up").symlink_to(tmp_path)
    with pytest.raises(OutsideTreeError, match="outside the indexed tree"):
        read_text_inside(tree / "leak.py", real_root(tree))
    with pytest.raises(OutsideTreeError):
        read_text_inside(tree / "up" / "secret.txt", real_root(tree))
    with pytest.raises(OutsideTreeError):
        read_text_inside(tree / "ops" / ".." / ".." / "secret.txt", real_root(tree))
    assert read_text_inside(tree / "alias.py", real_root(tree)) == "x = 1\ny = 2\n"


def test_a_fifo_named_like_a_source_file_is_refused_without_waiting_for_a_writer(tree):
    os.mkfifo(tree / "pipe.py")
    with pytest.raises(OSError, match="not a regular file"):
        read_text_inside(tree / "pipe.py", real_root(tree))


def test_inside_means_the_root_itself_or_below_it_never_a_sibling_with_the_same_prefix():
    assert is_inside("/a/tree", "/a/tree") and is_inside("/a/tree/x.py", "/a/tree")
    assert not is_inside("/a/tree2/x.py", "/a/tree") and not is_inside("/a", "/a/tree")

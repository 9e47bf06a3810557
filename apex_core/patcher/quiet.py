"""Apex's own processes write no bytecode while a patch session is open.

Why: the session's snapshot (``snapshot.py``) reports every file that differs from what it saw,
whoever made it. Python writes ``__pycache__/*.pyc`` beside any module it imports for the first
time; if Apex's own processes did that during a session, a new ``.pyc`` in site-packages would be
noise, and a planted one (bytecode behind an unchanged source, which Python runs as long as its
header matches the source's mtime and size) could hide in it. With this, a new ``.pyc`` during a
session is a real finding. Children inherit ``PYTHONDONTWRITEBYTECODE=1`` through the environment;
a child started with an environment of its own must be given ``child_environment()``.
"""

from __future__ import annotations

import os
import sys

BYTECODE_ENV = "PYTHONDONTWRITEBYTECODE"
_saved: tuple[bool, str | None] | None = None


def hold() -> None:
    """From now on this process and its children write no bytecode (until ``release``)."""
    global _saved
    if _saved is None:
        _saved = (sys.dont_write_bytecode, os.environ.get(BYTECODE_ENV))
    sys.dont_write_bytecode = True
    os.environ[BYTECODE_ENV] = "1"


def release() -> None:
    """The session is over: bytecode is written again as it was before ``hold``."""
    global _saved
    if _saved is None:
        return
    flag, variable = _saved
    _saved = None
    sys.dont_write_bytecode = flag
    if variable is None:
        os.environ.pop(BYTECODE_ENV, None)
    else:
        os.environ[BYTECODE_ENV] = variable


def held() -> bool:
    return _saved is not None


def child_environment() -> dict[str, str]:
    """What a child started with an environment of its own needs while a session is open
    (empty when none is): add it to the child's environment."""
    return {BYTECODE_ENV: "1"} if held() else {}

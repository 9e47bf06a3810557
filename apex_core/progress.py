"""How long-running work reports progress: a callable of (fraction done in [0, 1], message).

The CLI draws it as a progress bar (``apex_core.cli.output.progress_reporter``), the MCP servers
forward it as progress notifications, and library callers may pass nothing at all. One alias for
every stage, so a reporter written for one stage fits all of them.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[float, str], None]


def silent(fraction: float, message: str) -> None:
    """The reporter used when the caller gave none."""


def reporter(progress: Progress | None) -> Progress:
    """``progress``, or the silent reporter when it is None."""
    return progress if progress is not None else silent

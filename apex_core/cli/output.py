"""What every ``apex`` command shares about output: tables on stdout, JSON on stdout with --json,
progress and notes on stderr, so that ``--json`` output stays parseable whatever else is said."""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Callable, Iterator
from typing import Annotated

import typer
from rich.console import Console

# markup=False: contracts, reasons and compiler errors contain brackets ("x[b, t // 16]") that
# rich would otherwise swallow as markup.
console = Console(width=None if sys.stdout.isatty() else 160, markup=False)
progress_console = Console(stderr=True, markup=False)
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


def print_json(data: object) -> None:
    """``data`` as JSON on stdout; a number that is not finite (NaN, inf) is null, as in pydantic's
    JSON and the MCP replies, so the output is JSON any parser reads."""
    sys.stdout.write(json.dumps(_finite(data), indent=2, default=str, allow_nan=False) + "\n")


def _finite(data: object) -> object:
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(value) for value in data]
    return data


@contextlib.contextmanager
def progress_reporter(label: str) -> Iterator[Callable[[float, str], None]]:
    """A ``progress(fraction, message)`` for long work: a bar on a terminal's stderr, else one line
    per report on stderr. Never stdout, which carries the result."""
    if progress_console.is_terminal:
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

        columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn())
        with Progress(*columns, console=progress_console, transient=True) as bar:
            task = bar.add_task(label, total=1.0)
            yield lambda fraction, message: bar.update(task, completed=fraction, description=message)
        return

    def line(fraction: float, message: str) -> None:
        progress_console.print(f"{label} {100 * fraction:3.0f}%: {message}", style="dim", highlight=False, soft_wrap=True)

    yield line

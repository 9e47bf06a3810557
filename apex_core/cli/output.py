"""What every ``apex`` command shares about output: tables on stdout, JSON on stdout with --json,
progress and notes on stderr, so that ``--json`` output stays parseable whatever else is said."""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

PIPED_WIDTH = 1000
"""Output that is not a terminal is not wrapped at any width a reader sees: a path or a message
stays on one line for grep, cut and awk."""
UNBOUNDED_WIDTH = 100_000
"""A plain table's width while it is drawn: its rows are as long as their cells make them."""


class ApexConsole(Console):
    """Rich's console, with tables plain when stdout is not a terminal (a pipe, a file, ``TERM=dumb``):
    no box-drawing characters, one line per row (cells neither wrapped nor cut), the title at the
    left on a line of its own. ``apex tasks list | grep triton`` then prints whole rows, and a
    file of the output reads in any editor. On a terminal, tables are as rich draws them."""

    def print(self, *objects: Any, **options: Any) -> None:
        if (self.is_terminal and not self.is_dumb_terminal) or not any(isinstance(item, Table) for item in objects):
            super().print(*objects, **options)
            return
        for item in objects:
            if not isinstance(item, Table):
                super().print(item, **options)
                continue
            _plain(item)
            width, self.width = self.width, UNBOUNDED_WIDTH  # every column at its natural width: none cut
            try:
                with self.capture() as captured:
                    super().print(item, **options)
            finally:
                self.width = width
            self.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
            self.file.flush()


def _plain(table: Table) -> None:
    table.box = None
    table.show_edge = False
    table.pad_edge = False
    table.title_justify = "left"
    table.title_style = table.caption_style = "none"
    table.expand = False
    for column in table.columns:
        column.no_wrap, column.overflow = True, "ignore"
        column.width = column.max_width = column.ratio = None


def make_console(*, markup: bool = False, stderr: bool = False) -> ApexConsole:
    stream = sys.stderr if stderr else sys.stdout
    return ApexConsole(width=None if stream.isatty() else PIPED_WIDTH, markup=markup, stderr=stderr)


# markup=False: contracts, reasons and compiler errors contain brackets ("x[b, t // 16]") that
# rich would otherwise swallow as markup.
console = make_console()
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

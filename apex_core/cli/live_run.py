"""The live view of ``apex run`` on a terminal: a table of the stages and the kernels, redrawn
each time the run's state changes, with the current step under it. Off a terminal the run
prints one progress line per step instead (``progress_reporter``), and stdout keeps only the
result."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from apex_core.cli.output import progress_console, progress_reporter

STATUS_STYLE = {"done": "green", "running": "bold blue", "failed": "red", "skipped": "yellow", "pending": "dim"}


def run_table(state: Any) -> Table:  # noqa: ANN401 - a RunState, imported lazily by the commands
    """The stages and the kernels of ``state`` as one table."""
    table = Table(title=f"apex run {state.run_id}", title_justify="left", expand=False)
    for column in ("step", "status", "time", "what"):
        table.add_column(column, overflow="fold")
    for name, record in state.stages.items():
        took = f"{record.elapsed_s:.0f} s" if record.elapsed_s is not None else ""
        table.add_row(name, Text(record.status, style=STATUS_STYLE.get(record.status, "")), took,
                      (record.error or record.summary)[:90])
    for kernel in state.kernels:
        last = kernel.iterations[-1].grade if kernel.iterations else None
        best = max((i.grade.score for i in kernel.iterations if i.grade.correct), default=None)
        what = (f"iteration {len(kernel.iterations)}/{state.config.iterations}"
                + (f", last {last.outcome}" + (f" {last.speedup:.2f}x" if last.speedup else "") if last else "")
                + (f", best score {best:.0f}" if best is not None else "")
                + (", integrated" if kernel.integrated else ""))
        table.add_row(f"  {kernel.task_id}", Text(kernel.stop_reason and "stopped" or "", style="dim"),
                      f"{kernel.device_time_share:.0%}", what)
    return table


@contextlib.contextmanager
def live_run(label: str) -> Iterator[tuple[Callable[[float, str], None], Callable[[Any], None] | None]]:
    """(progress, on_save) for a run: a live table on a terminal, progress lines elsewhere."""
    if not progress_console.is_terminal:
        with progress_reporter(label) as progress:
            yield progress, None
        return
    from rich.live import Live

    lock = threading.Lock()
    shown: dict[str, Any] = {"state": None, "step": Text("starting", style="dim")}

    def view() -> Group:
        parts = [run_table(shown["state"])] if shown["state"] is not None else []
        return Group(*parts, shown["step"])

    with Live(view(), console=progress_console, refresh_per_second=4, transient=False) as live:
        def progress(fraction: float, message: str) -> None:
            with lock:
                shown["step"] = Text(f"{100 * fraction:3.0f}%  {message}", style="dim")
                live.update(view())

        def on_save(state: Any) -> None:  # noqa: ANN401
            with lock:
                shown["state"] = state.model_copy(deep=True)
                live.update(view())

        yield progress, on_save

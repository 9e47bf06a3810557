"""A workload held loaded in a confined child process, stepped on request:
``python -m apex_core.patcher.bench_worker --apex-channel R,W`` (started by ``arms.BenchWorker``).

The final benchmark keeps one of these per arm (original, control, candidate, leave-one-out), each
started while the environment held that arm's patches, so it keeps the code it imported. They are
confined as grading workers are (``apex_core.grader.isolation.confined``), since every arm but the
original runs patched code, and the original runs under the same conditions so the arms compare
fairly.

Protocol, on the private pipe pair (never stdout, which the solution shares): ``load`` (the spec
and, for a server in a container, the patched files to mount) answers the workload's notes;
``step`` (a request seed chosen by the parent) answers the greedy tokens the step generated. The
parent times each step by its own clock and checks the tokens against a trusted arm's: the worker
reports no timing at all.
"""

from __future__ import annotations

import sys
from pathlib import Path


def patched_files(stack: str) -> list[tuple[str, str]]:
    """(file, path relative to its site-packages) of every file the applied patches at points of
    ``stack`` changed or added (bytecode left out): what a container of that stack must mount.
    Read by the parent, which can see the journal (a confined worker cannot)."""
    from apex_core.patcher import status
    from apex_core.patcher.journal import patchable_roots
    from apex_core.patcher.points import POINTS

    journal = status()
    stack_points = {p.id for p in POINTS if p.stack == stack}
    if journal is None or not stack_points:
        return []
    roots = patchable_roots()
    files = []
    for record in journal.active():
        if record.state != "applied" or record.point not in stack_points:
            continue
        for entry in journal.entries_of(record.id):
            target = Path(entry.target)
            root = next((r for r in roots if target.is_relative_to(r)), None)
            if root is not None and target.suffix != ".pyc" and target.exists():
                files.append((str(target), str(target.relative_to(root))))
    return files


def _token_rows(tokens: object) -> list[list[int]]:
    """The step's greedy tokens, (batch, 1 + decode steps), as rows of ints; none for a server."""
    return [] if tokens is None else [[int(t) for t in row] for row in tokens.tolist()]  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    from apex_core.grader import ParentChannel
    from apex_core.workloads import load
    from apex_core.workloads.spec import WorkloadSpec

    channel, _ = ParentChannel.from_argv(list(sys.argv[1:] if argv is None else argv))
    loaded = None
    try:
        while (request := channel.receive()) is not None:
            op = request.get("op")
            if op == "load":
                try:
                    spec = WorkloadSpec.model_validate(request["spec"])
                    loaded = load(spec, patched=[tuple(p) for p in request.get("patched", [])])
                except BaseException as error:  # noqa: BLE001 - patched code may raise anything on import
                    channel.reply({"ok": False, "message": f"{type(error).__name__}: {error}"[:600]})
                    return 1
                channel.reply({"ok": True, "notes": list(loaded.notes)})
            elif op == "step" and loaded is not None:
                try:
                    timing = loaded.step(seed=int(request["seed"]))
                except BaseException as error:  # noqa: BLE001
                    channel.reply({"ok": False, "message": f"{type(error).__name__}: {error}"[:600]})
                    return 1
                channel.reply({"ok": True, "tokens": _token_rows(getattr(loaded, "last_tokens", None)),
                               "digest": timing.token_digest, "graph_fallback": getattr(loaded, "graph_fallback", None)})
            else:
                break
    finally:
        if loaded is not None:
            loaded.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

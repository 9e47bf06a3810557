"""A workload held loaded in a confined child process, stepped on request:
``python -m apex_core.pipeline.stages.final.worker --apex-channel R,W`` (started by ``arms.BenchWorker``).

The final benchmark keeps one of these per arm (original, control, candidate, leave-one-out), each
started while the environment held that arm's patches, so it keeps the code it imported. They are
confined as grading workers are (``apex_core.grader.isolation.confined``), since every arm but the
original runs patched code, and the original runs under the same conditions so the arms compare
fairly.

Protocol, on the private pipe pair (never stdout, which the solution shares): ``load`` (the spec
and, for a server in a container, the patched files to mount) answers the workload's notes;
``step`` (a request seed chosen by the parent) answers the greedy tokens the step generated;
``audit`` (a request seed and another arm's tokens for it) answers each token's lead under this
worker's model (``apex_core.workloads.audit``), asked only of the original arm's worker, which runs
no patched code. The parent times each step by its own clock and judges the leads itself: the
worker reports no timing and no verdict.
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


def _audit(loaded: object, request: dict[str, object]) -> dict[str, object]:
    """The leads of another arm's tokens under this worker's model, or why not in one line (a server
    workload has no model here to audit with, nor tokens to audit). The parent ends the benchmark on
    a failed audit: the arms' timings cannot be credited without it."""
    from apex_core.workloads.audit import token_leads

    if not hasattr(loaded, "teacher_forced_logits"):
        return {"ok": False, "message": "this workload's stack has no in-process model to audit tokens with"}
    try:
        rows = request["rows"]
        return {"ok": True, "leads": token_leads(loaded, int(request["seed"]), rows)}  # type: ignore[arg-type]
    except BaseException as error:  # noqa: BLE001 - bad rows, or the model out of memory
        return {"ok": False, "message": f"{type(error).__name__}: {error}"[:600]}


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
            elif op == "audit" and loaded is not None:
                channel.reply(_audit(loaded, request))
            else:
                break
    finally:
        if loaded is not None:
            loaded.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

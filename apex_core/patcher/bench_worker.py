"""A workload held loaded in a child process, stepped on request: ``python -m apex_core.patcher.bench_worker SPEC``.

The final benchmark keeps two of these, one started before the patches were written (so it runs
the original stack) and one after, and times their steps alternately with its own clock. A
server workload in a container gets the patched files of its stack's points mounted (none exist
yet for vLLM or SGLang: their points come where those stacks are installed). The
worker only answers ``ready`` and ``done``; it reports no numbers, since the patched one runs
code an agent wrote.
"""

from __future__ import annotations

import sys
from pathlib import Path


def patched_files(stack: str) -> list[tuple[str, str]]:
    """(file, path relative to its site-packages) of every file the applied patches at points of
    ``stack`` changed or added (bytecode left out): what a container of that stack must mount."""
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


def main(argv: list[str] | None = None) -> int:
    from apex_core.workloads import load
    from apex_core.workloads.spec import WorkloadSpec

    spec = WorkloadSpec.model_validate_json((argv or sys.argv[1:])[0])
    loaded = load(spec, patched=patched_files(spec.stack))
    print("ready", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "step":
            loaded.step()
            print("done", flush=True)
        elif command == "quit":
            break
    loaded.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

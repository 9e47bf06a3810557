"""A workload held loaded in a child process, stepped on request: ``python -m apex_core.patcher.bench_worker SPEC``.

The final benchmark keeps two of these, one started before the patches were written (so it runs
the original stack) and one after, and times their steps alternately with its own clock. The
worker only answers ``ready`` and ``done``; it reports no numbers, since the patched one runs
code an agent wrote.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from apex_core.workloads import load
    from apex_core.workloads.spec import WorkloadSpec

    spec = WorkloadSpec.model_validate_json((argv or sys.argv[1:])[0])
    loaded = load(spec)
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

"""The CPU seconds each test spends, to choose what to cut when the CI machine's two cores are full.

Wall time (``durations.py``) cannot say where CI's time goes once the cores are saturated: every
test waits on the others, and a test that sleeps or waits on a child looks as long as one that
computes. CPU seconds can. With ``APEX_TEST_CPU_DIR`` set, each xdist worker appends, per test,
the CPU its own process and the children it reaped spent from setup to teardown (user + system,
``getrusage``) to ``<dir>/<pid>.jsonl``. A child that outlives the test (a session server) is
counted where it is reaped, and a test's share of a fixture is counted in the test that set it up.

Report: ``python tests/cpu_seconds.py DIR`` prints the tests and modules by CPU seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

DIR_ENV = "APEX_TEST_CPU_DIR"


def _spent() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@contextlib.contextmanager
def recorded(nodeid: str) -> Iterator[None]:
    """Around one test's setup, call and teardown: its CPU seconds, when ``APEX_TEST_CPU_DIR`` asks."""
    folder = os.environ.get(DIR_ENV)
    if not folder:
        yield
        return
    before = _spent()
    try:
        yield
    finally:
        line = json.dumps({"test": nodeid.split("@", 1)[0], "cpu_s": round(_spent() - before, 2)})
        with open(Path(folder) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
            out.write(line + "\n")


def report(folder: Path, top: int = 40) -> str:
    tests: Counter[str] = Counter()
    for path in folder.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            tests[row["test"]] += row["cpu_s"]
    modules: Counter[str] = Counter()
    for test, seconds in tests.items():
        modules[test.split("::", 1)[0]] += seconds
    lines = [f"{sum(tests.values()):,.0f} CPU seconds over {len(tests)} tests", "", "modules:"]
    lines += [f"{seconds:8.1f}  {module}" for module, seconds in modules.most_common(top)]
    lines += ["", "tests:"] + [f"{seconds:8.1f}  {test}" for test, seconds in tests.most_common(top)]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit(f"usage: python tests/cpu_seconds.py DIR (the folder {DIR_ENV} named for a run)")
    print(report(Path(sys.argv[1])))

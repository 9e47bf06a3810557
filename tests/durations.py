"""What each test took in the last full run on the CI machine, so the suite can start the longest work first.

xdist's ``loadgroup`` hands out work in scopes (a group's tests together, every other test alone),
in the order the scopes first appear in the collection. Left to its own order (groups by number of
tests, then the rest as collected), a long group or a long test met late kept one worker busy
while the other two had finished: the fresh-clone run of ``031111b`` ran 1,370 s for 3,695 s of
test time on three workers (1,232 s each, evenly spread). ``longest_first`` orders the work in
blocks by their recorded time, longest first (a greedy schedule whose tail is at most the last
block's length): a block is a group, or a module's tests that have none, so those stay next to each
other as collected and a module fixture is not set up again for every test that meets another
module's first.

``durations.json`` maps a test's dotted name (``tests.cli.test_cli.test_x[param]``, the same for a
node id and for a JUnit case) to seconds, for the tests of ``RECORDED_FROM_S`` or more (most take
less). Refresh it from a full run's JUnit file: ``python tests/durations.py JUNIT.xml``. A test it
does not hold counts as ``UNKNOWN_S``.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

DURATIONS_FILE = Path(__file__).with_name("durations.json")
RECORDED_FROM_S = 1.0
UNKNOWN_S = 0.1
"""About what a test under ``RECORDED_FROM_S`` takes on the CI machine (their mean was 0.07 s in the run of ``031111b``)."""


def dotted(nodeid: str) -> str:
    """``tests/a/test_b.py::TestC::test_d[x]@group`` -> ``tests.a.test_b.TestC.test_d[x]``."""
    path, _, rest = nodeid.split("@", 1)[0].partition("::")
    return ".".join([path.removesuffix(".py").replace("/", "."), *([rest.replace("::", ".")] if rest else [])])


def block_of(nodeid: str) -> str:
    """The test's group (``@name``: xdist hands out its tests together), else its module."""
    return "@" + nodeid.rsplit("@", 1)[1] if "@" in nodeid else nodeid.split("::", 1)[0]


def longest_first(nodeids: list[str], recorded: dict[str, float]) -> list[int]:
    """The positions of ``nodeids`` reordered: blocks by recorded total time, longest first (ties
    in collection order), each block's tests kept in their order."""
    totals: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, nodeid in enumerate(nodeids):
        block = block_of(nodeid)
        totals[block] = totals.get(block, 0.0) + recorded.get(dotted(nodeid), UNKNOWN_S)
        first.setdefault(block, index)
    return sorted(range(len(nodeids)), key=lambda i: (-totals[block_of(nodeids[i])], first[block_of(nodeids[i])], i))


def load() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS_FILE.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}  # no record: collection order, as xdist would


def from_junit(junit: Path) -> dict[str, float]:
    cases = ET.parse(junit).getroot().iter("testcase")
    return {f"{c.get('classname')}.{c.get('name', '').split('@', 1)[0]}": round(float(c.get("time", 0)), 1) for c in cases
            if float(c.get("time", 0)) >= RECORDED_FROM_S}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/durations.py JUNIT.xml (a full run's --junitxml file)")
    recorded = from_junit(Path(sys.argv[1]))
    DURATIONS_FILE.write_text(json.dumps(dict(sorted(recorded.items())), indent=0) + "\n")
    print(f"{len(recorded)} tests, {sum(recorded.values()):,.0f} s, written to {DURATIONS_FILE}")

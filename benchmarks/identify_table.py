"""Turn ``workloads_bench.py`` results into docs/tasks.md's table of where each model spends its
device time: per model and kernel kind, the share, and the task that covers it or why none does.

Usage::

    python benchmarks/workloads_bench.py --cases models --top 40 --out identify.json   # on a GPU
    python benchmarks/identify_table.py identify.json [more.json ...] [--min-share 0.01]

A kind's share is the sum over its kernels (several GEMM kernels are one ``gemm_bf16`` row). The
last column names the task the identifier matched (the model's own task of that kind), or why
there is none: a kind we have no kernel family for ("other"), or a kind with no task at this
model's shapes yet. Shares are of the profiled device time at the workload's reduced depth; the
results file records the depth and the device, which the table's heading repeats.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

MIN_SHARE = 0.01


def kind_rows(case: dict[str, Any], min_share: float = MIN_SHARE) -> list[tuple[str, float, str]]:
    """(kind, share, task or why not) for one case, largest share first, kinds under ``min_share`` left out."""
    shares: dict[str, float] = defaultdict(float)
    tasks: dict[str, str] = {}
    for kernel in case["top"]:
        shares[kernel["kind"]] += float(kernel["share"])
        if kernel.get("task_id"):
            tasks.setdefault(kernel["kind"], kernel["task_id"])
    rows = []
    for kind, share in sorted(shares.items(), key=lambda item: -item[1]):
        if share < min_share:
            continue
        if kind in tasks:
            covered = f"`{tasks[kind]}`"
        elif kind == "other":
            covered = "no task: not one of our kernel kinds"
        else:
            covered = "no task yet at this model's shapes"
        rows.append((kind, share, covered))
    return rows


def render(cases: list[dict[str, Any]], min_share: float = MIN_SHARE) -> str:
    """The markdown table, one block of rows per case, in the order given."""
    lines = ["| model (layers, device) | kernel kind | share of device time | task |", "|---|---|---|---|"]
    for case in cases:
        if "error" in case:  # the case failed in workloads_bench.py: say so, in one line
            lines.append(f"| {case['case']} | failed | | {' '.join(str(case['error']).split())[:200]} |")
            continue
        label = f"{case['case']} ({case['layers']}, {case['device']})"
        listed = sum(float(k["share"]) for k in case["top"])
        for number, (kind, share, covered) in enumerate(kind_rows(case, min_share)):
            lines.append(f"| {label if number == 0 else ''} | {kind} | {100 * share:.1f}% | {covered} |")
        lines.append(f"| | (kernels listed: {100 * listed:.1f}% of the time; mapped to a task: "
                     f"{100 * float(case['share_mapped_to_tasks']):.1f}%) | | |")
    return "\n".join(lines)


def read_cases(paths: list[Path]) -> list[dict[str, Any]]:
    """Every case of the files; a later file's result for a case replaces an earlier one's."""
    cases: dict[str, dict[str, Any]] = {}
    for path in paths:
        data = json.loads(path.read_text())
        for case in data if isinstance(data, list) else [data]:
            cases[case["case"]] = case
    return list(cases.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="workloads_bench.py --out files")
    parser.add_argument("--min-share", type=float, default=MIN_SHARE, help="leave out kinds under this share (0.01 = 1%%)")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.results if not p.is_file()]
    if missing:
        print(f"identify_table: no such file {', '.join(missing)}; give workloads_bench.py --out files", file=sys.stderr)
        return 2
    print(render(read_cases(args.results), args.min_share))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Turn `apex tasks verify --all --json` output into the table of docs/tasks.md.

Usage: ``python benchmarks/tasks_table.py verify1.json [verify2.json ...] > table.md`` (several
files when the verification was sharded over GPUs). Figures come only from the JSON: per task the
largest timed shape's baseline and reference-solution medians, the speedup there, and the fraction
of this device's measured copy bandwidth (memory-bound) or matmul rate (compute-bound) reached.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def rows(reports: list[dict]) -> list[str]:
    lines = []
    tasks = sorted((t for r in reports for t in r["tasks"]), key=lambda t: t["task_id"])
    for task in tasks:
        largest = task["shapes"][-1] if task["shapes"] else None
        verdict = "verified" if task["passed"] else "FAILED: " + "; ".join(task["problems"])[:120]
        if largest is None:
            lines.append(f"| {task['task_id']} | {verdict} | - | - | - | - | - |")
            continue
        shape = ", ".join(f"{k} {v}" for k, v in largest["shape"].items())
        fraction = largest.get("fraction_of_measured")
        roof = f"{100 * fraction:.0f}% ({largest['bound']})" if fraction else "-"
        overall = f"{task['speedup']:.2f}x" if task.get("speedup") else "1.00x (n.s.)"
        lines.append(
            f"| {task['task_id']} | {verdict} | {shape} | {largest['baseline_us']:.2f} | {largest['solution_us']:.2f} | "
            f"{largest['speedup']:.2f}x (overall {overall}) | {roof} |"
        )
    return lines


def main(paths: list[str]) -> None:
    reports = [json.loads(Path(p).read_text()) for p in paths]
    measured = next((r["measured"] for r in reports if r.get("measured")), None)
    if measured:
        matmul = ", ".join(f"{k} {v / 1e12:.0f} TFLOP/s" for k, v in measured["matmul_flops_per_s"].items())
        print(f"Measured on this device: copy {measured['copy_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s (read + write); matmul {matmul}.\n")
    print("| task | verify | largest timed shape | baseline (us) | reference solution (us) | speedup there | of measured roofline |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows(reports)))


if __name__ == "__main__":
    main(sys.argv[1:])

"""Turn `apex tasks verify` output into the table of docs/tasks.md.

Usage::

    python benchmarks/tasks_table.py RESULTS [RESULTS ...] [--copy-tbps 4.2 --bf16-tflops 783 --fp8-tflops 1430]

RESULTS are the JSON of ``--json`` or the lines of ``--jsonl``; several files when the verification
was sharded over GPUs or run in parts (a later file's verdict on a task replaces an earlier one's).
Figures come only from these files: per task the largest timed shape's baseline and
reference-solution medians, the speedup at every timed shape, and the fraction of this device's
measured copy bandwidth (memory-bound) or matmul rate (compute-bound) reached at the largest shape.
Given measured rates (the options) replace the ones each verifying process measured, so that one
table uses one reference (and so that runs whose own rates were wrong can be used: before
2026-11-30, verify timed a second GPU's rates with events on the wrong device).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apex_core.hardware.measured import MeasuredRates  # noqa: E402
from apex_core.tasks import get_task  # noqa: E402
from apex_core.suite.verify import BANDWIDTH_BAR, measured_rate  # noqa: E402


def read_report(path: Path) -> dict:
    """A ``--json`` report as is; ``--jsonl`` lines as a report of those tasks (no measured rates)."""
    text = path.read_text()
    if path.suffix == ".jsonl":
        return {"tasks": [json.loads(line) for line in text.splitlines() if line.strip()], "measured": None}
    return json.loads(text)


def latest_verdicts(reports: list[dict]) -> list[dict]:
    by_task: dict[str, dict] = {}
    for report in reports:
        for task in report["tasks"]:
            by_task[task["task_id"]] = task
    return sorted(by_task.values(), key=lambda t: t["task_id"])


def fraction(task_id: str, shape: dict, rates: MeasuredRates | None) -> float | None:
    """The shape's fraction of the measured rate: recomputed from ``rates`` when given."""
    task = get_task(task_id)
    if not task.needs_gpu:
        return None  # a CPU task: the GPU's rates do not apply
    if rates is None or not shape.get("achieved_per_s") or not shape.get("bound"):
        return shape.get("fraction_of_measured")
    return shape["achieved_per_s"] / measured_rate(task, shape["bound"], rates)


def rows(tasks: list[dict], rates: MeasuredRates | None) -> list[str]:
    lines = []
    for task in tasks:
        largest = task["shapes"][-1] if task["shapes"] else None
        verdict = "verified" if task["passed"] else "FAILED: " + "; ".join(task["problems"])[:140]
        if largest is None:
            lines.append(f"| {task['task_id']} | {verdict} | - | - | - | - | - | - |")
            continue
        shape = ", ".join(f"{k} {v}" for k, v in largest["shape"].items())
        reached = fraction(task["task_id"], largest, rates)
        roof = f"{100 * reached:.0f}% ({largest['bound']})" if reached else "-"
        if reached and largest["bound"] == "memory" and reached < BANDWIDTH_BAR:
            roof += " < 80%"
        overall = f"{task['speedup']:.2f}x" if task.get("speedup") else "1.00x (n.s.)"
        per_shape = " / ".join(f"{s['speedup']:.2f}" for s in task["shapes"])
        lines.append(
            f"| {task['task_id']} | {verdict} | {shape} | {largest['baseline_us']:.2f} | {largest['solution_us']:.2f} | "
            f"{per_shape} | {overall} | {roof} |"
        )
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--copy-tbps", type=float, help="measured copy bandwidth, TB/s (read + write)")
    parser.add_argument("--bf16-tflops", type=float, help="measured bf16 matmul rate, TFLOP/s")
    parser.add_argument("--fp8-tflops", type=float, help="measured fp8 matmul rate, TFLOP/s")
    args = parser.parse_args(argv)
    given = (args.copy_tbps, args.bf16_tflops, args.fp8_tflops)
    if any(given) and not all(given):
        parser.error("give all three of --copy-tbps, --bf16-tflops and --fp8-tflops, or none")
    rates = MeasuredRates(
        device="given",
        copy_bandwidth_bytes_per_s=args.copy_tbps * 1e12,
        matmul_flops_per_s={"bfloat16": args.bf16_tflops * 1e12, "float8_e4m3fn": args.fp8_tflops * 1e12},
    ) if all(given) else None
    reports = [read_report(path) for path in args.results]
    measured = next((r["measured"] for r in reports if r.get("measured")), None)
    if rates:
        print(f"Measured rates used: copy {args.copy_tbps:.2f} TB/s (read + write); matmul bf16 {args.bf16_tflops:.0f}, "
              f"fp8 {args.fp8_tflops:.0f} TFLOP/s.\n")
    elif measured:
        matmul = ", ".join(f"{k} {v / 1e12:.0f} TFLOP/s" for k, v in measured["matmul_flops_per_s"].items())
        print(f"Measured on this device: copy {measured['copy_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s (read + write); matmul {matmul}.\n")
    print("| task | verify | largest timed shape | baseline (us) | reference solution (us) | speedup per timed shape "
          "| overall speedup | of measured roofline at the largest shape |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows(latest_verdicts(reports), rates)))


if __name__ == "__main__":
    main(sys.argv[1:])

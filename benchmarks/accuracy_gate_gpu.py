"""The accuracy gate's bf16 figures on a GPU: what correct kernels move the logits by, and whether a
near miss is caught, at the Llama-3.1 + Liger points and the Qwen3.5 + fla point (not a test).

For each scenario the environment is restored, the scenario's solutions are patched in at the
points of the workload's kernel stack, and ``apex_core.patcher.accuracy.accuracy_gate`` runs exactly
as ``apex patch check`` does (confined children, the workload's random weights, fixed prompts,
greedy decode); then everything is restored. Scenarios:

- ``llama-reference``: our reference solutions of rms_norm, rope and silu_and_mul at Liger's points;
- ``llama-baseline``: the three task baselines there (what the final benchmark's control arm runs);
- ``llama-near-miss``: an RMSNorm with eps outside the square root (passes the task's tolerance on
  standard-normal rows; the CPU test's near miss, in bf16): does the bf16 budget catch it?
- ``qwen-reference`` / ``qwen-baseline``: our gated delta rule / the task baseline at fla's point;
- ``cpu-mini-reference``: the canned solution in cpu-mini (float32), to try this script anywhere.

The bf16 thresholds (``accuracy_compare.BUDGETS``) hold when every reference and baseline set
passes with room (the ``headroom`` column: threshold over figure). Our own reference and baseline
files are patched in without the in-model check (``already_checked``: they passed it at these points
on the H200 on 2026-12-01, and the gate's children run them anyway); the near miss is checked.

Run on the GPU machine (with Liger and fla installed, as for the points run of 2026-12-01), each
model in its own call so that each stays within ten minutes:

    python3 benchmarks/accuracy_gate_gpu.py --scenarios llama-reference,llama-baseline,llama-near-miss --out "$OUT"
    python3 benchmarks/accuracy_gate_gpu.py --scenarios qwen-reference,qwen-baseline --out "$OUT"

Each scenario writes ``<out>/accuracy-<scenario>.json`` (the gate's report) as soon as it is done
and one summary line to stdout; ``<out>/accuracy-summary.jsonl`` collects the lines.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LLAMA, QWEN = "llama-3-1-8b-instruct", "qwen3-5-27b"
LLAMA_TASKS = [f"{LLAMA}__rms_norm", f"{LLAMA}__rope", f"{LLAMA}__silu_and_mul"]
QWEN_TASKS = [f"{QWEN}__gated_delta_rule"]
NEAR_MISS_RMS_NORM = '''
import torch


def rms_norm(x, weight, eps):
    x32 = x.to(torch.float32)
    rms = x32.pow(2).mean(dim=-1, keepdim=True).sqrt()
    return (x32 / (rms + eps) * weight.to(torch.float32)).to(x.dtype)
'''
SCENARIOS = {
    "llama-reference": (LLAMA, "liger", [(t, "reference") for t in LLAMA_TASKS]),
    "llama-baseline": (LLAMA, "liger", [(t, "baseline") for t in LLAMA_TASKS]),
    "llama-near-miss": (LLAMA, "liger", [(f"{LLAMA}__rms_norm", "near-miss")]),
    "qwen-reference": (QWEN, "fla", [(t, "reference") for t in QWEN_TASKS]),
    "qwen-baseline": (QWEN, "fla", [(t, "baseline") for t in QWEN_TASKS]),
    "cpu-mini-reference": ("cpu-mini", None, [("cpu-mini__rms_norm", "reference")]),
}
"""The last one runs on any machine: a smoke test of this script (float32, the canned solution)."""


def solution_file(task_id: str, kind: str, folder: Path) -> Path:
    from apex_core.tasks import get_task
    from apex_core.tasks.reference_solutions import reference_solution_path

    task = get_task(task_id)
    if kind == "reference":
        found = reference_solution_path(task)
        if found is None:
            raise SystemExit(f"{task_id}: no reference solution here")
        return found
    if kind == "baseline":
        return task.baseline_path
    path = folder / f"{task_id}-near-miss.py"
    path.write_text(NEAR_MISS_RMS_NORM)
    return path


def run(name: str, out: Path, prompts: int, tokens: int) -> dict[str, object]:
    from apex_core.grader import file_hash
    from apex_core.patcher import restore, status
    from apex_core.patcher.accuracy import accuracy_gate
    from apex_core.patcher.apply import apply_solutions
    from apex_core.workloads import customize, get_workload

    model, stack, members = SCENARIOS[name]
    spec = customize(get_workload(model), kernels=stack) if stack else get_workload(model)
    results = Path(tempfile.mkdtemp(prefix=f"apex-accuracy-{name}-"))
    pairs = [(task, solution_file(task, kind, results)) for task, kind in members]
    started = time.perf_counter()
    restore()
    try:
        from apex_core.patcher.points import point_for
        from apex_core.tasks import get_task

        ours = frozenset((task, file_hash(path), point_for(get_task(task), None, spec.kernels).id)
                         for (task, path), (_, kind) in zip(pairs, members) if kind != "near-miss")
        applied = apply_solutions(pairs, results, kernel_stacks=spec.kernels, already_checked=ours)
        refused = [f"{a.task_id}: {a.reason}" for a in applied if not a.applied]
        if refused:
            line = {"scenario": name, "error": "not applied: " + "; ".join(refused)}
        else:
            report = accuracy_gate(spec, results, prompts=prompts, tokens=tokens,
                                   progress=lambda f, m: print(f"  [{name}] {f:4.0%} {m}", file=sys.stderr, flush=True))
            (out / f"accuracy-{name}.json").write_text(json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
            trials = []
            for tried in report.trials:
                figures = tried.comparison.logits if tried.comparison else None
                words = tried.comparison.tokens if tried.comparison else None
                trials.append({
                    "patches": [p.task_id.split("__")[1] for p in tried.patches], "passed": tried.passed,
                    "relative": figures and figures.relative, "max_abs": figures and figures.max_abs,
                    "max_abs_ratio": figures and figures.max_abs_ratio, "kl_max": figures and figures.kl_max,
                    "tokens": words and f"{words.agreed}/{words.compared} agreed, {words.near_ties} near-ties",
                    "headroom": figures and round(report.thresholds.relative / max(figures.relative, 1e-30), 1),
                    "reason": tried.reason[:300],
                })
            line = {"scenario": name, "dtype": report.thresholds.dtype, "budget": report.thresholds.relative,
                    "passed": report.passed, "culprits": [c.task_id for c in report.culprits], "trials": trials}
    except Exception as error:  # noqa: BLE001 - one scenario's failure is a figure too; the next still runs
        line = {"scenario": name, "error": f"{type(error).__name__}: {error}"[:600]}
    finally:
        restore()
    line["seconds"] = round(time.perf_counter() - started, 1)
    line["restored"] = status() is None
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default=",".join(s for s in SCENARIOS if not s.startswith("cpu")), help=f"comma-separated, of {', '.join(SCENARIOS)}")
    parser.add_argument("--out", type=Path, default=Path("."), help="folder for the reports and the summary")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    chosen = [s for s in args.scenarios.split(",") if s]
    unknown = [s for s in chosen if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {unknown[0]}; the scenarios are {', '.join(SCENARIOS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    print(json.dumps({"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                      "torch": torch.__version__}), flush=True)
    for name in chosen:
        line = run(name, args.out, args.prompts, args.tokens)
        print(json.dumps(line), flush=True)
        with open(args.out / "accuracy-summary.jsonl", "a", encoding="utf-8") as summary:
            summary.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

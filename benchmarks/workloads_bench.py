"""The first two stages on real workloads: benchmark, profile and identify, with the figures the
docs report (docs/benchmarks.md, "Workloads").

For each (workload, kernel stacks): tokens/s over N runs with their CV, the profiler's overhead
(profiled against unprofiled time of the same request mixes), the top kernels with kind, source
and task, and the share of device time (CPU time on the CPU) whose kernel maps to one of our tasks.

Run: ``python benchmarks/workloads_bench.py --cases cpu-mini --out FILE.json`` here, or on a GPU
``--cases llama-3-1-8b-instruct,llama-3-1-8b-instruct+liger,qwen3-5-27b,qwen3-5-27b+fla,gpt-oss-20b,deepseek-r1``,
or ``--cases models``: every registry model's embedded workload (the 24 of issue 30), one after
another; each top kernel then carries the shapes it was called with (recorded, or the profiler's),
from which tasks at observed shapes are made.
Record what it prints, with machine, date and commit, in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apex_core.analysis import profile_workload  # noqa: E402
from apex_core.pipeline.stages.identify import identify_run  # noqa: E402
from apex_core.workloads import benchmark, customize, get_workload  # noqa: E402
from apex_core.workloads.runner import DEFAULT_MIN_RUN_S  # noqa: E402


def one_case(case: str, runs: int, top: int, root: Path, min_run_s: float, calls: int = 3) -> dict:
    workload, _, kernels = case.partition("+")
    spec = customize(get_workload(workload), kernels=kernels or None)
    started = time.perf_counter()
    measured = benchmark(spec, runs=runs, results_dir=root, min_run_s=min_run_s)
    benchmarked = time.perf_counter()
    profile, run_dir = profile_workload(spec, root, calls=calls)
    profiled = time.perf_counter()
    everything = identify_run(run_dir, top_k=None)
    mapped = sum(k.device_time_share for k in everything.kernels if k.task_id)
    top_kernels = [
        {"name": k.name[:90], "kind": k.kind, "share": round(k.device_time_share, 4), "source": k.source,
         "patchable": k.patchable, "task_id": k.task_id, "shapes_from": k.shapes_from,
         "shapes": [record.model_dump(mode="json") for record in k.shapes[:4]]}
        for k in everything.kernels[:top]
    ]
    return {
        "case": case, "device": measured.workload.device, "layers": measured.workload.layers,
        "tokens_per_s": measured.tokens_per_s, "prefill_tokens_per_s": measured.prefill_tokens_per_s,
        "decode_tokens_per_s": measured.decode_tokens_per_s, "cv": measured.cv, "runs": runs,
        "runs_tokens_per_s": [round(run.tokens_per_s, 1) for run in measured.runs],
        "request_mixes_per_run": measured.request_mixes_per_run, "min_run_s": min_run_s,
        "decode_mode": measured.decode_mode, "graph_fallback": measured.graph_fallback,
        "profiler_overhead": profile.overhead, "share_mapped_to_tasks": round(mapped, 4), "top": top_kernels,
        "profiled_calls": calls, "elapsed_s": round(time.perf_counter() - started, 1),
        # Where a model's minute or two goes, to choose what to cut (the profiler's event list grows
        # with depth x decode steps x calls; the model is built three times: benchmark, profile, shapes).
        "phases_s": {"benchmark": round(benchmarked - started, 1), "profile": round(profiled - benchmarked, 1),
                     "identify": round(time.perf_counter() - profiled, 1)},
    }


def _release() -> None:
    """Free what the last case left on the device before the next model is built (24 in a row)."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _write(out: Path | None, results: list[dict]) -> None:
    """The results so far (after every case: a long run stopped midway keeps what it measured)."""
    if out:
        out.write_text(json.dumps(results, indent=1) + "\n")


def _cases(text: str) -> list[str]:
    """The comma-separated cases; ``models`` stands for every registry model's embedded workload."""
    from apex_core.workloads import list_workloads

    cases: list[str] = []
    for case in text.split(","):
        if case == "models":
            cases += [s.id for s in list_workloads() if s.stack == "transformers" and s.id != "cpu-mini"]
        else:
            cases.append(case)
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="cpu-mini", help="comma-separated workload ids, '+stack' for kernel stacks")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--min-run-s", type=float, default=DEFAULT_MIN_RUN_S)
    parser.add_argument("--calls", type=int, default=3,
                        help="request mixes profiled per case (a mix repeats the same kernels; 1 takes a third of the profiler's time)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="apex-workloads-bench-") as folder:
        for case in _cases(args.cases):
            try:
                row = one_case(case, args.runs, args.top, Path(folder), args.min_run_s, args.calls)
            except Exception as error:  # noqa: BLE001 - one model's failure is its row; the others still run
                results.append({"case": case, "error": f"{type(error).__name__}: {error}"[:2000],
                                "traceback": traceback.format_exc()[-4000:]})
                print(f"{case}: failed: {results[-1]['error'][:300]}", flush=True)
                _write(args.out, results)
                _release()
                continue
            results.append(row)
            _write(args.out, results)
            _release()
            cv = f"{100 * row['cv']:.1f}%" if row["cv"] is not None else "-"
            print(f"{case}: {row['tokens_per_s']:.0f} tok/s (prefill {row['prefill_tokens_per_s']:.0f}, decode "
                  f"{row['decode_tokens_per_s']:.0f}), cv {cv} over {args.runs} runs, profiler overhead "
                  f"{100 * (row['profiler_overhead'] or 0):.1f}%, {100 * row['share_mapped_to_tasks']:.1f}% of the time maps to a task; "
                  f"{row['request_mixes_per_run']} mixes per run, runs {row['runs_tokens_per_s']}; "
                  f"{row['elapsed_s']:.0f} s ({', '.join(f'{k} {v:.0f}' for k, v in row['phases_s'].items())})",
                  flush=True)
            for k in row["top"]:
                print(f"  {100 * k['share']:5.1f}%  {k['kind']:<18} {k['task_id'] or '-':<34} {'patchable' if k['patchable'] else '-':<9} {k['name']}")


if __name__ == "__main__":
    main()

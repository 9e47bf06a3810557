"""The GPU check of graph-captured workloads, and the figures to choose the default depth from.

For Llama-3.1-8B (``--workload``) at several depths (``--depths 2,4,8,full``), with and without
Liger (``--kernels none,liger``), each kernel stack in its own process (Liger's patches are
process-wide):

- how decode ran (``decode_mode``: graph, or eager with ``graph_fallback`` saying why), the load
  time, and whether graph decode gave eager decode's greedy tokens for one seed;
- tokens/s (all, prefill, decode) over ``--runs`` runs under graphs, their CV, and the drift of a
  second group of runs measured after the profiling (target: CV and drift each within 2%);
- the share of device time of the kernels Apex's tasks replace (rms_norm, silu_and_mul, rope), from
  one profiled request mix of the same model decoding eagerly over the same static cache (the same
  kernels the graph replays; under a graph the profiler cannot tell which op launched a kernel),
  classified by ``apex_core.identify.kinds`` as ``apex identify`` does; and each depth's share over
  the full depth's (target: within 20%);
- eager tokens/s of the same mix (the profiler's unprofiled call) beside the graph's, and the total
  kernel time of one graph-replayed mix beside the eager one's.

Then, in a last process and unless ``--families ''``, the other embedded defaults (Qwen3.5, GPT-OSS,
DeepSeek-R1) at their default depth: decode mode or fallback, tokens/s under graphs, CV, drift, and
whether graph decode gave eager decode's tokens.

Run on the GPU: ``python benchmarks/workload_depth.py --out depth.json`` (about 6-9 minutes on an
H200; ``--budget-s`` stops starting new cases in time and marks them skipped, and the JSON is
rewritten after every case, so a cut run keeps what it measured). Dry run of the logic on the CPU:
``python benchmarks/workload_depth.py --workload cpu-mini --depths 1,2,full --kernels none --families '' --runs 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_KINDS = ("rms_norm", "silu_and_mul", "rope")
CV_TARGET = 0.02
DRIFT_TARGET = 0.02
SHARE_TARGET = 0.20
FAMILIES = "qwen3-5-27b,gpt-oss-20b,deepseek-r1"
ROW = "ROW "


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- the child: one kernel stack, every depth -----------------------------------------------------


def _kind(row: Any) -> str:
    """A profile row's kind, by the identifier's module and name rules (no source index)."""
    from apex_core.identify.kinds import kind_from_module, kind_from_name

    return kind_from_module(row.module, row.launch_op or row.name) or kind_from_name(row.name) or "other"


def _shares(profile: Any) -> dict[str, float]:
    shares = {kind: 0.0 for kind in TARGET_KINDS}
    for row in profile.kernels:
        kind = _kind(row)
        if kind in shares:
            shares[kind] += row.share
    return shares


def _tokens_per_mix(spec: Any) -> int:
    return spec.batch * (spec.prompt_tokens + spec.decode_tokens)


def _runs(loaded: Any, first_index: int, count: int) -> tuple[list[Any], dict[str, Any]]:
    from apex_core.workloads.results import summarize
    from apex_core.workloads.runner import measure_run

    runs = [measure_run(loaded, first_index + i, 1) for i in range(count)]
    return runs, summarize(runs)


def _eager_twin(loaded: Any) -> Any:
    """The same model decoding eagerly over its own static cache (no second copy of the weights)."""
    from apex_core.workloads.embedded import EmbeddedWorkload

    return EmbeddedWorkload(loaded.spec.model_copy(update={"graphs": False}), loaded.model, [])


def measure(workload: str, depth: str, kernels: str, runs: int, device: str, profile_it: bool) -> dict[str, Any]:
    from apex_core.profiling import capture
    from apex_core.workloads import customize, get_workload, load

    started = time.perf_counter()
    spec = customize(get_workload(workload), layers=depth if depth != "default" else None, kernels=kernels or None,
                     device=None if device == "auto" else device)
    loaded = load(spec)
    row: dict[str, Any] = {
        "workload": workload, "kernels": kernels or "none", "depth": depth, "layers": loaded.spec.layers,
        "batch": loaded.spec.batch, "prompt_tokens": loaded.spec.prompt_tokens, "decode_tokens": loaded.spec.decode_tokens,
        "dtype": loaded.spec.dtype, "device": loaded.spec.device, "decode_mode": loaded.decode_mode,
        "graph_fallback": loaded.graph_fallback, "load_s": round(time.perf_counter() - started, 1),
    }
    twin = None
    try:
        for _ in range(2):
            loaded.step()
        first, summary = _runs(loaded, 0, runs)
        row.update({
            "tokens_per_s": summary["tokens_per_s"], "prefill_tokens_per_s": summary["prefill_tokens_per_s"],
            "decode_tokens_per_s": summary["decode_tokens_per_s"], "cv": summary["cv"],
            "runs_tokens_per_s": [round(r.tokens_per_s, 2) for r in first],
            "decode_step_ms_p50": summary["latency_ms"]["decode_step"].p50,
            "run_digests_agree": len({r.token_digest for r in first}) == 1,
        })
        twin = _eager_twin(loaded)
        graph_step, eager_step = loaded.step(seed=12345), twin.step(seed=12345)
        row["graph_tokens_equal_eager"] = graph_step.token_digest == eager_step.token_digest
        if profile_it:
            eager_profile = capture(twin.step, calls=1, warmup=1, device=loaded.spec.device)
            shares = _shares(eager_profile)
            row.update({
                "shares": {k: round(v, 5) for k, v in shares.items()}, "target_share": round(sum(shares.values()), 5),
                "eager_tokens_per_s": _tokens_per_mix(loaded.spec) / eager_profile.unprofiled_wall_s,
                "eager_kernel_time_ms": round(eager_profile.total_time_us / 1e3, 3),
                "eager_profile_notes": eager_profile.notes,
            })
            try:
                graph_profile = capture(loaded.step, calls=1, warmup=0, device=loaded.spec.device)
                row.update({"graph_kernel_time_ms": round(graph_profile.total_time_us / 1e3, 3),
                            "graph_kernel_rows": len(graph_profile.kernels), "graph_profile_notes": graph_profile.notes})
            except Exception as error:  # the figure is a cross-check; its failure is reported, not fatal
                row["graph_profile_error"] = f"{type(error).__name__}: {error}"[:300]
        second, later = _runs(loaded, runs, runs)
        row["later_tokens_per_s"] = later["tokens_per_s"]
        row["later_cv"] = later["cv"]
        row["drift"] = later["tokens_per_s"] / summary["tokens_per_s"] - 1 if summary["tokens_per_s"] else None
        row["cv_all_runs"] = _cv([r.tokens_per_s for r in first + second])
    finally:
        if twin is not None:
            twin.close()
        loaded.close()
    row["elapsed_s"] = round(time.perf_counter() - started, 1)
    return row


def _cv(values: list[float]) -> float | None:
    if len(values) < 2 or statistics.fmean(values) <= 0:
        return None
    return statistics.stdev(values) / statistics.fmean(values)


def child(args: argparse.Namespace) -> None:
    cases = [("depth", args.workload, depth) for depth in args.depths.split(",") if depth]
    cases += [("family", family, "default") for family in args.families.split(",") if family]
    for kind, workload, depth in cases:
        if time.time() > args.deadline:
            print(ROW + json.dumps({"case": kind, "workload": workload, "kernels": args.kernels or "none", "depth": depth,
                                    "skipped": "out of time (--budget-s)"}), flush=True)
            continue
        _log(f"{workload} {depth} kernels={args.kernels or 'none'}")
        try:
            row = measure(workload, depth, args.kernels, args.runs, args.device, profile_it=(kind == "depth"))
        except Exception as error:
            import traceback

            traceback.print_exc()
            row = {"workload": workload, "kernels": args.kernels or "none", "depth": depth,
                   "error": f"{type(error).__name__}: {error}"[:500]}
        row["case"] = kind
        print(ROW + json.dumps(row), flush=True)
        _log(f"done in {row.get('elapsed_s', '-')} s")


# --- the parent: one child per kernel stack, the summary ---------------------------------------


def _pct(value: Any, digits: int = 2) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{100 * value:.{digits}f}%"


def _mark(ok: bool | None) -> str:
    return "" if ok is None else (" ok" if ok else " MISS")


def summarize_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Shares against full depth and the targets met, per kernel stack."""
    verdicts: dict[str, Any] = {}
    for stack in sorted({r["kernels"] for r in rows if r.get("case") == "depth"}):
        depth_rows = [r for r in rows if r.get("case") == "depth" and r["kernels"] == stack and "target_share" in r]
        full = next((r for r in depth_rows if r["depth"] == "full"), None)
        for r in depth_rows:
            if full and full["target_share"] > 0:
                r["share_over_full"] = r["target_share"] / full["target_share"]
                r["share_within_target"] = abs(r["share_over_full"] - 1) <= SHARE_TARGET
            r["cv_within_target"] = r.get("cv") is not None and r["cv"] <= CV_TARGET
            r["drift_within_target"] = r.get("drift") is not None and abs(r["drift"]) <= DRIFT_TARGET
        verdicts[stack] = {
            r["depth"]: {"layers": r["layers"], "share_within_target": r.get("share_within_target"),
                         "cv_within_target": r["cv_within_target"], "drift_within_target": r["drift_within_target"],
                         "decode_mode": r.get("decode_mode")}
            for r in depth_rows
        }
    return verdicts


def print_summary(rows: list[dict[str, Any]]) -> None:
    print("\n== depth sweep (graphs; shares from an eager profile of the same mix) ==")
    header = (f"{'kernels':<7} {'depth':>5} {'layers':>6} {'decode':<13} {'tok/s':>10} {'prefill':>10} {'decode':>9} "
              f"{'CV':>9} {'drift':>10} {'eager tok/s':>11} {'target share':>12} {'/full':>10}  rms/silu/rope")
    print(header)
    for r in rows:
        if r.get("case") != "depth":
            continue
        if "error" in r or "skipped" in r:
            print(f"{r['kernels']:<7} {r['depth']:>5}  {r.get('error') or r.get('skipped')}")
            continue
        shares = r.get("shares") or {}
        over = r.get("share_over_full")
        print(f"{r['kernels']:<7} {r['depth']:>5} {r['layers']:>6} {r['decode_mode']:<13} {r['tokens_per_s']:>10,.1f} "
              f"{r['prefill_tokens_per_s']:>10,.0f} {r['decode_tokens_per_s']:>9,.1f} "
              f"{_pct(r['cv']):>6}{_mark(r.get('cv_within_target')):<3} {_pct(r.get('drift')):>7}{_mark(r.get('drift_within_target')):<3} "
              f"{r.get('eager_tokens_per_s', 0):>11,.1f} {_pct(r.get('target_share')):>12} "
              f"{('-' if over is None else f'{over:.3f}'):>6}{_mark(r.get('share_within_target')):<4}  "
              + "/".join(_pct(shares.get(k), 1) for k in TARGET_KINDS))
        if r.get("graph_fallback"):
            print(f"        graph fallback: {r['graph_fallback']}")
        print(f"        graph tokens = eager tokens: {r.get('graph_tokens_equal_eager')}; runs' digests agree: "
              f"{r.get('run_digests_agree')}; kernel time per mix graph {r.get('graph_kernel_time_ms', '-')} ms vs eager "
              f"{r.get('eager_kernel_time_ms', '-')} ms; load {r['load_s']} s, case {r['elapsed_s']} s"
              + (f"; graph profile error: {r['graph_profile_error']}" if r.get("graph_profile_error") else ""))
    families = [r for r in rows if r.get("case") == "family"]
    if families:
        print("\n== other embedded defaults (graphs) ==")
        for r in families:
            if "error" in r or "skipped" in r:
                print(f"{r['workload']:<22} {r.get('error') or r.get('skipped')}")
                continue
            print(f"{r['workload']:<22} {r['layers']} layers  decode {r['decode_mode']:<12} {r['tokens_per_s']:>10,.1f} tok/s "
                  f"(prefill {r['prefill_tokens_per_s']:,.0f}, decode {r['decode_tokens_per_s']:,.1f}), CV {_pct(r['cv'])}, "
                  f"drift {_pct(r.get('drift'))}, graph tokens = eager: {r.get('graph_tokens_equal_eager')}, load {r['load_s']} s")
            if r.get("graph_fallback"):
                print(f"{'':<22} graph fallback: {r['graph_fallback']}")


def parent(args: argparse.Namespace) -> None:
    started = time.time()
    stacks = [("" if k == "none" else k) for k in args.kernels.split(",") if k]
    rows: list[dict[str, Any]] = []
    out = Path(args.out) if args.out else None

    def save() -> None:
        if out is not None:
            payload = {"workload": args.workload, "depths": args.depths, "runs": args.runs,
                       "targets": {"cv": CV_TARGET, "drift": DRIFT_TARGET, "share_over_full": SHARE_TARGET},
                       "elapsed_s": round(time.time() - started, 1), "verdicts": summarize_rows(rows), "rows": rows}
            out.write_text(json.dumps(payload, indent=1) + "\n")

    # One process per kernel stack for the depth sweep, then one for the other defaults; each may start
    # cases until its share of the budget is spent (the sweeps weigh more: they choose the depth).
    jobs = [(stack, args.depths, "", 1.0) for stack in stacks]
    if args.families:
        jobs.append(("", "", args.families, 0.6))
    total = sum(weight for *_, weight in jobs)
    spent = 0.0
    for stack, depths, families, weight in jobs:
        spent += weight
        deadline = started + args.budget_s * spent / total
        command = [sys.executable, __file__, "--child", "--workload", args.workload, "--depths", depths,
                   "--kernels", stack, "--runs", str(args.runs), "--device", args.device, "--deadline", str(deadline),
                   "--families", families]
        _log(f"process for {'depths ' + depths if depths else 'families ' + families}, kernels={stack or 'none'}")
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(ROW):
                rows.append(json.loads(line[len(ROW):]))
                save()
            else:
                print(line, end="", file=sys.stderr)
        if process.wait() != 0:
            rows.append({"case": "process", "kernels": stack or "none", "error": f"exit code {process.returncode}"})
            save()
    summarize_rows(rows)
    print_summary(rows)
    save()
    print(f"\ntargets: CV <= {100 * CV_TARGET:.0f}% over {args.runs} runs, |drift| <= {100 * DRIFT_TARGET:.0f}%, "
          f"target share within {100 * SHARE_TARGET:.0f}% of full depth's; elapsed {time.time() - started:.0f} s"
          + (f"; JSON: {out}" if out else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="llama-3-1-8b-instruct")
    parser.add_argument("--depths", default="full,2,4,8", help="comma-separated layer counts or 'full' (full first: the reference)")
    parser.add_argument("--kernels", default="none,liger", help="kernel stacks, one process each: none, liger, fla")
    parser.add_argument("--families", default=FAMILIES, help="other workloads checked at their default depth ('' for none)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--budget-s", type=float, default=540.0, help="start no case after this many seconds")
    parser.add_argument("--out", default=None, help="JSON of every figure (rewritten after each case)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, default=float("inf"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runs < 2:
        parser.error("--runs must be 2 or more (a CV needs two runs)")
    if args.child:
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()

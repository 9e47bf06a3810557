"""The stages of ``apex run``, each a function of the run's state built on the stage packages below:
the workload benchmark, profile and identification, the agents' loop, a fresh grading of each
best solution, integration, the final benchmark, the scores and the report.

A stage reads what earlier stages left in the state and writes its own results there; the runner
saves the state after each. Stages after a stage that found nothing to do are skipped with a
reason, never run on nothing.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from apex_core.errors import ApexUserError
from apex_core.executors import Executor
from apex_core.grader.options import GradeOptions
from apex_core.hardware.target import resolve_target
from apex_core.pipeline.knowledge import KnowledgeBase
from apex_core.pipeline.optimize import grade_with_retries, optimize_kernel, summarize
from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.figures import BaselineFigures, FinalFigures, KernelOutcome, ScoreSummary
from apex_core.pipeline.state import KernelRecord, RunState
from apex_core.progress import Progress, reporter
from apex_core.score import model_reward
from apex_core.tasks import get_task
from apex_core.tasks.schema import Task
from apex_core.workloads import customize, get_workload
from apex_core.workloads.spec import WorkloadSpec

BENCHMARK_DIR, PROFILE_DIR, GRADINGS_DIR = "benchmark", "profile", "gradings"
SUMMARY_FILE = "results_summary.json"


class Skip(Exception):
    """The stage has nothing to do; its message says why (the stage is recorded as skipped)."""


def workload_spec(state: RunState) -> WorkloadSpec:
    config = state.config
    return customize(get_workload(config.workload), layers=config.layers, kernels=config.kernels or None)


def benchmark_stage(state: RunState, progress: Progress | None) -> str:
    from apex_core.patcher.original import refuse_if_patched
    from apex_core.workloads.runner import benchmark

    if state.config.tasks:
        raise Skip("optimizing the given tasks alone: no workload to measure")
    refuse_if_patched("the run's first benchmark")
    result = benchmark(workload_spec(state), state.config.runs, cache_hours=state.config.cache_hours,
                       results_dir=state.folder / BENCHMARK_DIR, progress=progress)
    state.baseline = BaselineFigures(tokens_per_s=result.tokens_per_s, cv=result.cv, runs=[r.tokens_per_s for r in result.runs],
                                     cached=result.cached, file=str(Path(result.results_dir) / "benchmark.json"),
                                     workload=result.workload.model_dump(mode="json"))
    cv = f", CV {result.cv:.1%}" if result.cv is not None else ""
    return f"{result.tokens_per_s:,.0f} tokens/s over {len(result.runs)} runs{cv}"


def identify_stage(state: RunState, progress: Progress | None) -> str:
    from apex_core.analysis.identify_run import identify_run
    from apex_core.analysis.profile_run import profile_workload

    if state.config.tasks:
        state.kernels = [_given(task_id, rank) for rank, task_id in enumerate(state.config.tasks, start=1)]
        return "the given task(s): " + ", ".join(state.config.tasks)
    report = reporter(progress)
    _, run_dir = profile_workload(workload_spec(state), state.folder / PROFILE_DIR,
                                  progress=lambda f, m: report(0.5 * f, m))
    found = identify_run(run_dir, top_k=None, progress=lambda f, m: report(0.5 + 0.5 * f, m))
    state.identify_file = str(run_dir / "identify.json")
    languages = set(state.config.languages)
    stacks = workload_spec(state).kernels
    chosen: list[KernelRecord] = []
    skipped: list[str] = []
    for kernel in found.kernels:  # ranked by device time
        if len(chosen) >= state.config.top_k:
            break
        if kernel.task_id is None or any(k.task_id == kernel.task_id for k in chosen):
            continue
        task = get_task(kernel.task_id)
        if "all" not in languages and task.language not in languages:
            skipped.append(f"{task.id} ({task.language})")
            continue
        if not kernel.patchable:
            skipped.append(f"{task.id} (not patchable: {kernel.patchable_reason})")
            continue
        if not _has_patch_point(task, stacks):
            skipped.append(f"{task.id} (no patch point in the stacks installed here: it could not be integrated)")
            continue
        chosen.append(KernelRecord(task_id=task.id, kernel=task.kernel, language=task.language, difficulty=task.difficulty,
                                   rank=kernel.rank, kernel_name=kernel.name, device_time_share=kernel.device_time_share))
    state.kernels = chosen
    skipped = list(dict.fromkeys(skipped))  # one line per task and reason, not one per profiled kernel (8 GEMMs of one task)
    if not chosen:
        raise Skip(f"none of the {len(found.kernels)} profiled kernels has a task to optimize here"
                   + (f" (left out: {', '.join(skipped)})" if skipped else ""))
    return (f"{len(chosen)} kernel(s) to optimize: "
            + ", ".join(f"{k.task_id} ({k.device_time_share:.1%})" for k in chosen)
            + (f"; left out: {', '.join(skipped)}" if skipped else ""))


def _has_patch_point(task: Task, kernel_stacks: tuple[str, ...]) -> bool:
    """Whether a winner of ``task`` could be integrated here: optimizing a kernel that no stack
    lets us patch (GPT-OSS's cuBLAS GEMMs, an MoE with no point yet) would spend the run's
    iterations on a result the model never runs."""
    from apex_core.patcher.points import point_for

    try:
        point_for(task, kernel_stacks=kernel_stacks)
    except ApexUserError:
        return False
    return True


def grading_devices(kernels: int) -> list[str | None]:
    """The GPU each kernel's gradings run on: round robin over this machine's GPUs, so kernels
    optimized in parallel spread over them (one grading per GPU at a time: ``optimize``'s locks);
    None (the grader's default) without GPUs."""
    from apex_core.grader.devices import gpu_count

    count = gpu_count()
    return [f"cuda:{i % count}" if count else None for i in range(kernels)]


@contextlib.contextmanager
def grading_executor(config: RunConfig) -> Iterator[Executor | None]:
    """The Ray executor a run's gradings go through with ``--executor ray`` (closed after the
    stage); None for the local executor, whose gradings run in this process as they always have."""
    if config.executor != "ray":
        yield None
        return
    from apex_core.executors import make_executor

    with make_executor("ray", config.ray_address) as executor:
        yield executor


def _given(task_id: str, rank: int) -> KernelRecord:
    task = get_task(task_id)
    return KernelRecord(task_id=task.id, kernel=task.kernel, language=task.language, difficulty=task.difficulty, rank=rank,
                        kernel_name=f"the task's baseline ({task.baseline})", device_time_share=0.0)


def optimize_stage(state: RunState, progress: Progress | None) -> str:
    from apex_core.agents.registry import make_agent

    if not state.kernels:
        raise Skip("no kernel was identified to optimize")
    config = state.config
    target = resolve_target(config.gpu)
    knowledge = KnowledgeBase()
    report = reporter(progress)
    saving = threading.Lock()
    agents: dict[str | None, object] = {}

    def agent_for(model: str | None):  # one agent per model: the replay agent counts its submissions
        with saving:
            if model not in agents:
                agents[model] = make_agent(config.agent, model=model, max_turns=config.max_turns,
                                           timeout_s=config.agent_timeout_s,
                                           replay_from=Path(config.replay_from) if config.replay_from else None)
            return agents[model]

    def save() -> None:
        with saving:
            state.save()

    done = [0]
    devices = grading_devices(len(state.kernels))

    with grading_executor(config) as executor:
        def one(position: int, record: KernelRecord) -> None:
            on_here = executor is None and get_task(record.task_id).needs_gpu
            options = GradeOptions(device=devices[position] if on_here else None)
            optimize_kernel(state, record, agent_for, target, knowledge, options, save,
                            lambda message: report(done[0] / len(state.kernels), message), executor)
            done[0] += 1

        with ThreadPoolExecutor(max_workers=config.parallel_kernels) as pool:
            for future in [pool.submit(one, position, record) for position, record in enumerate(state.kernels)]:
                future.result()
    host_failures = [k for k in state.kernels if k.stop_reason.startswith("the agent's host failed")]
    if host_failures:  # failed, so that a resumed run optimizes these kernels again
        raise ApexUserError("; ".join(f"{k.task_id}: {k.stop_reason}" for k in host_failures))
    return "; ".join(f"{k.task_id}: best iteration {k.best_iteration or '-'} of {len(k.iterations)} ({k.stop_reason})"
                     for k in state.kernels)


def grade_stage(state: RunState, progress: Progress | None) -> str:
    """Grade each kernel's best solution again, uncached: the loop kept the best of several noisy
    measurements, and a fresh one is what integration and the scores use."""
    candidates = [k for k in state.kernels if k.best_solution]
    if not candidates:
        raise Skip("no iteration left a correct solution")
    folder = state.folder / GRADINGS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    report = reporter(progress)
    with grading_executor(state.config) as executor:
        for index, record in enumerate(candidates):
            report(index / len(candidates), f"grading the best solution of {record.task_id}")
            at = index / len(candidates)
            result, _ = grade_with_retries(record.task_id, Path(record.best_solution or ""), GradeOptions(), executor,
                                           state.config.gpu, said=lambda message, at=at: report(at, message))
            result_file = folder / f"{record.task_id}.json"
            result_file.write_text(json.dumps([result.model_dump(mode="json")], indent=2), encoding="utf-8")
            record.final = summarize(result, result_file)
    return "; ".join(f"{k.task_id} {k.final.outcome} {k.final.speedup or 0:.3f}x score {k.final.score:.0f}"
                     for k in candidates if k.final)


def integrate_stage(state: RunState, progress: Progress | None) -> str:
    from apex_core.patcher.integrate import integrate

    if state.config.tasks:
        raise Skip("optimizing the given tasks alone: nothing is integrated into a model")
    if not any(k.final for k in state.kernels):
        raise Skip("nothing was graded to integrate")
    report = integrate(state.folder / GRADINGS_DIR, state.config.min_speedup, patch_results_root=state.folder,
                       kernel_stacks=workload_spec(state).kernels, owned=state.whole_run, progress=progress)
    by_task = {c.task_id: c for c in report.candidates}
    applied = {p.task_id: p for p in report.patches}
    for record in state.kernels:
        patch = applied.get(record.task_id)
        record.integrated = bool(patch and patch.applied)
        candidate = by_task.get(record.task_id)
        record.integration_note = (f"patched at {patch.point}" if record.integrated and patch else
                                   patch.reason if patch else candidate.why_not if candidate else "not graded")
    if not any(k.integrated for k in state.kernels):
        raise Skip("no winner: " + "; ".join(f"{k.task_id}: {k.integration_note}" for k in state.kernels))
    gate = accuracy_stage_gate(state, progress)
    kept = ", ".join(k.task_id for k in state.kernels if k.integrated)
    if not kept:
        raise Skip(f"the accuracy gate rolled back every winner: {gate}")
    return f"patched in: {kept}; {gate}"


def accuracy_stage_gate(state: RunState, progress: Progress | None) -> str:
    """The accuracy gate on what integrate applied (``apex_core.patcher.accuracy``): the patched
    model against the original on the same prompts; a winner that makes it fail is rolled back and
    the reason put on its record, so benchmark-final measures only winners that keep the model's
    outputs."""
    from apex_core.patcher.accuracy import accuracy_gate

    report = accuracy_gate(workload_spec(state), state.folder, progress=progress)
    state.accuracy = {**report.model_dump(mode="json", exclude={"workload"}), "file": str(Path(report.results_dir) / "accuracy.json")}
    for culprit in report.culprits:
        record = state.kernel(culprit.task_id)
        record.integrated = False
        record.integration_note = f"rolled back by the accuracy gate: {culprit.reason}"[:600]
    return report.verdict


def benchmark_final_stage(state: RunState, progress: Progress | None) -> str:
    from apex_core.patcher import status
    from apex_core.patcher.final import as_first_benchmarked, benchmark_final

    journal = status()
    if not any(k.integrated for k in state.kernels) or journal is None or not journal.active():
        raise Skip("nothing is patched in: there is no change to measure")
    spec, runs = as_first_benchmarked(workload_spec(state).id, state.folder / BENCHMARK_DIR, state.config.final_pairs)
    shares: dict[str, float] = {}
    for record in state.kernels:  # a task may stand for several profiled kernels: their shares add up
        shares[record.task_id] = shares.get(record.task_id, 0.0) + record.device_time_share
    result = benchmark_final(spec, runs, state.folder, shares=shares, progress=progress)
    state.final = FinalFigures.model_validate({**result.model_dump(exclude={"workload"}),
                                              "file": str(Path(result.results_dir) / "final.json")})
    return result.verdict


def score_stage(state: RunState, progress: Progress | None) -> str:
    graded = [k for k in state.kernels if k.final]
    integrated = [k for k in graded if k.integrated]
    kernel_score = statistics.fmean(k.final.normalized_score for k in integrated) if integrated else None  # type: ignore[union-attr]
    final = state.final if isinstance(state.final, FinalFigures) else None
    ratio = final.kernel_gain.median if final else None
    credited = bool(final and final.credited)
    # as the final benchmark decides it: credited, and told apart from noise (credit_rounds says why)
    rewarded = ratio if final and credited and final.kernel_gain.significant else None
    reward = model_reward(kernel_score, rewarded) if kernel_score is not None and ratio is not None else None
    state.summary = ScoreSummary(
        workload=state.config.workload, agent=state.config.agent,
        baseline_tokens_per_s=state.baseline.tokens_per_s if state.baseline else None,
        final_ratio=ratio, final_interval=final.kernel_gain.interval if final else None,
        significant=final.kernel_gain.significant if final else None,
        integration_gain=final.integration_gain.median if final else None, throughput_credited=credited,
        flags=final.flags if final else [], kernel_score=kernel_score, model_reward=reward,
        kernels=[KernelOutcome(task_id=k.task_id, iterations=len(k.iterations), best_iteration=k.best_iteration,
                               outcome=k.final.outcome if k.final else None, speedup=k.final.speedup if k.final else None,
                               score=k.final.score if k.final else None, integrated=k.integrated,
                               trajectory_id=k.trajectory_id) for k in state.kernels])
    (state.folder / SUMMARY_FILE).write_text(state.summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if state.config.leaderboard:
        from apex_core.pipeline.leaderboard import Leaderboard

        Leaderboard(state.folder.parents[1]).add_run(state)
    if reward is not None:
        how = (f"kernel gain x{ratio:.3f}" if rewarded is not None else
               f"kernel gain x{ratio:.3f} not credited" if not credited else f"kernel gain x{ratio:.3f} not significant: term 0")
        return f"model reward {reward:.3f} (kernel score {kernel_score:.3f}, {how})"
    return f"{len(graded)} kernel(s) graded; no model reward (nothing was integrated and measured end to end)"


def report_stage(state: RunState, progress: Progress | None) -> str:
    from apex_core.pipeline.report import write_reports

    paths = write_reports(state)
    state.reports = [str(p) for p in paths]
    return ", ".join(str(p) for p in paths)


STAGE_FUNCTIONS: dict[str, Callable[[RunState, Progress | None], str]] = {
    "benchmark": benchmark_stage,
    "identify": identify_stage,
    "optimize": optimize_stage,
    "grade": grade_stage,
    "integrate": integrate_stage,
    "benchmark-final": benchmark_final_stage,
    "score": score_stage,
    "report": report_stage,
}

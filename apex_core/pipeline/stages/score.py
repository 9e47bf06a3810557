"""The score stage: the model reward from the kernel scores and the credited kernel gain, the
summary file, and the leaderboard's rows."""

from __future__ import annotations

import statistics

from apex_core.pipeline.figures import FinalFigures, KernelOutcome, ScoreSummary
from apex_core.pipeline.stages.common import SUMMARY_FILE
from apex_core.pipeline.state import RunState
from apex_core.progress import Progress
from apex_core.score import model_reward

def run(state: RunState, progress: Progress | None) -> str:
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

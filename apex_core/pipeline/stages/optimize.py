"""The optimize stage: the agent loop (``apex_core.pipeline.optimize``) on each chosen kernel, in
parallel up to ``parallel_kernels``, their gradings spread over the GPUs."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from apex_core.errors import ApexUserError
from apex_core.grader import GradeOptions
from apex_core.hardware.target import resolve_target
from apex_core.pipeline.knowledge import KnowledgeBase
from apex_core.pipeline.optimize import optimize_kernel
from apex_core.pipeline.stages.common import Skip, grading_devices, grading_executor
from apex_core.pipeline.state import KernelRecord, RunState
from apex_core.progress import Progress, reporter
from apex_core.tasks import get_task

def run(state: RunState, progress: Progress | None) -> str:
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

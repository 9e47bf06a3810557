"""The agent loop of one kernel: iterations of prompt -> agent -> grade -> feedback, the best
solution kept, and the rules that stop early.

Each iteration's prompt is the task's prompt with the past gradings of this task in its language
on this target (the knowledge base, quoted as data) and the grader's verdict of the last solution
(``reflection``), both built from the gradings' structured facts, never from text a solution or
an agent produced. The agent works in ``<run>/output/<task>/`` and is judged only by the file it
leaves there, graded out of process. A grading that ends in an infrastructure error is repeated
and never counted against the agent; an agent session whose host failed (after the backend's own
retries) spends no iteration: the kernel's loop stops there, and a resumed run starts that
iteration again. Every iteration is saved before the next starts (state, trajectory, knowledge),
so a resumed run goes on from the last finished one.

Stop rules: the best score reaches the threshold; the same failure twice in a row; two
iterations in a row that change the score by less than 5% (a stall); the iterations run out.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

from apex_core.agents.base import Agent, AgentRun
from apex_core.errors import SolutionFileError
from apex_core.executors import Executor, GradingRequest
from apex_core.grader import GradeOptions, GradeResult, GradingLedger, check_solution_file, grade, result_without_solution
from apex_core.hardware.target import HardwareTarget
from apex_core.pipeline.knowledge import Experiment, KnowledgeBase, graded_on
from apex_core.pipeline.reflection import reflect
from apex_core.pipeline.state import GradeSummary, IterationRecord, KernelRecord, RunState, now
from apex_core.pipeline.trajectory import Trajectory, TrajectoryStep, load_trajectory, trajectory_id
from apex_core.prompts import system_prompt, task_prompt
from apex_core.tasks import get_task
from apex_core.tasks.schema import Task

INFRA_RETRIES = 2
STALL = 0.05

def summarize(result: GradeResult, result_file: Path) -> GradeSummary:
    return GradeSummary(outcome=result.outcome.value, correct=result.correct, speedup=result.speedup,
                        speedup_ci95=result.speedup_ci95, score=result.score.total, normalized_score=result.score.normalized,
                        rl_reward=result.rl_reward, flags=list(result.flags), reason=result.reason[:500],
                        result_file=str(result_file))


def stop_reason(record: KernelRecord, iterations: int, threshold: float) -> str:
    """Why the loop of ``record`` ends now, or "" to go on."""
    done = record.iterations
    best = max((i.grade.score for i in done if i.grade.correct), default=None)
    if best is not None and best >= threshold:
        return f"score threshold {threshold:g} reached ({best:.0f})"
    if len(done) >= 2 and done[-1].grade.outcome == done[-2].grade.outcome != "ok":
        return f"the same failure twice in a row ({done[-1].grade.outcome})"
    if len(done) >= 3:
        scores = [i.grade.score for i in done[-3:]]
        if all(s > 0 for s in scores) and all(abs(b - a) / a < STALL for a, b in zip(scores, scores[1:])):
            return "stalled: two iterations changed the score by less than 5%"
    if len(done) >= iterations:
        return f"all {iterations} iterations used"
    return ""


def grade_with_retries(task_id: str, solution: Path, options: GradeOptions, executor: Executor | None = None,
                       target: str | None = None, said: Callable[[str], None] | None = None) -> tuple[GradeResult, int]:
    """A fresh grading (never the cache's), repeated after an infrastructure error (a verdict on the
    machine, not the solution); the result and the repeats it took. Two kernels' gradings on one
    device take turns through the grader's device slot (``grader/slots.py``: exclusive while one
    times), which holds across processes too; the pipeline keeps no lock of its own.

    With an ``executor`` (``--executor ray``) the file's content is graded there, on a GPU of the
    ``target`` arch when one is given; the executor keeps to one grading per GPU itself. ``said``
    hears a local grading's progress (a Triton task in the CPU's interpreter grades for minutes:
    a run that says nothing meanwhile looks hung)."""
    task = get_task(task_id)
    relay = (lambda fraction, message: said(f"{task.id}: grading: {message}")) if said is not None else None
    retries = 0
    while True:
        try:
            if executor is None:  # kernels optimized in parallel queue on the device's slot, as any gradings do
                result = grade(task, solution, options, progress=relay)
            else:
                request = GradingRequest.for_file(task.id, check_solution_file(task, solution), options=options,
                                                  target=target, use_cache=False)
                result = executor.grade(request).result
        except SolutionFileError as missing:
            return result_without_solution(task, solution, f"the agent left no usable solution: {missing}"), retries
        if result.outcome.value != "infra_error" or retries >= INFRA_RETRIES:
            GradingLedger().record(result)  # signed, so that integration can tell it from an agent's JSON
            return result, retries
        retries += 1


def iteration_prompt(task: Task, target: HardwareTarget, output_dir: Path, knowledge: KnowledgeBase, feedback: str,
                     index: int, iterations: int) -> str:
    """Iteration ``index``'s prompt: the task's, with the past gradings of this task in its language on
    this target quoted as data, and the feedback on the last iteration (``reflect``)."""
    past = knowledge.insights(task.id, task.language, graded_on(task, target))
    prompt = task_prompt(task, target, output_dir=str(output_dir), past_gradings=past)
    if feedback:
        prompt += f"\n## Your last iteration (iteration {index} of at most {iterations} starts now)\n{feedback}\n"
    return prompt


def optimize_kernel(state: RunState, record: KernelRecord, agent_for: Callable[[str | None], Agent], target: HardwareTarget,
                    knowledge: KnowledgeBase, options: GradeOptions, save: Callable[[], None],
                    report: Callable[[str], None], executor: Executor | None = None) -> None:
    """Run the remaining iterations of ``record`` (all of them on a fresh run)."""
    config = state.config
    task = get_task(record.task_id)
    output_dir = state.folder / "output"
    workspace = output_dir / task.id
    workspace.mkdir(parents=True, exist_ok=True)
    solution = workspace / task.solution_filename
    system = system_prompt(target)
    record.trajectory_id = record.trajectory_id or trajectory_id(state.run_id, task.id)
    trajectory = load_trajectory(state.folder, record.trajectory_id) or Trajectory(
        trajectory_id=record.trajectory_id, run_id=state.run_id, task_id=task.id, kernel=task.kernel, target=target.arch,
        agent=config.agent)
    results = {i.iteration: GradeResult.model_validate_json(Path(i.grade.result_file).read_bytes()) for i in record.iterations}
    while not (why := stop_reason(record, config.iterations, config.score_threshold)):
        index = len(record.iterations) + 1
        best = _best(record, results)
        feedback = reflect(results.get(index - 1), index, best, grading_file=_grading_file(index - 1))
        prompt = iteration_prompt(task, target, output_dir, knowledge, feedback, index, config.iterations)
        model = config.model_for(task.difficulty)
        report(f"{task.id}: iteration {index}/{config.iterations} ({config.agent}{' ' + model if model else ''})")
        run = agent_for(model).run(task, system, prompt, workspace, solution)
        if run.infra_error:  # the host failed, not the agent: no iteration is spent or graded
            why = f"the agent's host failed ({run.infra_error}); resume the run to try again"
            break
        result, retries = grade_with_retries(task.id, solution, options, executor, config.gpu, said=report)
        result_file = workspace / _grading_file(index)
        result_file.write_text(result.model_dump_json(indent=2), encoding="utf-8")
        code, copy = _keep(solution, workspace, index, run)
        results[index] = result
        summary = summarize(result, result_file)
        record.iterations.append(IterationRecord(iteration=index, model=model, agent=run, solution_copy=copy, grade=summary,
                                                 feedback=feedback, infra_retries=retries))
        best = _best(record, results)
        if best is not None and best[0] == index and copy is not None:
            best_copy = workspace / f"solution_best{solution.suffix}"
            shutil.copyfile(copy, best_copy)
            record.best_iteration, record.best_solution = index, str(best_copy)
        trajectory.iterations.append(TrajectoryStep(
            iteration=index, model=model, system_prompt_sha256=hashlib.sha256(system.encode()).hexdigest(), prompt=prompt,
            feedback=feedback, agent=run, solution_code=code, grade=summary, reward=result.rl_reward))
        if result.outcome.value != "infra_error":
            knowledge.record(Experiment.of(result, created_at=now(), run_id=state.run_id, task_id=task.id, kernel=task.kernel,
                                           language=task.language, target=graded_on(task, target), agent=config.agent, model=model,
                                           code=code or ""))
        trajectory.best_iteration = record.best_iteration
        trajectory.save(state.folder)
        save()
    record.stop_reason = why
    trajectory.stop_reason = why
    trajectory.save(state.folder)
    save()


def _grading_file(iteration: int) -> str:
    """The name of an iteration's grading in the kernel's workspace."""
    return f"grade_iter{iteration}.json"


def _best(record: KernelRecord, results: dict[int, GradeResult]) -> tuple[int, GradeResult] | None:
    """The correct iteration with the highest score (the earliest among equals)."""
    correct = [(i.iteration, results[i.iteration]) for i in record.iterations if i.grade.correct and i.iteration in results]
    return max(correct, key=lambda pair: (pair[1].score.total, -pair[0])) if correct else None


def _keep(solution: Path, workspace: Path, index: int, run: AgentRun) -> tuple[str | None, str | None]:
    """The solution's code and where this iteration's copy of it is kept (None when there is none)."""
    if not solution.is_file():
        return None, None
    copy = workspace / f"solution_iter{index}{solution.suffix}"
    shutil.copyfile(solution, copy)
    return solution.read_text(encoding="utf-8", errors="replace"), str(copy)

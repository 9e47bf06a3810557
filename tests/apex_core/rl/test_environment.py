"""An RL episode on cpu-mini's RMSNorm, graded for real through the local executor: a tool call
answers and earns nothing, a correct submission earns the grader's RL reward and ends the episode,
a wrong one earns the wrong-answer reward, running out of turns earns the no-solution reward, a
malformed action takes a turn and says what was wrong, and every episode is kept as a trajectory
in the pipeline's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from apex_core.errors import ApexUserError
from apex_core.executors import make_executor
from apex_core.grader.options import GradeOptions
from apex_core.pipeline.trajectory import Trajectory
from apex_core.rl import NO_SOLUTION_REWARD, EpisodeSettings, KernelEnvironment, Submit, ToolCall
from apex_core.score import RL_REWARD_FOR_OUTCOME
from apex_core.suite.curriculum import Curriculum
from apex_core.tasks import get_task

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
CANNED = (REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py").read_text()
WRONG = "def rms_norm(x, weight, eps):\n    return x.copy()\n"


@pytest.fixture(scope="module")
def executor():
    with make_executor("local") as local:
        yield local


def test_a_reset_poses_the_task_with_its_contract_and_the_environments_actions(executor):
    env = KernelEnvironment(executor)
    first = env.reset(TASK)
    assert first.task_id == TASK and not first.done and first.turns_left == 8 and first.reward == 0.0
    assert get_task(TASK).signature in first.text and '"kind": "submit"' in first.text and "`check`" in first.text
    assert "GPU kernel engineer" in env.system


def test_a_check_answers_a_draft_and_a_correct_submission_earns_its_rl_reward_and_ends_the_episode(executor, tmp_path):
    env = KernelEnvironment(executor, EpisodeSettings(record_dir=str(tmp_path)))
    env.reset(TASK)
    checked = env.step(ToolCall(tool="check", arguments={"code": CANNED}))
    assert checked.reward == 0.0 and not checked.done and "outcome: ok" in checked.text and "correct: True" in checked.text
    submitted = env.step(Submit(code=CANNED))
    assert submitted.done and submitted.grade is not None and submitted.grade.outcome == "ok" and submitted.grade.correct
    assert submitted.reward == submitted.grade.rl_reward and submitted.reward > 0.5, submitted.text  # faster than the loop
    saved = list(tmp_path.rglob("trajectories/*.json"))
    assert len(saved) == 1
    trajectory = Trajectory.model_validate_json(saved[0].read_bytes())
    (step,) = trajectory.iterations
    assert step.solution_code == CANNED and step.reward == submitted.reward and step.agent.turns == 2
    assert [c.name for c in step.agent.tool_calls] == ["check"] and trajectory.stop_reason == "submitted"
    with pytest.raises(ApexUserError, match="reset before the next step"):
        env.step(Submit(code=CANNED))


def test_a_wrong_submission_earns_the_wrong_answer_reward(executor):
    env = KernelEnvironment(executor, grade_options=GradeOptions(timing=False))
    env.reset(TASK)
    wrong = env.step({"kind": "submit", "code": WRONG})
    assert wrong.done and wrong.reward == RL_REWARD_FOR_OUTCOME["wrong_answer"] and wrong.grade.outcome == "wrong_answer"


def test_turns_spent_without_a_submission_end_the_episode_with_the_no_solution_reward(executor):
    env = KernelEnvironment(executor, EpisodeSettings(max_turns=2))
    env.reset(TASK)
    bad = env.step({"kind": "dance"})
    assert not bad.done and bad.reward == 0.0 and bad.error and "not an action" in bad.text
    unknown = env.step(ToolCall(tool="read_source", arguments={"where": "x"}))
    assert unknown.done and unknown.reward == NO_SOLUTION_REWARD and "read_source takes context, location" in unknown.text


def test_a_curriculum_draws_the_task_when_none_is_named(executor):
    env = KernelEnvironment(executor, curriculum=Curriculum([get_task(TASK)]))
    assert env.reset(progress=0.5).task_id == TASK
    with pytest.raises(ApexUserError, match="needs a task_id"):
        KernelEnvironment(executor).reset()

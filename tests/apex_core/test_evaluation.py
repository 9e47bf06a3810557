import json
from pathlib import Path

from apex_core.agents import DryRunAgent
from apex_core.agents.base import AgentRun
from apex_core.evaluation import run_eval
from apex_core.grader import GradeOptions, Outcome

FAST = GradeOptions(time_budget_s=0.5)


def test_the_dry_run_mini_evaluation_goes_from_prompt_to_score(tmp_path):
    report = run_eval(DryRunAgent(), output_dir=tmp_path / "output", workspace=tmp_path, options=FAST)
    task_dir = tmp_path / "output" / "cpu-mini__rms_norm"
    assert report.grade.outcome is Outcome.ok and report.grade.correct
    assert report.grade.speedup > 1.0
    assert (task_dir / "solution.py").is_file()
    assert "Write `" in (task_dir / "prompt.md").read_text()
    saved = json.loads((task_dir / "grade_result.json").read_text())
    assert saved["score"]["total"] == report.grade.score.total


class _SilentAgent:
    name = "silent"

    def run(self, task, system, prompt, workspace, solution_path: Path) -> AgentRun:
        return AgentRun(backend=self.name, solution_path=str(solution_path), wrote_solution=False, elapsed_s=0.0)


def test_an_agent_that_writes_nothing_scores_zero_instead_of_crashing(tmp_path):
    report = run_eval(_SilentAgent(), output_dir=tmp_path / "output", workspace=tmp_path, options=FAST)
    assert report.grade.outcome is Outcome.compile_error
    assert "no usable solution" in report.grade.reason
    assert report.grade.score.total == 0


def test_a_dry_run_keeps_a_solution_file_someone_edited_and_says_how_to_replace_it(tmp_path):
    import pytest

    from apex_core.errors import ApexUserError

    task_dir = tmp_path / "output" / "cpu-mini__rms_norm"
    task_dir.mkdir(parents=True)
    mine = "def rms_norm(x, weight, eps):\n    return x  # my own attempt\n"
    (task_dir / "solution.py").write_text(mine)
    with pytest.raises(ApexUserError, match="already exists and is not the stored solution.*--overwrite"):
        run_eval(DryRunAgent(), output_dir=tmp_path / "output", workspace=tmp_path, options=FAST)
    assert (task_dir / "solution.py").read_text() == mine
    assert sorted(p.name for p in task_dir.iterdir()) == ["solution.py"]  # no prompt.md either
    report = run_eval(DryRunAgent(overwrite=True), output_dir=tmp_path / "output", workspace=tmp_path, options=FAST)
    assert report.grade.outcome is Outcome.ok and (task_dir / "solution.py").read_text() != mine


class _FailingAgent:
    """An agent that writes half a solution and then fails (a crash, a lost connection)."""

    name = "failing"

    def run(self, task, system, prompt, workspace, solution_path: Path) -> AgentRun:
        solution_path.write_text("def rms_norm(x, weight, eps):\n")
        raise RuntimeError("the agent's connection dropped")


def test_a_failed_evaluation_leaves_the_output_folder_as_it_found_it(tmp_path):
    import pytest

    output = tmp_path / "output"
    with pytest.raises(RuntimeError, match="connection dropped"):
        run_eval(_FailingAgent(), output_dir=output, workspace=tmp_path, options=FAST)
    assert not output.exists()  # no prompt.md, no half solution, no empty folders

    task_dir = output / "cpu-mini__rms_norm"
    task_dir.mkdir(parents=True)
    (task_dir / "prompt.md").write_text("the prompt of an earlier run")
    with pytest.raises(RuntimeError):
        run_eval(_FailingAgent(), output_dir=output, workspace=tmp_path, options=FAST)
    assert sorted(p.name for p in task_dir.iterdir()) == ["prompt.md"]
    assert (task_dir / "prompt.md").read_text() == "the prompt of an earlier run"

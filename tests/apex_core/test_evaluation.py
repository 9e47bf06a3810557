import json
from pathlib import Path

from apex_core.agents import DryRunAgent
from apex_core.agents.base import AgentRun
from apex_core.evaluation import run_eval
from apex_core.grader.judge import GradeOptions
from apex_core.grader.result import Outcome

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

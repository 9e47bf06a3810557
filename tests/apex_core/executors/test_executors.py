"""What holds for every executor and needs no Ray: requests are checked at submit, the local
executor answers from this machine's cache, back-pressure, and a missing Ray is one line."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError
from apex_core.cli.main import main
from apex_core.errors import ApexUserError, SolutionFileError, UnknownNameError
from apex_core.executors import GradingRequest, SolutionContent, make_executor
from apex_core.executors.local import LocalExecutor
from apex_core.executors.ray_executor import RAY_MISSING, require_ray
from apex_core.grader.cache import GradeCache
from apex_core.grader.options import GradeOptions
from apex_core.grader.result import Outcome

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
CANNED = REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py"
WRONG = b"import numpy as np\n\ndef rms_norm(x, weight, eps):\n    return x.copy()\n"
QUICK = GradeOptions(timing=False, timeout_s=60)


def wrong(number: int) -> GradingRequest:
    body = WRONG + f"# {number} {time.time_ns()}\n".encode()
    return GradingRequest(task_id=TASK, solution=SolutionContent(name="solution.py", content=body), options=QUICK)


def apex(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, list[str]]:
    """Run the ``apex`` command in this process (so a test's stand-ins apply): exit code, stderr lines."""
    with pytest.raises(SystemExit) as ended:
        main(list(arguments))
    return ended.value.code, capsys.readouterr().err.strip().splitlines()


@pytest.fixture
def local(tmp_path):
    with LocalExecutor(cache=GradeCache(tmp_path), max_in_flight=1) as made:
        yield made


def test_a_solution_travels_as_a_bare_file_name_and_its_bytes():
    content = SolutionContent.from_path(CANNED)
    assert content.name == f"{TASK}.py" and content.content == CANNED.read_bytes()
    for bad in ("../solution.py", "/tmp/solution.py", ".hidden.py", ""):
        with pytest.raises(ValidationError):
            SolutionContent(name=bad, content=b"")


def test_the_local_executor_grades_content_and_answers_the_same_file_again_from_its_cache(local):
    first = local.grade(GradingRequest.for_file(TASK, CANNED, options=QUICK))
    assert first.result.outcome is Outcome.ok and first.placement.attempts == 1 and first.placement.actor == "cpu"
    assert first.result.solution_path == str(CANNED)
    again = local.grade(GradingRequest.for_file(TASK, CANNED, options=QUICK))
    assert again.placement.node == "cache" and again.result.cached and again.result.checks == first.result.checks
    assert (local.stats.graded, local.stats.answered_from_cache) == (1, 1)


def test_grade_many_on_one_slot_draws_the_next_request_only_when_the_last_is_answered(local):
    drawn, answered = [], []

    def requests():
        for number in range(3):
            drawn.append(number)
            assert len(drawn) - len(answered) <= 2  # one in flight, one being submitted
            yield wrong(number)

    answered.extend(g.grading_id for g in local.grade_many(requests()))
    assert len(set(answered)) == 3


def test_requests_that_cannot_be_graded_fail_at_submit_with_one_line(local):
    with pytest.raises(UnknownNameError):
        local.submit(GradingRequest(task_id="no-such-task__x", solution=SolutionContent(name="s.py", content=b"")))
    with pytest.raises(SolutionFileError, match="must be a .py file"):
        local.submit(GradingRequest(task_id=TASK, solution=SolutionContent(name="s.cu", content=b"")))
    with pytest.raises(ApexUserError, match="leave the target out or use the ray executor"):
        local.submit(GradingRequest(task_id="llama-3-1-8b-instruct__rms_norm", solution=SolutionContent(name="s.py", content=b""),
                                    target="sm_90"))
    assert local.stats.submitted == 0


def test_a_closed_executor_refuses_more_work(tmp_path):
    made = LocalExecutor(cache=GradeCache(tmp_path))
    made.close()
    with pytest.raises(ApexUserError, match="closed"):
        made.submit(wrong(0))


def test_without_ray_the_ray_executor_is_one_line_saying_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray gives `import ray`
    with pytest.raises(ApexUserError, match="pip install 'apex-kernels\\[ray\\]'"):
        require_ray()
    with pytest.raises(ApexUserError):
        make_executor("ray")
    assert apex(capsys, "grade", "--task", TASK, "--solution", str(CANNED), "--executor", "ray") == (2, [f"apex: error: {RAY_MISSING}"])


@pytest.mark.parametrize(("arguments", "message"), [
    (["--executor", "dask"], "apex: error: unknown --executor 'dask'; use local or ray"),
    (["--ray-address", "head:6379"], "apex: error: --ray-address places gradings on a Ray cluster; add --executor ray, "
                                     "or leave it out to grade on this machine"),
    (["--gpu", "sm_90"], "apex: error: --gpu places gradings on a Ray cluster; add --executor ray, or leave it out to grade on this machine"),
])
def test_apex_grade_refuses_ray_settings_without_the_ray_executor(capsys, arguments, message):
    assert apex(capsys, "grade", "--task", TASK, "--solution", str(CANNED), *arguments) == (2, [message])


def test_a_run_with_a_ray_address_but_the_local_executor_is_refused_naming_the_option(capsys, tmp_path):
    code, lines = apex(capsys, "run", "--workload", "cpu-mini", "--ray-address", "head:6379", "--results-dir", str(tmp_path))
    assert code == 2 and len(lines) == 1 and "--ray-address" in lines[0] and "(--executor ray)" in lines[0]


def test_the_local_executor_grades_several_at_once_on_one_device_with_the_verdicts_of_one_at_a_time(tmp_path):
    """RL batches: several gradings per device overlap their workers' start, load and correctness
    (the device slots keep each measurement alone); each still gets its own verdict."""
    with LocalExecutor(cache=GradeCache(tmp_path), gradings_per_device=3) as several:
        assert len(several._threads) == 3
        graded = list(several.grade_many([wrong(n) for n in range(4)]
                                         + [GradingRequest.for_file(TASK, CANNED, options=QUICK)]))
    outcomes = sorted(g.result.outcome.value for g in graded)
    assert outcomes == ["ok"] + ["wrong_answer"] * 4
    with pytest.raises(ApexUserError, match="at least 1"):
        LocalExecutor(cache=GradeCache(tmp_path), gradings_per_device=0)

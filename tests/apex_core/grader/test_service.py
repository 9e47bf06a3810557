from pathlib import Path

import pytest

from apex_core.errors import SolutionFileError, UnknownNameError
from apex_core.grader.cache import GradeCache
from apex_core.grader.judge import GradeOptions
from apex_core.grader.service import grade_solutions, rank

CANNED = Path(__file__).resolve().parents[3] / "apex_core" / "agents" / "canned" / "cpu-mini__rms_norm.py"
FAST = GradeOptions(time_budget_s=0.3)


def test_a_second_grading_of_the_same_file_comes_from_the_cache(tmp_path):
    cache = GradeCache(tmp_path)
    first = grade_solutions("cpu-mini__rms_norm", [CANNED], FAST, cache=cache)[0]
    second = grade_solutions("cpu-mini__rms_norm", [CANNED], FAST, cache=cache)[0]
    assert not first.cached and second.cached
    assert second.score == first.score


def test_no_cache_grades_again(tmp_path):
    cache = GradeCache(tmp_path)
    grade_solutions("cpu-mini__rms_norm", [CANNED], FAST, cache=cache)
    again = grade_solutions("cpu-mini__rms_norm", [CANNED], FAST, use_cache=False, cache=cache)[0]
    assert not again.cached


def test_every_path_is_checked_before_any_grading_starts(tmp_path):
    with pytest.raises(SolutionFileError, match="missing.py does not exist"):
        grade_solutions("cpu-mini__rms_norm", [CANNED, tmp_path / "missing.py"], FAST, cache=GradeCache(tmp_path))
    with pytest.raises(UnknownNameError):
        grade_solutions("no-such-task__x", [CANNED], FAST, cache=GradeCache(tmp_path))


def test_solutions_are_ranked_correct_and_fast_first(tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def rms_norm(x, weight, eps):\n    return x.copy()\n")
    results = grade_solutions("cpu-mini__rms_norm", [wrong, CANNED], FAST, cache=GradeCache(tmp_path))
    ranking = rank(results)
    assert ranking[0].solution_path == str(CANNED) and ranking[0].correct
    assert ranking[1].outcome == "wrong_answer"


def test_a_drifting_baseline_is_flagged(tmp_path):
    cache = GradeCache(tmp_path)
    assert cache.check_baseline("t" * 64, "env", "rows=1", 1000.0) is None
    assert cache.check_baseline("t" * 64, "env", "rows=1", 1040.0) is None
    assert "baseline_drift" in cache.check_baseline("t" * 64, "env", "rows=1", 2000.0)

from pathlib import Path

import pytest

from apex_core.errors import SolutionFileError, UnknownNameError
from apex_core.grader import GradeCache, GradeOptions, grade_solutions, rank

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


def test_jobs_spread_over_devices_one_at_a_time_each_and_keep_their_order():
    import threading
    import time

    from apex_core.grader.service import run_per_device

    busy: dict[str, int] = {}
    peak: dict[str, int] = {}
    lock = threading.Lock()

    def work(number, path, device):
        with lock:
            busy[device] = busy.get(device, 0) + 1
            peak[device] = max(peak.get(device, 0), busy[device])
        time.sleep(0.05)
        with lock:
            busy[device] -= 1
        return (number, device)

    jobs = [(i, Path(f"s{i}.py")) for i in range(6)]
    results = run_per_device(jobs, ["cuda:0", "cuda:1"], work)
    assert [number for number, _ in results] == list(range(6))
    assert set(peak) == {"cuda:0", "cuda:1"} and all(p == 1 for p in peak.values())


def test_a_failure_in_one_device_thread_reaches_the_caller():
    from apex_core.grader.service import run_per_device

    def work(number, path, device):
        if number == 2:
            raise RuntimeError("boom")
        return number

    with pytest.raises(RuntimeError, match="boom"):
        run_per_device([(i, Path("x.py")) for i in range(4)], ["cuda:0", "cuda:1"], work)


def test_a_device_the_task_cannot_use_is_refused_even_when_a_verdict_is_cached(tmp_path):
    from apex_core.errors import ApexUserError

    cache = GradeCache(tmp_path)
    grade_solutions("cpu-mini__rms_norm", [CANNED], FAST, cache=cache)
    with pytest.raises(ApexUserError, match="is a CPU task"):
        grade_solutions("cpu-mini__rms_norm", [CANNED], FAST.model_copy(update={"device": "cuda:99"}), cache=cache)


def test_options_that_do_not_change_the_measurement_do_not_change_the_cache_key():
    from apex_core.grader import cache_key

    def key(options: GradeOptions) -> str:
        return cache_key("task", "solution", "environment", options)

    # The CLI grades one file without a warm pool and with its own timeout; the MCP tools keep
    # workers warm: the same file and measuring options must find the same verdict.
    assert key(GradeOptions(warm_pool=False, timeout_s=30, device="cpu")) == key(GradeOptions())
    assert key(GradeOptions(timing=False)) != key(GradeOptions())
    assert key(GradeOptions(hidden_shapes=False, seeds_per_shape=1)) != key(GradeOptions())


def test_progress_never_goes_backwards_and_keeps_coming_while_a_step_runs_long():
    import threading
    import time

    from apex_core.grader.service import SteadyProgress

    seen: list[tuple[float, str]] = []
    lock = threading.Lock()

    def report(fraction, message):
        with lock:
            seen.append((fraction, message))

    with SteadyProgress(report, interval_s=0.05) as progress:
        progress(0.5, "timing shape 1 of 2")
        progress(0.5, "queued behind another grading")  # a repeat may not show as no progress
        progress(0.2, "timing shape 1 of 2, hardened")  # a re-measurement starts its shapes over
        time.sleep(0.4)  # one long step: the heartbeat repeats it
    fractions = [fraction for fraction, _ in seen]
    assert fractions[:3] == pytest.approx([0.5, 0.501, 0.502])
    assert all(later > earlier for earlier, later in zip(fractions, fractions[1:]))
    assert any("timing shape 1 of 2, hardened (still running" in message for _, message in seen[3:])


def test_a_real_grading_reports_every_step_in_order_and_never_goes_backwards(tmp_path):
    seen: list[tuple[float, str]] = []
    grade_solutions("cpu-mini__rms_norm", [CANNED], FAST, use_cache=False, cache=GradeCache(tmp_path),
                    progress=lambda fraction, message: seen.append((fraction, message)))
    fractions = [fraction for fraction, _ in seen]
    assert fractions[0] == 0.0 and all(later > earlier for earlier, later in zip(fractions, fractions[1:])), seen
    steps = [message.split(",")[0].split(" (")[0] for _, message in seen]
    for step in ("loading the solution", "checking correctness", "timing shape", "checking that Apex's files"):
        assert any(s.startswith(step) for s in steps), (step, steps)
    assert any("case 1 of 6, seed 2 of 2" in message for _, message in seen)  # per seed: a case can be long

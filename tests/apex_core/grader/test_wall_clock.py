"""Device work the timer's events missed shows up as a wait on the host's wall clock."""

from apex_core.grader.wall_clock import unseen_work_reason

US = 1_000


def test_an_honest_call_only_waits_for_the_synchronization_after_its_end_event():
    assert unseen_work_reason([5 * US] * 10, [12 * US] * 10) == ""
    assert unseen_work_reason([6_000 * US] * 10, [15 * US] * 10) == ""


def test_scheduling_noise_within_the_slack_decides_nothing():
    assert unseen_work_reason([5 * US] * 10, [45 * US] * 10) == ""


def test_work_left_on_a_side_stream_is_seen_by_the_wall_clock():
    reason = unseen_work_reason([4 * US] * 10, [400 * US] * 10)
    assert "stayed busy 400 us after the timed events ended" in reason


def test_a_large_kernel_that_hides_more_than_half_its_time_is_seen():
    assert unseen_work_reason([1_000 * US] * 10, [600 * US] * 10) != ""
    assert unseen_work_reason([1_000 * US] * 10, [400 * US] * 10) == ""


def test_the_median_call_decides_not_one_slow_synchronization():
    assert unseen_work_reason([5 * US] * 10, [10 * US] * 9 + [900 * US]) == ""


def test_missing_or_mismatched_measurements_decide_nothing():
    assert unseen_work_reason([], []) == "" and unseen_work_reason([1, 2], [3]) == ""


def test_a_wait_the_baseline_shows_too_is_the_machines_not_the_solutions():
    # A host or driver busy with something else slows every process's synchronization alike.
    assert unseen_work_reason([36 * US] * 10, [55 * US] * 10) != ""
    assert unseen_work_reason([36 * US] * 10, [55 * US] * 10, control_after_end_ns=[40 * US] * 10) == ""


def test_work_beyond_the_baselines_wait_is_still_seen():
    reason = unseen_work_reason([4 * US] * 10, [1_040 * US] * 10, control_after_end_ns=[40 * US] * 10)
    assert "stayed busy 1000 us" in reason

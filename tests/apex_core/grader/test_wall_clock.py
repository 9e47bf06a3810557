"""Device work the timer's events missed shows up as a wait on the host's wall clock."""

from apex_core.grader.wall_clock import unseen_work_reason

US = 1_000


def test_an_honest_large_kernel_waits_about_as_long_as_its_events_say():
    assert unseen_work_reason([6_000 * US] * 10, [6_010 * US] * 10) == ""


def test_an_honest_small_kernel_only_waits_for_the_synchronization():
    assert unseen_work_reason([5 * US] * 10, [30 * US] * 10) == ""


def test_work_left_on_a_side_stream_is_seen_by_the_wall_clock():
    reason = unseen_work_reason([4 * US] * 10, [400 * US] * 10)
    assert "stayed busy 396 us after the timed events ended" in reason


def test_a_large_kernel_that_hides_half_its_work_is_seen():
    assert unseen_work_reason([1_000 * US] * 10, [2_000 * US] * 10) != ""


def test_missing_or_mismatched_measurements_decide_nothing():
    assert unseen_work_reason([], []) == "" and unseen_work_reason([1, 2], [3]) == ""

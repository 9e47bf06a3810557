import pytest

from apex_core.grader.isolation.rotation import CallRotation


def test_at_staging_the_buffers_take_the_staged_input_sets_in_turn():
    assert CallRotation(input_sets=3, buffers=8).held == [0, 1, 2, 0, 1, 2, 0, 1]


def test_every_timed_call_gets_inputs_of_its_own_seed_never_seen_before():
    rotation = CallRotation(input_sets=1, buffers=3)
    seeds = [seed for key in (11, 12, 13) for _, seed in rotation.timed_request(32, key)]
    assert len(set(seeds)) == len(seeds)


def test_the_same_request_key_gives_the_same_seeds_and_another_key_other_ones():
    assert CallRotation(2, 3).timed_request(6, 7) == CallRotation(2, 3).timed_request(6, 7)
    assert {s for _, s in CallRotation(2, 3).timed_request(6, 7)}.isdisjoint(s for _, s in CallRotation(2, 3).timed_request(6, 8))


def test_each_request_starts_again_at_buffer_zero_and_records_the_last_timed_calls():
    rotation = CallRotation(input_sets=8, buffers=8)
    first = rotation.timed_request(5, 1)
    assert [slot for slot, _ in first] == [0, 1, 2, 3, 4]
    second = rotation.timed_request(3, 2)
    assert [slot for slot, _ in second] == [0, 1, 2]
    assert sorted(rotation.last_timed) == [0, 1, 2, 3, 4]
    assert rotation.last_timed[0] == second[0][1] and rotation.last_timed[4] == first[4][1]


def test_two_copies_fed_the_same_requests_agree():
    worker_side, judge_side = CallRotation(5, 8), CallRotation(5, 8)
    for key, reps in enumerate((5, 32, 32, 7)):
        assert worker_side.timed_request(reps, key) == judge_side.timed_request(reps, key)
    assert worker_side.last_timed == judge_side.last_timed


def test_an_empty_rotation_is_refused_with_the_counts():
    with pytest.raises(ValueError, match="got 0 and 3"):
        CallRotation(0, 3)

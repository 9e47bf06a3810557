import pytest

from apex_core.tasks import all_tasks
from apex_core.suite.curriculum import Curriculum, CurriculumSchedule


def _tasks():
    return list(all_tasks().values())


def _levels(tasks):
    return sorted({t.difficulty for t in tasks})


def test_weights_are_normalized_over_the_levels_that_have_tasks():
    curriculum = Curriculum(_tasks())
    for progress in (0.0, 0.3, 1.0):
        weights = curriculum.weights(progress)
        assert sorted(weights) == _levels(_tasks())
        assert sum(weights.values()) == pytest.approx(1.0)


def test_weight_moves_from_easy_to_hard_levels_as_training_progresses():
    tasks = _tasks()
    if len(_levels(tasks)) < 2:
        pytest.skip("needs tasks of at least two difficulty levels")
    curriculum = Curriculum(tasks)
    easiest, hardest = _levels(tasks)[0], _levels(tasks)[-1]
    assert curriculum.weights(0.0)[easiest] > curriculum.weights(1.0)[easiest]
    assert curriculum.weights(0.0)[hardest] < curriculum.weights(1.0)[hardest]
    assert curriculum.weights(0.05) == curriculum.weights(0.0)  # held at the start weights first


def test_mastering_a_level_hands_weight_to_the_next_one():
    tasks = _tasks()
    levels = _levels(tasks)
    if len(levels) < 2:
        pytest.skip("needs tasks of at least two difficulty levels")
    curriculum = Curriculum(tasks)
    before = curriculum.weights(0.0)
    easy_task = next(t for t in tasks if t.difficulty == levels[0])
    for _ in range(64):
        curriculum.record(easy_task.id, 1.2)
    after = curriculum.weights(0.0)
    assert after[levels[0]] < before[levels[0]] and after[levels[1]] > before[levels[1]]


def test_sampling_is_reproducible_from_the_seed_and_follows_the_weights():
    first = [t.id for t in Curriculum(_tasks(), seed=3).sample(0.0, 200)]
    again = [t.id for t in Curriculum(_tasks(), seed=3).sample(0.0, 200)]
    assert first == again
    schedule = CurriculumSchedule(start={1: 1.0, 2: 0.0, 3: 0.0}, end={1: 1.0, 2: 0.0, 3: 0.0})
    assert {t.difficulty for t in Curriculum(_tasks(), schedule).sample(0.5, 100)} == {1}


def test_bad_progress_and_unknown_tasks_are_refused_clearly():
    curriculum = Curriculum(_tasks())
    with pytest.raises(ValueError, match="between 0 and 1"):
        curriculum.weights(1.5)
    with pytest.raises(KeyError, match="not in this curriculum"):
        curriculum.record("nope__nothing", 1.0)
    with pytest.raises(ValueError, match="non-negative"):
        CurriculumSchedule(start={1: -1.0})

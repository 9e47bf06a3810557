"""A curriculum over task difficulty for RL: which tasks to pose as training progresses.

Early in training a policy mostly sees level-1 tasks (elementwise and norm kernels it can win on);
later the weight moves to level 2 and 3 (attention, MoE, GEMM). The schedule interpolates between
start and end weights over training progress; with outcomes recorded, a level the policy has
mastered hands part of its weight to the next level early, so the schedule follows the learner
instead of a fixed clock.
"""

from __future__ import annotations

import random
from collections import defaultdict, deque

from pydantic import BaseModel, Field, field_validator

from apex_core.tasks.schema import Task


class CurriculumSchedule(BaseModel):
    start: dict[int, float] = Field(default_factory=lambda: {1: 0.7, 2: 0.25, 3: 0.05})
    """Level weights at progress 0."""
    end: dict[int, float] = Field(default_factory=lambda: {1: 0.15, 2: 0.35, 3: 0.5})
    """Level weights at progress 1."""
    hold: float = Field(default=0.1, ge=0, lt=1)
    """Fraction of training spent at the start weights before interpolation begins."""
    mastery_reward: float = Field(default=0.5)
    """A graded attempt with at least this RL reward counts as a success."""
    mastery_window: int = Field(default=64, ge=1)
    """Recent attempts per level that the success rate is taken over."""
    handoff: float = Field(default=0.5, ge=0, le=1)
    """Share of a fully mastered level's weight handed to the next level."""

    @field_validator("start", "end")
    @classmethod
    def _non_negative(cls, weights: dict[int, float]) -> dict[int, float]:
        if any(w < 0 for w in weights.values()) or not any(w > 0 for w in weights.values()):
            raise ValueError("level weights must be non-negative and not all zero")
        return weights


class Curriculum:
    """Samples tasks by difficulty level; ``record`` feeds outcomes back."""

    def __init__(self, tasks: list[Task], schedule: CurriculumSchedule | None = None, seed: int = 0) -> None:
        if not tasks:
            raise ValueError("a curriculum needs at least one task")
        self.schedule = schedule or CurriculumSchedule()
        self.by_level: dict[int, list[Task]] = defaultdict(list)
        for task in sorted(tasks, key=lambda t: t.id):
            self.by_level[task.difficulty].append(task)
        self.level_of = {task.id: task.difficulty for task in tasks}
        self.recent: dict[int, deque[bool]] = defaultdict(lambda: deque(maxlen=self.schedule.mastery_window))
        self.rng = random.Random(seed)

    def success_rate(self, level: int) -> float:
        attempts = self.recent[level]
        return sum(attempts) / len(attempts) if attempts else 0.0

    def weights(self, progress: float) -> dict[int, float]:
        """Normalized weight of each level that has tasks, at ``progress`` in [0, 1]."""
        if not 0.0 <= progress <= 1.0:
            raise ValueError(f"progress must be between 0 and 1, got {progress}")
        s = self.schedule
        t = 0.0 if progress <= s.hold else (progress - s.hold) / (1.0 - s.hold)
        levels = sorted(self.by_level)
        raw = {lvl: (1 - t) * s.start.get(lvl, 0.0) + t * s.end.get(lvl, 0.0) for lvl in levels}
        for index, level in enumerate(levels[:-1]):
            moved = raw[level] * s.handoff * self.success_rate(level)
            raw[level] -= moved
            raw[levels[index + 1]] += moved
        total = sum(raw.values())
        if total <= 0:
            return {lvl: 1.0 / len(levels) for lvl in levels}
        return {lvl: w / total for lvl, w in raw.items()}

    def sample(self, progress: float, count: int = 1) -> list[Task]:
        weights = self.weights(progress)
        levels = list(weights)
        chosen = self.rng.choices(levels, weights=[weights[lvl] for lvl in levels], k=count)
        return [self.rng.choice(self.by_level[level]) for level in chosen]

    def record(self, task_id: str, rl_reward: float | None) -> None:
        """Feed back one graded attempt (its RL reward; None counts as a failure)."""
        if task_id not in self.level_of:
            raise KeyError(f"task {task_id!r} is not in this curriculum")
        success = rl_reward is not None and rl_reward >= self.schedule.mastery_reward
        self.recent[self.level_of[task_id]].append(success)

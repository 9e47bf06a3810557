"""The typed result of grading one solution: what every report, reward and decision reads."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field, model_validator

from apex_core.grader.fingerprint import Clocks, Environment
from apex_core.score import ScoreBreakdown


class Outcome(str, Enum):
    ok = "ok"
    compile_error = "compile_error"
    runtime_error = "runtime_error"
    timeout = "timeout"
    crash = "crash"
    wrong_answer = "wrong_answer"
    tampering = "tampering"
    infra_error = "infra_error"


class ShapeCheck(BaseModel):
    """Correctness of one (shape, seed) case."""

    shape: dict[str, int]
    seed: int
    hidden: bool
    passed: bool
    max_abs_error: float | None = None
    max_error_index: list[int] | None = None
    message: str = ""


class ShapeTiming(BaseModel):
    """Interleaved timing of baseline and solution at one shape (times in nanoseconds)."""

    shape: dict[str, int]
    baseline_median_ns: float
    solution_median_ns: float
    speedup: float
    speedup_ci95: tuple[float, float]
    baseline_samples_ns: list[int]
    solution_samples_ns: list[int]
    roofline_floor_ns: float | None = None
    launch_cover_ns: int | None = None
    """How long the device spun before each timed call, hiding the host's launch (GPU only)."""
    solution_launch_ns: int | None = None
    """The solution's host-side launch time (90th percentile); beyond the cover it is timed."""
    process_correction: float | None = None
    """How much slower the solution's worker process ran our baseline than the baseline's worker
    did, measured before the solution was imported (short GPU calls only). ``speedup`` is
    baseline_median_ns / solution_median_ns multiplied by it; None where no correction applies."""


NOT_TIMED = "not timed"
"""How ``Provenance.timing_method`` starts when a grading timed nothing."""


class Provenance(BaseModel):
    task_hash: str
    solution_hash: str
    grader: str
    grader_version: str
    environment: Environment
    environment_key: str
    clocks_before: Clocks | None = None
    clocks_after: Clocks | None = None
    timing_method: str
    """How the times were measured; ``not timed: <why>`` (NOT_TIMED) when nothing was."""
    public_seed: int
    """The public half of the input seeds; the secret half is never recorded."""
    unconfined: bool = False
    """True when the solution ran outside the sandbox, with the judge's own rights (the user
    passed ``--unconfined``); its verdict is then only as trustworthy as the solution."""

    @property
    def device(self) -> str:
        return self.environment.device


class GradeResult(BaseModel):
    task_id: str
    solution_path: str
    outcome: Outcome
    reason: str = ""
    compiled: bool
    correct: bool
    speedup: float | None = None
    """Geometric mean over the timed shapes of the speedup that is credited (1.0 when not significant)."""
    measured_speedup: float | None = None
    speedup_ci95: tuple[float, float] | None = None
    baseline_median_ns: float | None = None
    solution_median_ns: float | None = None
    checks: list[ShapeCheck] = Field(default_factory=list)
    timings: list[ShapeTiming] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)
    score: ScoreBreakdown
    rl_reward: float | None
    """Bounded reward for RL (apex_core.score.rl_reward); None for infrastructure errors."""
    provenance: Provenance
    elapsed_s: float
    phases_s: dict[str, float] = Field(default_factory=dict)
    """Wall time per stage (integrity, load, correctness, timing); 'timing.*' and 'trace' are parts of 'timing'."""
    cached: bool = False
    """True when this result came from the grade cache rather than a new measurement."""

    @model_validator(mode="after")
    def _says_when_nothing_was_timed(self) -> GradeResult:
        """A result without timings names no timing method: its provenance says why nothing was timed."""
        if not self.timings and not self.provenance.timing_method.startswith(NOT_TIMED):
            self.provenance = self.provenance.model_copy(update={"timing_method": f"{NOT_TIMED}: {self._why_not_timed()}"})
        return self

    def _why_not_timed(self) -> str:
        flagged = next((f.split(":", 1)[1].strip() for f in self.flags if f.startswith("not_timed:")), "")
        if flagged:
            return flagged
        if self.outcome is not Outcome.ok:
            return f"the grading ended before timing ({self.outcome.value})"
        return "correctness only"

    @property
    def max_abs_error(self) -> float | None:
        errors = [c.max_abs_error for c in self.checks if c.max_abs_error is not None]
        return max(errors) if errors else None

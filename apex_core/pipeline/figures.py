"""What the measuring stages of a run recorded, typed: the benchmark's baseline, the final
benchmark and the score stage's summary, as ``RunState`` keeps them in state.json.

Every reader (the report, the leaderboard, the run list, the pipeline server) reads attributes of
these models instead of string keys of a dict, so a renamed figure fails where it is declared.
State files written before a figure existed still load: every field a past version lacked has a
default, and a final benchmark of the two-arm days (before the control arm, 2026-12-03) reads as
``TwoArmFinal``.
"""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from apex_core.pipeline.stages.final.benchmark import FinalBenchmark
from apex_core.workloads.spec import WorkloadSpec


class BaselineFigures(BaseModel):
    """The benchmark stage: the original stack's throughput the run starts from."""

    model_config = ConfigDict(extra="ignore")

    tokens_per_s: float | None = None
    cv: float | None = Field(default=None, description="coefficient of variation over the runs")
    runs: list[float] = Field(default_factory=list, description="each run's tokens/s")
    cached: bool = Field(default=False, description="an earlier benchmark of the same workload and environment was reused")
    file: str | None = Field(default=None, description="its benchmark.json, in the run's folder")
    workload: dict[str, object] | None = Field(default=None, description="the resolved workload spec measured")


class FinalFigures(FinalBenchmark):
    """The benchmark-final stage: the three arms' result (``FinalBenchmark``) and its file."""

    workload: WorkloadSpec | None = Field(default=None, exclude=True)  # in final.json; not repeated in the state
    file: str | None = Field(default=None, description="its final.json, in the run's folder")


class TwoArmFinal(BaseModel):
    """A final benchmark recorded before the control arm: original against patched, whose ratio
    mixed the adapters' effect with the kernels' (kept readable for the runs of those days)."""

    model_config = ConfigDict(extra="ignore")

    median_ratio: float | None = None
    interval: tuple[float, float] | None = None
    interval_method: str | None = None
    significant: bool = False
    original_tokens_per_s: list[float] = Field(default_factory=list)
    patched_tokens_per_s: list[float] = Field(default_factory=list)
    verdict: str = ""
    model_reward: float | None = None
    file: str | None = None


def _final_kind(value: object) -> str:
    """Three arms when the record has a kernel gain; a record of either kind is read as its kind,
    never as the other: a three-arm record that does not validate is an error, not a two-arm one."""
    if isinstance(value, dict):
        return "three" if "kernel_gain" in value else "two"
    return "two" if isinstance(value, TwoArmFinal) else "three"


FinalRecord = Annotated[Union[Annotated[FinalFigures, Tag("three")], Annotated[TwoArmFinal, Tag("two")]],
                        Discriminator(_final_kind)]
"""What ``RunState.final`` holds once benchmark-final has run."""


class KernelOutcome(BaseModel):
    """One kernel's line of the summary."""

    model_config = ConfigDict(extra="ignore")

    task_id: str
    iterations: int = 0
    best_iteration: int | None = None
    outcome: str | None = None
    speedup: float | None = None
    score: float | None = None
    integrated: bool = False
    trajectory_id: str | None = None


class ScoreSummary(BaseModel):
    """The score stage: the model reward and what it was made of (also ``summary.json``)."""

    model_config = ConfigDict(extra="ignore")

    workload: str | None = None
    agent: str | None = None
    baseline_tokens_per_s: float | None = None
    final_ratio: float | None = Field(default=None, description="the kernel gain's median (candidate / control)")
    final_interval: tuple[float, float] | None = None
    significant: bool | None = None
    integration_gain: float | None = Field(default=None, description="control / original: the adapters', never credited")
    throughput_credited: bool = True
    flags: list[str] = Field(default_factory=list)
    kernel_score: float | None = None
    model_reward: float | None = None
    kernels: list[KernelOutcome] = Field(default_factory=list)

"""What a pipeline run was asked to do: the settings of ``apex run``, kept in its state file so a
resumed run goes on with the same ones."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from apex_core.score import INTEGRATION_THRESHOLD

AGENTS = ("replay", "claude", "codex", "cursor")
KERNEL_TYPES = ("triton", "hip", "python", "all")
"""The languages a selected kernel's task may be written in (``task.language``): "triton kernels
only" keeps the hot kernels whose task an agent writes in Triton."""
DEFAULT_SCORE_THRESHOLD = 300.0
"""A kernel score that ends a kernel's iterations early (300 points is a 1.4x credited speedup)."""


class RunConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str = Field(description="workload id, e.g. cpu-mini or llama-3-1-8b-instruct; with tasks, a label")
    tasks: tuple[str, ...] = Field(default=(), description="optimize these tasks instead of a workload's hot kernels "
                                                          "(apex optimize-kernel): no benchmark, profile or integration")
    kernels: tuple[str, ...] = Field(default=(), description="kernel stacks the workload runs with (liger, fla)")
    layers: int | None = Field(default=None, ge=1)
    top_k: int = Field(default=3, ge=1, le=50, description="bottleneck kernels to optimize")
    kernel_types: tuple[str, ...] = ("all",)
    iterations: int = Field(default=3, ge=1, le=50, description="agent iterations per kernel")
    max_turns: int = Field(default=25, ge=1, le=500, description="agent turns per iteration")
    score_threshold: float = Field(default=DEFAULT_SCORE_THRESHOLD, gt=0)
    agent: Literal["replay", "claude", "codex", "cursor"] = "replay"
    agent_model: str | None = None
    agent_model_simple: str | None = Field(default=None, description="model for difficulty-1 tasks (default: agent_model)")
    agent_model_complex: str | None = Field(default=None, description="model for difficulty-3 tasks (default: agent_model)")
    agent_timeout_s: float = Field(default=1800.0, gt=0, description="wall-clock limit of one agent iteration")
    replay_from: str | None = Field(default=None, description="replay agent: a trajectory file to replay instead of our solutions")
    parallel_kernels: int = Field(default=1, ge=1, le=64)
    executor: Literal["local", "ray"] = Field(default="local", description=(
        "where gradings run: local (this machine's GPUs) or ray (one grading actor per GPU of a Ray cluster)"))
    ray_address: str | None = Field(default=None, max_length=512, description=(
        "with executor ray: the cluster to join (host:6379, ray://host:10001); default RAY_ADDRESS, else Ray on this machine"))
    runs: int = Field(default=5, ge=2, le=100, description="benchmark runs")
    final_pairs: int | None = Field(default=None, ge=2, le=100, description=(
        "final-benchmark pairs; default the benchmark's runs, at least 6 (the fewest for a distribution-free 95% interval)"))
    cache_hours: float = Field(default=0.0, ge=0)
    min_speedup: float = Field(default=INTEGRATION_THRESHOLD, gt=0)
    leaderboard: bool = True
    gpu: str | None = Field(default=None, description=(
        "target architecture for prompts (default: this machine's); with executor ray also the GPUs gradings run on"))

    @field_validator("ray_address")
    @classmethod
    def _address_needs_ray(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value and info.data.get("executor") != "ray":
            raise ValueError("a Ray address needs executor 'ray' (--executor ray)")
        return value

    @field_validator("kernel_types")
    @classmethod
    def _types(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [v for v in value if v not in KERNEL_TYPES]
        if unknown or not value:
            raise ValueError(f"kernel type {unknown[0] if unknown else '(none)'!r}: use {', '.join(KERNEL_TYPES)}")
        return tuple(sorted(set(value)))

    def model_for(self, difficulty: int) -> str | None:
        """The agent model of a task of this difficulty (1 simple, 3 complex)."""
        if difficulty <= 1 and self.agent_model_simple:
            return self.agent_model_simple
        if difficulty >= 3 and self.agent_model_complex:
            return self.agent_model_complex
        return self.agent_model

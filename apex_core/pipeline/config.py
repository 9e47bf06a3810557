"""What a pipeline run was asked to do: the settings of ``apex run``, kept in its state file so a
resumed run goes on with the same ones."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from apex_core.agents.registry import AgentName
from apex_core.score import INTEGRATION_THRESHOLD
from apex_core.workloads.spec import KernelStack

Language = Literal["triton", "hip", "python", "all"]
"""The languages a selected kernel's task may be written in (``task.language``): "triton kernels
only" keeps the hot kernels whose task an agent writes in Triton. (Not the identifier's kernel
*types*, which say where a profiled kernel comes from: triton, aten, cublas, ...)"""
DEFAULT_SCORE_THRESHOLD = 300.0
"""A kernel score that ends a kernel's iterations early (300 points is a 1.4x credited speedup)."""


class RunConfig(BaseModel):
    """Every setting of a run, declared once: ``apex run`` / ``apex optimize-kernel`` options and the
    pipeline server's ``run_pipeline`` parameters are made from these fields (their type, default,
    bounds and description), see ``apex_core/cli/model_options.py`` and ``servers/pipeline.py``."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    workload: str = Field(min_length=1, max_length=64,
                          description="the workload, e.g. cpu-mini, llama-3-1-8b-instruct, qwen3-5-27b; with tasks, a label")
    tasks: tuple[str, ...] = Field(default=(), description="optimize these tasks instead of a workload's hot kernels "
                                                          "(apex optimize-kernel): no benchmark, profile or integration")
    kernels: tuple[KernelStack, ...] = Field(default=(), max_length=2, description="kernel stacks the model runs with")
    layers: int | None = Field(default=None, ge=1, description="decoder layers to build (default: the model's reduced default)")
    top_k: int = Field(default=3, ge=1, le=50, description="bottleneck kernels to optimize")
    languages: tuple[Language, ...] = Field(
        default=("all",), min_length=1, max_length=4, validation_alias=AliasChoices("languages", "kernel_types"),
        description="languages of the kernels' tasks to optimize, e.g. triton for Triton kernels only")
    iterations: int = Field(default=3, ge=1, le=50, description="agent iterations per kernel")
    max_turns: int = Field(default=25, ge=1, le=500, description="agent turns per iteration")
    score_threshold: float = Field(default=DEFAULT_SCORE_THRESHOLD, gt=0,
                                   description="a kernel score that ends a kernel's iterations early")
    agent: AgentName = Field(default="replay", description="agent backend: replay (offline, our solutions, no login), "
                                                           "claude, codex or cursor")
    agent_model: str | None = Field(default=None, max_length=128, description="the agent's model")
    agent_model_simple: str | None = Field(default=None, max_length=128,
                                           description="model for difficulty-1 tasks (default: the agent's model)")
    agent_model_complex: str | None = Field(default=None, max_length=128,
                                            description="model for difficulty-3 tasks (default: the agent's model)")
    agent_timeout_s: float = Field(default=1800.0, gt=0, description="wall-clock limit of one agent iteration, in seconds")
    replay_from: str | None = Field(default=None, description="replay agent: trajectories to replay instead of our solutions")
    parallel_kernels: int = Field(default=1, ge=1, le=64, description="kernels optimized at once (one grading per GPU at a time)")
    executor: Literal["local", "ray"] = Field(default="local", description=(
        "where gradings run: local (this machine's GPUs) or ray (one grading actor per GPU of a Ray cluster)"))
    ray_address: str | None = Field(default=None, max_length=512, description=(
        "with executor ray: the cluster to join (host:6379, ray://host:10001); default RAY_ADDRESS, else Ray on this machine"))
    runs: int = Field(default=5, ge=2, le=100, description="benchmark runs")
    final_pairs: int | None = Field(default=None, ge=2, le=100, description=(
        "final-benchmark pairs (default: the benchmark's runs, at least 6, the fewest for a distribution-free 95% interval)"))
    cache_hours: float = Field(default=0.0, ge=0, description="reuse a benchmark of the same workload and environment this recent")
    min_speedup: float = Field(default=INTEGRATION_THRESHOLD, gt=0, description="credited speedup a winner needs to be integrated")
    leaderboard: bool = Field(default=True, description="add the run's kernels to the leaderboard")
    gpu: str | None = Field(default=None, description=(
        "target architecture for the prompts (default: this machine's); with executor ray also the GPUs gradings run on"))

    @field_validator("ray_address")
    @classmethod
    def _address_needs_ray(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value and info.data.get("executor") != "ray":
            raise ValueError("a Ray address needs executor 'ray' (--executor ray)")
        return value

    @field_validator("languages")
    @classmethod
    def _languages(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(value)))

    def model_for(self, difficulty: int) -> str | None:
        """The agent model of a task of this difficulty (1 simple, 3 complex)."""
        if difficulty <= 1 and self.agent_model_simple:
            return self.agent_model_simple
        if difficulty >= 3 and self.agent_model_complex:
            return self.agent_model_complex
        return self.agent_model

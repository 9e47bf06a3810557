"""What crosses an RL episode's boundary: the actions a policy may take, what it sees back, and the
episode's settings. Typed once here, so OpenEnv's schema endpoint, the verifiers environment and
any HTTP client see the same JSON, and a malformed action is a validation error the policy can read
instead of an exception in the trainer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from apex_core.executors.requests import MAX_SOLUTION_BYTES
from apex_core.pipeline.state import GradeSummary

ToolName = Literal["find_kernel", "read_source", "grep_source", "search_docs", "check", "benchmark"]
"""The tools of an episode: the source explorer and the documentation search (read only), and the
grader on a draft: ``check`` (correctness on the public shapes, no timing) and ``benchmark``
(correctness and timing on the public shapes). Only ``submit`` is graded on the hidden shapes too,
and only it earns a reward."""


class Submit(BaseModel):
    """The solution file, whole: graded like ``apex grade`` (hidden shapes, fresh inputs, timing);
    its RL reward is the step's reward."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["submit"] = "submit"
    code: str = Field(min_length=1, max_length=MAX_SOLUTION_BYTES, description="the whole solution file's text")


class ToolCall(BaseModel):
    """One tool of the episode with its arguments; its answer is the next observation's text."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["tool"] = "tool"
    tool: ToolName
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments, e.g. {\"location\": \"...\"}")


Action = Annotated[Submit | ToolCall, Field(discriminator="kind")]


class EpisodeSettings(BaseModel):
    """How an episode runs: its limits, and where its gradings go."""

    max_turns: int = Field(default=8, ge=1, le=200, description="steps (tool calls and submissions) before the episode ends")
    max_submissions: int = Field(default=1, ge=1, le=20, description="graded submissions; the last one ends the episode")
    target: str | None = Field(default=None, description="GPU arch or product a GPU task must be graded on (ray executor)")
    tool_reply_chars: int = Field(default=8000, ge=200, le=200_000, description="a tool's answer is cut to this many characters")
    record_dir: str | None = Field(default=None, description="where each episode's trajectory is written; None: nowhere")


class Observation(BaseModel):
    """What the policy reads after a reset or a step."""

    task_id: str
    text: str = Field(description="the prompt after a reset; a tool's answer or the grader's verdict after a step")
    reward: float | None = Field(description="the step's reward: a submission's RL reward, 0 for a tool call, None when the "
                                             "grading failed for the infrastructure's own reasons (drop the sample)")
    done: bool
    turn: int = Field(ge=0, description="steps taken so far")
    turns_left: int = Field(ge=0)
    grade: GradeSummary | None = Field(default=None, description="a submission's verdict")
    error: str | None = Field(default=None, description="why the action could not be carried out (it still took a turn)")

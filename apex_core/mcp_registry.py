"""The one list of Apex's MCP servers and the tools each declares.

Host configurations (.mcp.json, Cursor, Codex) and the prompts' tool tables are made from this
list, so nothing can advertise a server or tool that does not exist. ``apex_core`` cannot import
the servers (they depend on MCP), so each entry restates its tool names as data; a test compares
them with the tools the real servers list.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ToolSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    when_to_use: str


class ServerSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    module: str
    description: str
    tools: tuple[ToolSummary, ...]
    env: dict[str, str] = {}
    tool_timeout_s: int = 60


SERVERS: tuple[ServerSpec, ...] = (
    ServerSpec(
        name="apex-grader",
        module="servers.grader",
        description="Grades kernel solutions out of process: correctness, interleaved timing, score, RL reward.",
        tools=(
            ToolSummary(name="check_correctness", when_to_use="check a solution on every test and hidden shape, no timing (fast, while iterating)"),
            ToolSummary(name="grade_solution", when_to_use="the full verdict: correctness, timing against the baseline, score"),
            ToolSummary(name="benchmark", when_to_use="time a solution against the baseline on the benchmark shapes"),
            ToolSummary(name="compare", when_to_use="grade several solutions of one task and rank them"),
            ToolSummary(name="hardware_spec", when_to_use="the target GPU's peak numbers with sources, for roofline estimates"),
        ),
        tool_timeout_s=1800,
    ),
)
"""Each server adds one entry here; host configs and prompt tool tables are generated from it."""


def tool_names() -> list[str]:
    return [f"mcp__{server.name}__{tool.name}" for server in SERVERS for tool in server.tools]

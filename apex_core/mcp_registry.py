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


SERVERS: tuple[ServerSpec, ...] = ()
"""Empty until the first server lands (the grader); each later server adds one entry here."""


def tool_names() -> list[str]:
    return [f"mcp__{server.name}__{tool.name}" for server in SERVERS for tool in server.tools]

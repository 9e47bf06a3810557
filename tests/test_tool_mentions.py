"""Every MCP tool our texts name exists on a server: prompts, CLAUDE.md, AGENTS.md, READMEs, skills.

The reference system advertised tools that did not exist. Here a tool is named in one of three
ways, each checked against the tools the real servers list (not just the registry):

- ``mcp__<server>__<tool>`` (Claude Code's form; Codex writes the server with underscores);
- in skills, any backticked snake_case word must be a tool, a gateway tool, or a word of the
  tools' own vocabulary (parameter and result field names, enum values);
- elsewhere, the same rule applies on lines that talk about tools or MCP.
"""

from __future__ import annotations

import asyncio
import importlib
import re
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from apex_core.hardware.detect import DetectedDevice
from apex_core.hardware.target import resolve_target
from apex_core.hosting.mcp_registry import all_servers
from apex_core.prompts import system_prompt, task_prompt
from apex_core.hosting.skills import SKILLS_DIR
from apex_core.tasks import all_tasks

REPO_ROOT = Path(__file__).resolve().parent.parent
QUALIFIED = re.compile(r"mcp__([A-Za-z0-9_-]+?)__([a-z][a-z0-9_]*)")
BACKTICKED = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`")
TOOL_TALK = re.compile(r"\b(tools?|MCP)\b")
HOST_SETTINGS = {"tool_timeout_sec", "startup_timeout_sec", "env_vars", "enabled_tools", "disabled_tools", "trust_level"}
"""Configuration keys the hosts define (Codex's config.toml), which docs about tools name too."""


def _walk(schema: Any, into: set[str]) -> None:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                into.update(value)
            if key == "enum" and isinstance(value, list):
                into.update(v for v in value if isinstance(v, str))
            _walk(value, into)
    elif isinstance(schema, list):
        for item in schema:
            _walk(item, into)


@pytest.fixture(scope="module")
def surface() -> dict[str, Any]:
    async def listing(module: str) -> list[Any]:
        async with Client(importlib.import_module(module).mcp) as client:
            return await client.list_tools()

    tools: dict[str, set[str]] = {}
    vocabulary: set[str] = set()
    for server in all_servers():
        listed = asyncio.run(listing(server.module))
        tools[server.name] = {t.name for t in listed}
        for tool in listed:
            _walk(tool.inputSchema, vocabulary)
            _walk(tool.outputSchema or {}, vocabulary)
    return {"tools": tools, "vocabulary": vocabulary, "names": set().union(*tools.values())}


def _qualified_problems(text: str, tools: dict[str, set[str]]) -> list[str]:
    problems = []
    by_host_name = {**{name: name for name in tools}, **{name.replace("-", "_"): name for name in tools}}
    for server, tool in QUALIFIED.findall(text):
        if server not in by_host_name:
            problems.append(f"mcp__{server}__{tool}: no server {server!r}")
        elif tool not in tools[by_host_name[server]]:
            problems.append(f"mcp__{server}__{tool}: {server} has no tool {tool!r}")
    return problems


def _bare_problems(text: str, surface: dict[str, Any], every_line: bool) -> list[str]:
    known = surface["names"] | surface["vocabulary"] | HOST_SETTINGS
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        if every_line or TOOL_TALK.search(line):
            problems += [f"line {number}: `{word}` is no tool (nor a parameter or field of one)"
                         for word in BACKTICKED.findall(line) if word not in known]
    return problems


def _documents() -> list[Path]:
    docs = [REPO_ROOT / name for name in ("AGENTS.md", "CLAUDE.md", "README.md", "servers/README.md", "skills/README.md")]
    return [d for d in docs if d.exists()]


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_documents_name_only_tools_that_exist(path, surface):
    text = path.read_text(encoding="utf-8")
    problems = _qualified_problems(text, surface["tools"]) + _bare_problems(text, surface, every_line=False)
    assert not problems, problems


def test_agents_md_names_every_grader_tool(surface):
    text = (REPO_ROOT / "AGENTS.md").read_text(encoding="utf-8")
    missing = [tool for tool in surface["tools"]["apex-grader"] if f"`{tool}`" not in text]
    assert not missing, f"AGENTS.md does not mention {missing}"


@pytest.mark.parametrize("skill", sorted(SKILLS_DIR.glob("*/**/*.md")), ids=lambda p: str(p.relative_to(SKILLS_DIR)))
def test_skills_name_only_tools_that_exist(skill, surface):
    text = skill.read_text(encoding="utf-8")
    problems = _qualified_problems(text, surface["tools"]) + _bare_problems(text, surface, every_line=True)
    assert not problems, problems


def test_every_prompt_names_only_tools_that_exist(surface):
    target = resolve_target(detected=DetectedDevice(vendor="cpu", product_name="test CPU"))
    texts = [system_prompt(target)] + [task_prompt(task, target) for task in all_tasks().values()]
    problems = [p for text in texts for p in _qualified_problems(text, surface["tools"])]
    assert not problems, problems
    assert any(QUALIFIED.search(text) for text in texts)  # the prompts do name tools, so the check bites


def test_the_checks_catch_a_tool_that_does_not_exist(surface):
    assert _qualified_problems("call `mcp__apex-grader__grade_kernel`", surface["tools"])
    assert _qualified_problems("call `mcp__apex-profiler__profile`", surface["tools"])
    assert _bare_problems("the `grade_kernel` tool", surface, every_line=False)
    assert not _bare_problems("the `grade_solution` tool with `task_id`; outcome `wrong_answer`", surface, every_line=False)

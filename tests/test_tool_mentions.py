"""Every MCP tool our texts name exists on a server: prompts, CLAUDE.md, AGENTS.md, READMEs, skills.

The reference system advertised tools that did not exist. Here a tool is named in one of three
ways, each checked against the tools the real servers list (not just the registry):

- ``mcp__<server>__<tool>`` (Claude Code's form; Codex writes the server with underscores), anywhere;
- a backticked snake_case word on a line that talks about tools or MCP must be a tool, a gateway
  tool, or a word of the tools' own vocabulary (parameter and result field names, enum values);
- a backticked word that is called ("call `x`") or named a tool ("the `x` tool"), on any line.

Skills are held to the same rules as other documents. Checking every backticked word of a skill
was too strict once skills teach Triton and HIP: `num_warps`, `waves_per_eu` and
`__launch_bounds__` are kernel vocabulary, not tools. What is still caught is a name offered as a
tool, which is how the reference system advertised tools that did not exist.
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
CALLED = re.compile(r"\b(?:[Cc]all|[Ii]nvoke)\s+(?:the\s+)?`([a-z][a-z0-9_]*)`"
                    r"|`([a-z][a-z0-9_]*)`\s+(?:MCP\s+)?tool\b")
"""A word offered as a tool wherever it stands: "call `grade_solution`", "the `hardware_spec` tool" (an
imperative "call", not "calls `apex_core`", which describes code)."""
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


def _bare_problems(text: str, surface: dict[str, Any]) -> list[str]:
    known = surface["names"] | surface["vocabulary"] | HOST_SETTINGS
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        if TOOL_TALK.search(line):
            problems += [f"line {number}: `{word}` is no tool (nor a parameter or field of one)"
                         for word in BACKTICKED.findall(line) if word not in known]
        problems += [f"line {number}: `{word}` is offered as a tool but no server has it"
                     for pair in CALLED.findall(line) for word in pair if word and word not in surface["names"]]
    return problems


def _documents() -> list[Path]:
    docs = [REPO_ROOT / name for name in ("AGENTS.md", "CLAUDE.md", "README.md", "servers/README.md", "skills/README.md")]
    return [d for d in docs if d.exists()]


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_documents_name_only_tools_that_exist(path, surface):
    text = path.read_text(encoding="utf-8")
    problems = _qualified_problems(text, surface["tools"]) + _bare_problems(text, surface)
    assert not problems, problems


def test_agents_md_names_every_grader_tool(surface):
    text = (REPO_ROOT / "AGENTS.md").read_text(encoding="utf-8")
    missing = [tool for tool in surface["tools"]["apex-grader"] if f"`{tool}`" not in text]
    assert not missing, f"AGENTS.md does not mention {missing}"


@pytest.mark.parametrize("skill", sorted(SKILLS_DIR.glob("*/**/*.md")), ids=lambda p: str(p.relative_to(SKILLS_DIR)))
def test_skills_name_only_tools_that_exist(skill, surface):
    text = skill.read_text(encoding="utf-8")
    problems = _qualified_problems(text, surface["tools"]) + _bare_problems(text, surface)
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
    assert _bare_problems("the `grade_kernel` tool", surface)
    assert not _bare_problems("the `grade_solution` tool with `task_id`; outcome `wrong_answer`", surface)


def test_an_invented_tool_in_a_skill_is_caught_while_kernel_vocabulary_is_not(surface, tmp_path):
    skill = tmp_path / "SKILL.md"
    skill.write_text(
        "Tune `num_warps`, `num_stages` and `waves_per_eu`; read `max_abs_error`.\n"  # Triton knobs, no tool talk
        "Then call `profile_kernel` on the solution.\n"  # offered as a tool: must exist
        "The `roofline_check` tool says how far off you are.\n"
        "MCP servers answer `tune_kernel` as well.\n"
        "Or `mcp__apex-grader__tune_kernel`.\n"
    )
    problems = _qualified_problems(skill.read_text(), surface["tools"]) + _bare_problems(skill.read_text(), surface)
    named = {word for problem in problems for pair in re.findall(r"`([^`]+)`|(mcp__\S+?):", problem) for word in pair if word}
    assert {"profile_kernel", "roofline_check", "tune_kernel", "mcp__apex-grader__tune_kernel"} <= named, problems
    assert not named & {"num_warps", "num_stages", "waves_per_eu", "max_abs_error"}, problems
    assert not _bare_problems("Call `grade_solution`, then the `hardware_spec` tool.", surface)

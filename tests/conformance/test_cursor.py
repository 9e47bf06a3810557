"""Cursor's configuration, read the way Cursor documents it, starts every server.

Cursor's CLI is in no registry reachable here, so this loads ``.cursor/mcp.json`` with Cursor's
variable forms expanded (``${workspaceFolder}`` and friends), starts each server as Cursor would
(the command with its args and env, in the workspace folder), and talks to it with an MCP client.
The user-scope file ``apex mcp install --client cursor --scope user`` writes is checked the same
way, started from an unrelated folder.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from apex_core.hosting import hosts
from apex_core.hosting.mcp_registry import SERVERS

REPO_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("cursor_config", Path(__file__).parent / "cursor_config.py")
assert _spec is not None and _spec.loader is not None
cursor_config = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cursor_config)


def _session(spec: cursor_config.LaunchSpec, environ: dict[str, str]) -> tuple[set[str], dict]:
    registered = next(s for s in SERVERS if s.name == spec.name)
    assert spec.command is not None and registered.probe is not None
    transport = StdioTransport(command=spec.command, args=spec.args, env={**environ, **spec.env},
                               cwd=str(spec.cwd) if spec.cwd else None)

    async def talk() -> tuple[set[str], dict]:
        async with Client(transport) as client:
            tools = {t.name for t in await client.list_tools()}
            result = await client.call_tool(registered.probe.tool, dict(registered.probe.arguments))
            return tools, result.structured_content

    return asyncio.run(talk())


def test_every_server_in_the_committed_cursor_config_starts_from_the_workspace(client_env):
    specs = cursor_config.load_cursor_config(REPO_ROOT / ".cursor" / "mcp.json", workspace=REPO_ROOT, environ=client_env)
    assert {s.name for s in specs} == {s.name for s in SERVERS}
    for spec in specs:
        assert spec.command == str(REPO_ROOT / ".venv" / "bin" / "python")  # ${workspaceFolder} expanded
        tools, probe = _session(spec, client_env)
        registered = next(s for s in SERVERS if s.name == spec.name)
        assert tools == {t.name for t in registered.tools} and registered.probe.expect_key in probe


def test_the_user_scope_cursor_config_starts_from_any_folder(apex_cli, client_env, tmp_path):
    installed = apex_cli("mcp", "install", "--client", "cursor", "--scope", "user", env=client_env)
    assert installed.returncode == 0, installed.stderr
    elsewhere = tmp_path / "some-other-project"
    elsewhere.mkdir()
    path = Path(client_env["HOME"]) / ".cursor" / "mcp.json"
    specs = cursor_config.load_cursor_config(path, workspace=elsewhere, environ=client_env)
    assert {s.name for s in specs} == {s.name for s in SERVERS}
    for spec in specs:
        assert spec.command == hosts.default_python() and os.path.isabs(spec.command)
        registered = next(s for s in SERVERS if s.name == spec.name)
        tools, probe = _session(spec, client_env)
        assert tools == {t.name for t in registered.tools} and registered.probe.expect_key in probe
    assert (Path(client_env["HOME"]) / ".agents" / "skills" / "grade-a-kernel" / "SKILL.md").is_file()

"""The MCP Inspector's CLI (the real one from npm) against every server, as .mcp.json starts it.

For each server in the committed ``.mcp.json`` (and the gateway): ``tools/list`` returns exactly
the registered tools with their schemas, the registry's probe call returns structured output,
and a bad argument comes back as a readable tool error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apex_core.hosting import hosts
from apex_core.hosting.mcp_registry import GATEWAY, SERVERS, ServerSpec

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gateway_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gateway") / "mcp.json"
    path.write_text(hosts.render_claude(gateway=True))
    return path


def _config_for(server: ServerSpec, gateway_config: Path) -> Path:
    return gateway_config if server.name == GATEWAY.name else REPO_ROOT / ".mcp.json"


def _inspect(inspector: str, config: Path, server: str, run, env, *method: str) -> dict:
    done = run([inspector, "--cli", "--config", str(config), "--server", server, *method], env, REPO_ROOT, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("server", [*SERVERS, GATEWAY], ids=lambda s: s.name)
def test_the_inspector_lists_calls_and_gets_structured_results(server, npm_clients, client_env, run, gateway_config):
    inspector = npm_clients.bin("inspector")
    config = _config_for(server, gateway_config)
    listed = _inspect(inspector, config, server.name, run, client_env, "--method", "tools/list")
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert set(tools) == {t.name for t in server.tools}
    assert all(tool["outputSchema"]["type"] == "object" and tool["description"] for tool in tools.values())

    assert server.probe is not None
    args = [f"{key}={value}" for key, value in server.probe.arguments.items()]
    called = _inspect(inspector, config, server.name, run, client_env, "--method", "tools/call",
                      "--tool-name", server.probe.tool, *(["--tool-arg", *args] if args else []))
    assert not called.get("isError") and server.probe.expect_key in called["structuredContent"]
    assert json.loads(called["content"][0]["text"]) == called["structuredContent"]  # text for old clients, same data


def test_a_bad_argument_is_a_readable_tool_error_in_the_inspector(npm_clients, client_env, run):
    inspector = npm_clients.bin("inspector")
    server = SERVERS[0]
    called = _inspect(inspector, REPO_ROOT / ".mcp.json", server.name, run, client_env, "--method", "tools/call",
                      "--tool-name", "hardware_spec", "--tool-arg", "gpu=gfx9500")
    assert called["isError"] is True and "did you mean 'gfx950'" in called["content"][0]["text"]

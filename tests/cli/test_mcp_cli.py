"""``apex mcp``: list, serve (stdio and streamable HTTP), install/uninstall, config, skills."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from apex_core.hosting import hosts
from apex_core.hosting.mcp_registry import GATEWAY, SERVERS
from tests.conftest import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_list_shows_every_server_with_tools_and_timeouts(apex_cli):
    done = apex_cli("mcp", "list", "--json")
    assert done.returncode == 0, done.stderr
    listed = {s["name"]: s for s in json.loads(done.stdout)}
    assert set(listed) == {s.name for s in SERVERS} | {GATEWAY.name}
    grader = listed["apex-grader"]
    assert grader["module"] == "servers.grader" and grader["tool_timeout_s"] == max(t["timeout_s"] for t in grader["tools"])
    table = apex_cli("mcp", "list")
    assert "apex-grader" in table.stdout and "grade_solution (1800)" in table.stdout


@pytest.mark.parametrize(("args", "expected"), [
    (["mcp", "install", "--client", "vscode"], "unknown agent client 'vscode'"),
    (["mcp", "install", "--client", "claude", "--scope", "global"], "unknown scope 'global'"),
    (["mcp", "install", "--client", "claude", "--project-dir", "/nonexistent"], "is not an Apex checkout"),
    (["mcp", "config", "--client", "all"], "takes one host here"),
    (["mcp", "serve", "apex-grade"], "did you mean 'apex-grader'"),
    (["mcp", "serve", "apex-grader", "--http", "localhost"], "is not HOST:PORT"),
    (["mcp", "serve", "apex-grader", "--http", "127.0.0.1:99999"], "port must be a number from 0 to 65535"),
    (["mcp", "serve", "apex-grader", "--http", "::1:8000"], "IPv6 hosts in brackets"),
    (["mcp", "serve", "apex-grader", "--http", "127.0.0.1:8000", "--path", "mcp"], "must start with '/'"),
    (["mcp", "serve", "apex-grader", "--path", "/x"], "applies only with --http"),
])
def test_bad_input_is_exit_2_and_one_clear_line(apex_cli, args, expected):
    assert expected in _one_line_error(apex_cli(*args))


def test_project_install_into_a_checkout_writes_exactly_the_committed_files(apex_cli, tmp_path):
    (tmp_path / "skills").mkdir()
    done = apex_cli("mcp", "install", "--client", "all", "--project-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    for client, (relative, _) in hosts.PROJECT_FILES.items():
        assert (tmp_path / relative).read_text() == (REPO_ROOT / relative).read_text(), relative
    assert "Codex reads it only for trusted projects" in done.stdout
    assert os.readlink(tmp_path / ".claude" / "skills") == "../skills"


def test_user_install_registers_the_absolute_interpreter_and_uninstall_takes_it_back(apex_cli, tmp_path):
    env = {"HOME": str(tmp_path), "CODEX_HOME": str(tmp_path / "codex"), "CLAUDE_CONFIG_DIR": ""}
    done = apex_cli("mcp", "install", "--client", "claude,cursor,codex", "--scope", "user", env=env)
    assert done.returncode == 0, done.stderr
    claude = json.loads((tmp_path / ".claude.json").read_text())["mcpServers"]["apex-grader"]
    assert claude["command"] == os.path.abspath(sys.executable) and claude["type"] == "stdio"
    cursor = json.loads((tmp_path / ".cursor" / "mcp.json").read_text())["mcpServers"]["apex-grader"]
    assert os.path.isabs(cursor["command"])
    assert 'command = "' + os.path.abspath(sys.executable) + '"' in (tmp_path / "codex" / "config.toml").read_text()
    assert (tmp_path / ".claude" / "skills" / "grade-a-kernel" / "SKILL.md").is_file()
    assert (tmp_path / ".agents" / "skills" / "grade-a-kernel").is_symlink()
    gone = apex_cli("mcp", "uninstall", "--client", "all", env=env)
    assert gone.returncode == 0, gone.stderr
    # files install made for Apex alone go; a file with the user's own entries keeps them
    for made in (tmp_path / ".claude.json", tmp_path / ".cursor" / "mcp.json", tmp_path / "codex" / "config.toml"):
        assert not made.exists() and f"removed {made}" in gone.stdout, (made, gone.stdout)
    assert not (tmp_path / ".agents" / "skills" / "grade-a-kernel").exists()
    (tmp_path / ".claude.json").write_text(json.dumps({"numStartups": 3, "mcpServers": {"mine": {"command": "x"}}}))
    assert apex_cli("mcp", "install", "--client", "claude", "--scope", "user", env=env).returncode == 0
    assert apex_cli("mcp", "uninstall", "--client", "claude", env=env).returncode == 0
    assert json.loads((tmp_path / ".claude.json").read_text()) == {"numStartups": 3, "mcpServers": {"mine": {"command": "x"}}}


def test_config_prints_a_hosts_file_without_writing_it(apex_cli):
    done = apex_cli("mcp", "config", "--client", "cursor", "--scope", "project")
    assert done.returncode == 0 and done.stdout == (REPO_ROOT / ".cursor" / "mcp.json").read_text()
    gateway = json.loads(apex_cli("mcp", "config", "--client", "claude", "--gateway").stdout)["mcpServers"]
    assert list(gateway) == ["apex"] and os.path.isabs(gateway["apex"]["command"])


def test_skills_validates_the_shipped_skills(apex_cli):
    done = apex_cli("mcp", "skills", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {r["name"] for r in json.loads(done.stdout)} >= {"grade-a-kernel"}


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), "APEX_CACHE_DIR": str(tmp_path / "cache")}


def test_serve_speaks_stdio_by_default(tmp_path):
    transport = StdioTransport(command=sys.executable, args=["-m", "apex_core.cli.main", "mcp", "serve", "apex-grader"],
                               env=_env(tmp_path), cwd=str(REPO_ROOT))

    async def session():
        async with Client(transport) as client:
            return {t.name for t in await client.list_tools()}

    assert asyncio.run(session()) == {t.name for t in SERVERS[0].tools}


@pytest.mark.parametrize("name", ["apex-grader", "apex"])
def test_serve_http_answers_a_remote_client(name, tmp_path):
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "apex_core.cli.main", "mcp", "serve", name, "--http", f"127.0.0.1:{port}"],
                              cwd=REPO_ROOT, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spec = next(s for s in (*SERVERS, GATEWAY) if s.name == name)
    assert spec.probe is not None

    async def session():
        deadline = time.monotonic() + 60
        while True:
            try:
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    tools = {t.name for t in await client.list_tools()}
                    probe = await client.call_tool(spec.probe.tool, dict(spec.probe.arguments))
                    return tools, probe
            except Exception:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                await asyncio.sleep(0.5)

    try:
        tools, probe = asyncio.run(session())
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert tools == {t.name for t in spec.tools}
    assert spec.probe.expect_key in probe.structured_content
    assert f"serving {name} at http://127.0.0.1:{port}/mcp" in stderr


def test_the_server_launcher_refuses_an_unknown_server_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "servers", "apex-grade"], cwd=REPO_ROOT, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "did you mean 'apex-grader'" in done.stderr


def test_the_scripted_model_serves_on_ipv6_loopback_too():
    import http.client

    from scripted_model import ScriptedModelServer, load_script

    try:
        server = ScriptedModelServer(load_script("say-hi"), host="::1")
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with server:
        connection = http.client.HTTPConnection("::1", int(server.url.rsplit(":", 1)[1]), timeout=10)
        connection.request("GET", "/_scripted/state")
        assert json.loads(connection.getresponse().read())["turns"] == 1

"""Claude Code (the real CLI from npm) against the configurations Apex generates.

- ``claude mcp add -s project`` writes the same ``.mcp.json`` we commit, byte for byte;
- ``claude mcp list`` in this repository connects to every server in it, and to the gateway;
- ``apex mcp install --scope user`` registers servers Claude Code connects to from any folder;
- a server run with ``apex mcp serve --http`` is reachable as a remote (HTTP) server;
- Claude Code sees the skills linked into ``.claude/skills``.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path


from apex_core.hosting import hosts
from apex_core.hosting.mcp_registry import GATEWAY, SERVERS
from scripted_model import ScriptedModelServer, load_script
from apex_core.hosting.skills import discover_skills

REPO_ROOT = Path(__file__).resolve().parents[2]
STATUS = re.compile(r"^(?P<name>[\w.-]+): (?P<target>.+) - (?P<status>.+)$")


def _statuses(output: str) -> dict[str, str]:
    return {m["name"]: m["status"] for m in map(STATUS.match, output.splitlines()) if m}


def _approve(env: dict[str, str], names: list[str]) -> None:
    """What a user does at the approval prompt for project servers, as a setting in the throw-away HOME."""
    settings = Path(env["HOME"]) / ".claude" / "settings.json"
    settings.write_text(json.dumps({"enabledMcpjsonServers": names}))


def test_claude_mcp_add_writes_the_mcp_json_we_commit(npm_clients, client_env, run, tmp_path):
    claude = npm_clients.bin("claude")
    project = tmp_path / "project"
    project.mkdir()
    ours = (REPO_ROOT / ".mcp.json").read_text()
    for name, entry in json.loads(ours)["mcpServers"].items():
        env_flags = [f"{k}={v}" for k, v in entry["env"].items()]
        argv = [claude, "mcp", "add", "-s", "project", name, *(["-e", *env_flags] if env_flags else []),
                "--", entry["command"], *entry["args"]]
        done = run(argv, client_env, project)
        assert done.returncode == 0, done.stdout + done.stderr
    theirs = (project / ".mcp.json").read_text()
    assert json.loads(theirs) == json.loads(ours)
    assert theirs.rstrip("\n") == ours.rstrip("\n")  # same layout too: a diff would show only real changes


def test_claude_mcp_list_connects_to_every_server_in_the_committed_mcp_json(npm_clients, client_env, run):
    claude = npm_clients.bin("claude")
    names = list(json.loads((REPO_ROOT / ".mcp.json").read_text())["mcpServers"])
    _approve(client_env, names)
    done = run([claude, "mcp", "list"], client_env, REPO_ROOT, timeout=180)
    statuses = _statuses(done.stdout)
    assert set(statuses) >= {s.name for s in SERVERS}, done.stdout + done.stderr
    assert all("Connected" in statuses[name] for name in names), done.stdout


def test_unapproved_project_servers_are_not_started(npm_clients, client_env, run):
    """The control for the test above: without approval Claude Code reports, not connects."""
    done = run([npm_clients.bin("claude"), "mcp", "list"], client_env, REPO_ROOT)
    assert all("Pending approval" in status for status in _statuses(done.stdout).values()), done.stdout


def test_the_gateway_entry_connects(npm_clients, client_env, run, tmp_path):
    claude = npm_clients.bin("claude")
    project = tmp_path / "gateway-project"
    project.mkdir()
    (project / ".mcp.json").write_text(hosts.render_claude(hosts.default_python(), gateway=True))
    _approve(client_env, [GATEWAY.name])
    done = run([claude, "mcp", "list"], client_env, project, timeout=180)
    assert "Connected" in _statuses(done.stdout).get(GATEWAY.name, ""), done.stdout + done.stderr


def test_user_scope_install_works_from_any_folder(npm_clients, client_env, run, apex_cli, tmp_path):
    claude = npm_clients.bin("claude")
    installed = apex_cli("mcp", "install", "--client", "claude", "--scope", "user", env=client_env)
    assert installed.returncode == 0, installed.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run([claude, "mcp", "list"], client_env, elsewhere, timeout=180)
    statuses = _statuses(done.stdout)
    assert all("Connected" in statuses.get(s.name, "") for s in SERVERS), done.stdout + done.stderr
    detail = run([claude, "mcp", "get", SERVERS[0].name], client_env, elsewhere)
    assert "User config" in detail.stdout and hosts.default_python() in detail.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_server_served_over_http_is_a_working_remote_server(npm_clients, client_env, run, tmp_path):
    claude = npm_clients.bin("claude")
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "apex_core.cli.main", "mcp", "serve", "apex-grader", "--http",
                               f"127.0.0.1:{port}"], cwd=REPO_ROOT, env=client_env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 60
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline and server.poll() is None, "the HTTP server did not start"
            time.sleep(0.3)
        project = tmp_path / "remote"
        project.mkdir()
        added = run([claude, "mcp", "add", "--transport", "http", "apex-grader-remote", url], client_env, project)
        assert added.returncode == 0, added.stderr
        done = run([claude, "mcp", "list"], client_env, project, timeout=120)
        assert "Connected" in _statuses(done.stdout).get("apex-grader-remote", ""), done.stdout + done.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_claude_code_offers_the_linked_skills_to_the_model(npm_clients, client_env, run):
    """A headless run in this repository, answered by the scripted model: what Claude Code sends
    must list every skill from skills/ (found through the .claude/skills link)."""
    claude = npm_clients.bin("claude")
    with ScriptedModelServer(load_script("say-hi")) as endpoint:
        env = {**client_env, "ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_API_KEY": "sk-apex-scripted"}
        done = run([claude, "-p", "say hi", "--strict-mcp-config", "--output-format", "json"], env, REPO_ROOT)
        requests = endpoint.requests
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["result"] == "Hi from the scripted model."
    sent = json.dumps([r.body for r in requests if r.path.startswith("/v1/messages")])
    for skill in discover_skills():
        assert skill.name in sent and skill.description[:60] in sent, f"Claude Code did not offer the skill {skill.name}"

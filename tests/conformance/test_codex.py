"""OpenAI Codex (the real CLI from npm) against the configurations Apex generates.

- ``apex mcp install --client codex --scope user`` registers servers ``codex mcp list`` shows
  enabled, with our command, timeouts and environment pass-through;
- it coexists with ``codex mcp add``: our entry replaces the one Codex wrote, nothing duplicates;
- in this repository, trusted, Codex reads ``.codex/config.toml``, starts the grader (its
  instructions reach the model's prompt), and finds the skills and AGENTS.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from apex_core.hosting import hosts
from apex_core.hosting.mcp_registry import SERVERS
from apex_core.hosting.skills import discover_skills

REPO_ROOT = Path(__file__).resolve().parents[2]
GRACE = ["-c", "mcp_optional_startup_grace_ms=60000"]
"""Codex renders the first prompt after a short grace period for MCP servers; waiting until they
are up makes the check deterministic (the grader imports torch, which takes a second)."""


def _listed(codex: str, env: dict[str, str], cwd: Path, run) -> dict[str, dict]:
    done = run([codex, "mcp", "list", "--json"], env, cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    return {entry["name"]: entry for entry in json.loads(done.stdout)}


def test_a_user_scope_install_is_listed_enabled_with_our_settings(npm_clients, client_env, run, apex_cli, tmp_path):
    codex = npm_clients.bin("codex")
    installed = apex_cli("mcp", "install", "--client", "codex", "--scope", "user", env=client_env)
    assert installed.returncode == 0, installed.stderr
    listed = _listed(codex, client_env, tmp_path, run)
    for server in SERVERS:
        entry = listed[server.name]
        assert entry["enabled"] is True and entry["disabled_reason"] is None
        assert entry["transport"]["command"] == hosts.default_python()
        assert entry["transport"]["args"] == ["-m", server.module]
        assert entry["transport"]["env_vars"] == list(server.pass_env)
        assert entry["tool_timeout_sec"] == server.tool_timeout_s and entry["startup_timeout_sec"] == server.startup_timeout_s


def test_apex_replaces_what_codex_mcp_add_wrote_without_duplicates(npm_clients, client_env, run, apex_cli, tmp_path):
    codex = npm_clients.bin("codex")
    server = SERVERS[0]
    added = run([codex, "mcp", "add", server.name, "--env", "STALE=1", "--", "python3", "-m", server.module], client_env, tmp_path)
    assert added.returncode == 0, added.stderr
    run([codex, "mcp", "add", "someone-else", "--", "true"], client_env, tmp_path)
    installed = apex_cli("mcp", "install", "--client", "codex", "--scope", "user", env=client_env)
    assert installed.returncode == 0, installed.stderr
    listed = _listed(codex, client_env, tmp_path, run)
    assert set(listed) == {*(s.name for s in SERVERS), "someone-else"}
    assert listed[server.name]["transport"]["env"] in (None, {}) and listed[server.name]["transport"]["command"] == hosts.default_python()
    removed = apex_cli("mcp", "uninstall", "--client", "codex", env=client_env)
    assert removed.returncode == 0, removed.stderr
    assert set(_listed(codex, client_env, tmp_path, run)) == {"someone-else"}


def _trust(env: dict[str, str], project: Path) -> None:
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.write_text(f'[projects."{project}"]\ntrust_level = "trusted"\n')


def test_the_trusted_repository_gets_the_grader_the_skills_and_agents_md(npm_clients, client_env, run):
    codex = npm_clients.bin("codex")
    _trust(client_env, REPO_ROOT)
    listed = _listed(codex, client_env, REPO_ROOT, run)
    assert listed[SERVERS[0].name]["enabled"] and listed[SERVERS[0].name]["transport"]["command"] == hosts.PROJECT_PYTHON

    done = run([codex, "debug", "prompt-input", *GRACE, "hello"], client_env, REPO_ROOT, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    prompt = json.dumps(json.loads(done.stdout))
    for server in SERVERS:  # Codex started each server and read its instructions
        assert f"mcp__{server.name.replace('-', '_')}" in prompt, f"Codex did not connect to {server.name}"
    assert "Grades GPU kernel solutions" in prompt
    for skill in discover_skills():
        assert skill.name in prompt and skill.description[:60] in prompt, f"Codex did not find the skill {skill.name}"
    assert "AGENTS.md instructions" in prompt and "Where solutions go" in prompt


def test_an_untrusted_repository_gets_no_project_servers(npm_clients, client_env, run):
    """The control for the test above: Codex ignores .codex/config.toml until the project is trusted."""
    listed = _listed(npm_clients.bin("codex"), client_env, REPO_ROOT, run)
    assert SERVERS[0].name not in listed

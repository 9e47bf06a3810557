import json
import os
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

import pytest

from apex_core.hosting import hosts
from apex_core.errors import ApexUserError, UnknownNameError
from apex_core.hosting.mcp_registry import GATEWAY, SERVERS, ServerSpec, ToolSummary

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("client", hosts.CLIENTS)
def test_the_committed_host_files_match_the_registry(client):
    relative, render = hosts.PROJECT_FILES[client]
    assert (REPO_ROOT / relative).read_text() == render(), f"{relative} drifted: run 'apex mcp install --client {client}'"


@pytest.mark.parametrize("client", hosts.CLIENTS)
def test_the_committed_skill_links_point_at_the_skills_tree(client):
    link = REPO_ROOT / hosts.PROJECT_SKILL_LINKS[client]
    assert link.is_symlink() and link.resolve() == (REPO_ROOT / "skills").resolve()
    assert os.readlink(link) == "../skills"  # relative, so it survives clones and moves


def _skills_tree(root: Path) -> None:
    skill = root / "skills" / "demo-skill"
    skill.mkdir(parents=True)
    skill.joinpath("SKILL.md").write_text("---\nname: demo-skill\ndescription: A demo skill. Use it in tests.\n---\nBody.\n")


def test_installing_at_project_scope_writes_each_hosts_file_and_links_the_skills(tmp_path):
    _skills_tree(tmp_path)
    for client in hosts.CLIENTS:
        hosts.install(client, root=tmp_path, python="/venv/bin/python")
    assert json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["apex-grader"]["command"] == "/venv/bin/python"
    assert json.loads((tmp_path / ".cursor" / "mcp.json").read_text())["mcpServers"]["apex-grader"]["args"] == ["-m", "servers.grader"]
    codex = tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())["mcp_servers"]["apex-grader"]
    assert codex["command"] == "/venv/bin/python" and codex["tool_timeout_sec"] == SERVERS[0].tool_timeout_s
    for link in (".claude/skills", ".agents/skills"):
        assert (tmp_path / link).is_symlink() and (tmp_path / link).resolve() == (tmp_path / "skills").resolve()
    again = hosts.install("claude", root=tmp_path, python="/venv/bin/python")  # a second run changes nothing
    assert [c.action for c in again] == ["unchanged", "unchanged"]


def test_a_project_install_without_the_venv_says_how_to_get_one(tmp_path):
    _skills_tree(tmp_path)
    changes = hosts.install("claude", root=tmp_path)
    assert ".venv/bin/python does not exist" in changes[0].note


def test_a_real_directory_where_a_skill_link_goes_is_left_alone(tmp_path):
    _skills_tree(tmp_path)
    (tmp_path / ".claude" / "skills").mkdir(parents=True)
    changes = hosts.install("claude", root=tmp_path, python="/py")
    assert changes[1].action == "kept" and not (tmp_path / ".claude" / "skills").is_symlink()


def test_registered_servers_appear_in_all_three_formats(monkeypatch):
    server = ServerSpec(name="apex-grader", module="servers.grader", description="d", env={"APEX_X": "1"},
                        pass_env=("CUDA_VISIBLE_DEVICES",),
                        tools=(ToolSummary(name="grade_solution", when_to_use="grade one solution", timeout_s=900),))
    monkeypatch.setattr(hosts, "SERVERS", (server,))
    claude = json.loads(hosts.render_claude("/py"))["mcpServers"]["apex-grader"]
    assert claude == {"type": "stdio", "command": "/py", "args": ["-m", "servers.grader"], "env": {"APEX_X": "1"}}
    assert json.loads(hosts.render_cursor("/py"))["mcpServers"]["apex-grader"]["command"] == "/py"
    codex = tomllib.loads(hosts.render_codex("/py"))["mcp_servers"]["apex-grader"]
    assert codex["tool_timeout_sec"] == 900 and codex["env"] == {"APEX_X": "1"}
    assert codex["env_vars"] == ["CUDA_VISIBLE_DEVICES"] and codex["startup_timeout_sec"] == 30


def test_the_gateway_replaces_the_per_server_entries():
    claude = json.loads(hosts.render_claude(gateway=True))["mcpServers"]
    assert list(claude) == [GATEWAY.name] and claude[GATEWAY.name]["args"] == ["-m", "servers.gateway"]


def test_an_unknown_client_or_scope_is_refused():
    with pytest.raises(UnknownNameError, match="agent client"):
        hosts.install("vscode")
    with pytest.raises(UnknownNameError, match="scope"):
        hosts.install("claude", scope="global")


# --- user scope ----------------------------------------------------------------------------------

def _user_env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home")}


def test_user_scope_keeps_the_users_other_claude_settings_and_servers(tmp_path):
    _skills_tree(tmp_path)
    env = _user_env(tmp_path)
    config = tmp_path / "home" / ".claude.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"theme": "dark", "mcpServers": {"theirs": {"command": "x"}, "apex": {"command": "old"}}}))
    config.chmod(0o600)
    hosts.install("claude", root=tmp_path, python="/abs/venv/bin/python", scope="user", environ=env)
    data = json.loads(config.read_text())
    assert data["theme"] == "dark" and data["mcpServers"]["theirs"] == {"command": "x"}
    assert "apex" not in data["mcpServers"]  # a gateway entry from an earlier install is replaced, not duplicated
    assert data["mcpServers"]["apex-grader"]["command"] == "/abs/venv/bin/python"
    assert config.stat().st_mode & 0o777 == 0o600
    link = tmp_path / "home" / ".claude" / "skills" / "demo-skill"
    assert link.is_symlink() and link.resolve() == (tmp_path / "skills" / "demo-skill").resolve()

    hosts.uninstall("claude", root=tmp_path, environ=env)
    data = json.loads(config.read_text())
    assert data["mcpServers"] == {"theirs": {"command": "x"}} and data["theme"] == "dark" and not link.exists()


def test_user_scope_edits_only_apexs_tables_in_codex_config(tmp_path):
    _skills_tree(tmp_path)
    env = {**_user_env(tmp_path), "CODEX_HOME": str(tmp_path / "codex")}
    config = tmp_path / "codex" / "config.toml"
    config.parent.mkdir(parents=True)
    original = (
        'model = "o3"\n\n[mcp_servers.theirs]\ncommand = "x"\n\n'
        '[mcp_servers."apex-grader"]\ncommand = "stale"\n[mcp_servers."apex-grader".env]\nOLD = "1"\n\n'
        '[projects."/somewhere"]\ntrust_level = "trusted"\n'
    )
    config.write_text(original)
    hosts.install("codex", root=tmp_path, python="/abs/python", scope="user", environ=env)
    data = tomllib.loads(config.read_text())
    assert data["model"] == "o3" and data["mcp_servers"]["theirs"] == {"command": "x"}
    assert data["projects"] == {"/somewhere": {"trust_level": "trusted"}}
    assert data["mcp_servers"]["apex-grader"]["command"] == "/abs/python" and "env" not in data["mcp_servers"]["apex-grader"]
    assert (tmp_path / "home" / ".agents" / "skills" / "demo-skill").is_symlink()
    first = config.read_text()
    hosts.install("codex", root=tmp_path, python="/abs/python", scope="user", environ=env)
    assert config.read_text() == first  # idempotent
    hosts.uninstall("codex", root=tmp_path, environ=env)
    data = tomllib.loads(config.read_text())
    assert set(data["mcp_servers"]) == {"theirs"} and data["model"] == "o3"


def test_a_codex_config_apex_cannot_edit_safely_is_refused_untouched(tmp_path):
    config = tmp_path / "config.toml"
    inline = 'mcp_servers = { "apex-grader" = { command = "x" } }\n'
    with pytest.raises(ApexUserError, match="cannot update"):
        hosts.merge_codex_config(inline, hosts.render_codex("/py"), config)
    with pytest.raises(ApexUserError, match="not valid TOML"):
        hosts.merge_codex_config("model = \n", hosts.render_codex("/py"), config)


def test_a_user_config_apex_creates_is_private(tmp_path):
    _skills_tree(tmp_path)
    env = {**_user_env(tmp_path), "CODEX_HOME": str(tmp_path / "codex")}
    for client in hosts.CLIENTS:
        hosts.install(client, root=tmp_path, python="/py", scope="user", environ=env)
        assert hosts.user_config_path(client, environ=env).stat().st_mode & 0o777 == 0o600, client


def test_a_broken_json_config_is_a_one_line_error(tmp_path):
    (tmp_path / "home" / ".cursor").mkdir(parents=True)
    (tmp_path / "home" / ".cursor" / "mcp.json").write_text("{not json")
    with pytest.raises(ApexUserError, match="not valid JSON"):
        hosts.install("cursor", root=tmp_path, python="/py", scope="user", environ=_user_env(tmp_path))


def test_user_locations_follow_the_hosts_environment_variables(tmp_path):
    env = {"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c", "CODEX_HOME": "/x"}
    assert hosts.user_config_path("claude", environ=env) == Path("/c/.claude.json")
    assert hosts.user_skills_dir("claude", environ=env) == Path("/c/skills")
    assert hosts.user_config_path("codex", environ=env) == Path("/x/config.toml")
    assert hosts.user_config_path("cursor", environ=env) == Path("/h/.cursor/mcp.json")
    assert hosts.user_skills_dir("cursor", environ=env) == hosts.user_skills_dir("codex", environ=env) == Path("/h/.agents/skills")


def test_claude_codes_mcp_timeouts_come_from_the_registry_unless_the_user_set_them():
    from apex_core.hosting.hosts import AGENT_SERVERS, CLAUDE_STARTUP_CAP_S, claude_timeouts
    from apex_core.hosting.mcp_registry import SERVERS

    servers = [s for s in SERVERS if s.name in AGENT_SERVERS]
    given = claude_timeouts(environ={})
    assert given == {"MCP_TIMEOUT": str(min(max(s.startup_timeout_s for s in servers), CLAUDE_STARTUP_CAP_S) * 1000),
                     "MCP_TOOL_TIMEOUT": str(max(s.tool_timeout_s for s in servers) * 1000)}
    assert int(given["MCP_TOOL_TIMEOUT"]) >= 1_800_000  # a grading may take its whole 30 minutes
    assert claude_timeouts(environ={"MCP_TOOL_TIMEOUT": "5000"}) == {"MCP_TIMEOUT": given["MCP_TIMEOUT"]}

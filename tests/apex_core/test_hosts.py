import json
import os
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

import pytest

from apex_core import hosts
from apex_core.errors import UnknownNameError
from apex_core.mcp_registry import ServerSpec, ToolSummary

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("client", hosts.CLIENTS)
def test_the_committed_host_files_match_the_registry(client):
    relative, render = hosts.PROJECT_FILES[client]
    assert (REPO_ROOT / relative).read_text() == render()


def test_installing_writes_each_hosts_file_and_links_the_skills(tmp_path):
    (tmp_path / "skills").mkdir()
    for client in hosts.CLIENTS:
        hosts.install(client, root=tmp_path, python="/venv/bin/python")
    assert json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["apex-grader"]["command"] == "/venv/bin/python"
    assert json.loads((tmp_path / ".cursor" / "mcp.json").read_text())["mcpServers"]["apex-grader"]["args"] == ["-m", "servers.grader"]
    assert (tmp_path / ".codex" / "config.toml").is_file()
    for link in (".claude/skills", ".agents/skills"):
        assert (tmp_path / link).is_symlink() and (tmp_path / link).resolve() == (tmp_path / "skills").resolve()
    hosts.install("claude", root=tmp_path)  # a second run changes nothing
    assert os.readlink(tmp_path / ".claude" / "skills") == "../skills"


def test_registered_servers_appear_in_all_three_formats(monkeypatch):
    server = ServerSpec(name="apex-grader", module="servers.grader", description="d",
                        tools=(ToolSummary(name="grade_solution", when_to_use="w"),), env={"APEX_X": "1"}, tool_timeout_s=900)
    monkeypatch.setattr(hosts, "SERVERS", (server,))
    claude = json.loads(hosts.render_claude("/py"))["mcpServers"]["apex-grader"]
    assert claude == {"type": "stdio", "command": "/py", "args": ["-m", "servers.grader"], "env": {"APEX_X": "1"}}
    assert json.loads(hosts.render_cursor("/py"))["mcpServers"]["apex-grader"]["command"] == "/py"
    codex = tomllib.loads(hosts.render_codex("/py"))["mcp_servers"]["apex-grader"]
    assert codex["tool_timeout_sec"] == 900 and codex["env"] == {"APEX_X": "1"}


def test_an_unknown_client_is_refused():
    with pytest.raises(UnknownNameError, match="agent client"):
        hosts.install("vscode")

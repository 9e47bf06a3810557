"""The Cursor configuration reader of the conformance tests expands variables as Cursor documents."""

import importlib.util
import json
from pathlib import Path

import pytest

from apex_core.errors import ApexUserError

_spec = importlib.util.spec_from_file_location("cursor_config", Path(__file__).parent / "cursor_config.py")
assert _spec is not None and _spec.loader is not None
cursor_config = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cursor_config)
load_cursor_config = cursor_config.load_cursor_config


def test_cursor_variables_expand_as_cursor_documents_them(tmp_path):
    config = tmp_path / "mcp.json"
    (tmp_path / "vars.env").write_text("# comment\nexport FROM_FILE='yes'\n")
    config.write_text(json.dumps({"mcpServers": {
        "local": {"command": "${workspaceFolder}/.venv/bin/python", "args": ["${userHome}${/}x", "${workspaceFolderBasename}"],
                  "env": {"TOKEN": "${env:MY_TOKEN}", "SEP": "${pathSeparator}"}, "envFile": "${workspaceFolder}/vars.env"},
        "remote": {"url": "http://${env:HOST_NAME}:8000/mcp", "headers": {"Authorization": "Bearer ${env:MY_TOKEN}"}},
    }}))
    specs = {s.name: s for s in load_cursor_config(config, tmp_path, {"HOME": "/home/u", "MY_TOKEN": "t", "HOST_NAME": "gpu1"})}
    local = specs["local"]
    assert local.command == f"{tmp_path}/.venv/bin/python" and local.args == ["/home/u/x", tmp_path.name]
    assert local.env == {"FROM_FILE": "yes", "TOKEN": "t", "SEP": "/"} and local.cwd == tmp_path
    assert specs["remote"].url == "http://gpu1:8000/mcp" and specs["remote"].headers == {"Authorization": "Bearer t"}


def test_a_variable_cursor_does_not_know_is_an_error(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"x": {"command": "${workspaceRoot}/python"}}}))
    with pytest.raises(ApexUserError, match="not a variable Cursor expands"):
        load_cursor_config(config, tmp_path, {})

"""Cursor's MCP configuration read the way Cursor documents it: test support for the conformance
tests, since Cursor's CLI cannot run here. It expands Cursor's variable forms (``${workspaceFolder}``
and friends) and yields how Cursor would start each server, so that the tests can start them the
same way and talk to them with a real MCP client.
"""

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel

from apex_core.errors import ApexUserError


class LaunchSpec(BaseModel):
    """How a host would start one server: a process for stdio, or a URL."""

    name: str
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: Path | None = None
    url: str | None = None
    headers: dict[str, str] = {}


_CURSOR_VARIABLE = re.compile(r"\$\{([^}]*)\}")


def _cursor_expand(value: str, workspace: Path, environ: Mapping[str, str], where: str) -> str:
    """Cursor's documented interpolation: ``${env:NAME}``, ``${userHome}``, ``${workspaceFolder}``,
    ``${workspaceFolderBasename}``, ``${pathSeparator}`` and ``${/}``. Anything else is an error
    here (Cursor would pass it through literally and the server would fail to start)."""

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith("env:"):
            return environ.get(name[4:], "")
        fixed = {
            "userHome": environ.get("HOME", str(Path.home())),
            "workspaceFolder": str(workspace),
            "workspaceFolderBasename": workspace.name,
            "pathSeparator": os.sep,
            "/": os.sep,
        }
        if name not in fixed:
            raise ApexUserError(f"{where}: ${{{name}}} is not a variable Cursor expands (env:NAME, userHome, workspaceFolder, ...)")
        return fixed[name]

    return _CURSOR_VARIABLE.sub(substitute, value)


def _read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        values[key.strip()] = value.strip().strip("'\"")
    return values


def load_cursor_config(path: Path, workspace: Path, environ: Mapping[str, str] | None = None) -> list[LaunchSpec]:
    """The servers of a Cursor ``mcp.json`` with every variable expanded, as Cursor would start
    them: stdio servers in the workspace folder with the file's ``env`` (and ``envFile``) on top
    of the environment, remote servers by ``url``."""
    env = dict(os.environ if environ is None else environ)
    data = json.loads(path.read_text(encoding="utf-8"))
    servers = data.get("mcpServers")
    if not isinstance(servers, dict):
        raise ApexUserError(f"{path} has no 'mcpServers' object")
    specs = []
    for name, entry in servers.items():
        where = f"{path}: server {name!r}"
        if not isinstance(entry, dict):
            raise ApexUserError(f"{where} is not an object")
        expand = lambda value: _cursor_expand(str(value), workspace, env, where)  # noqa: E731
        if "url" in entry:
            specs.append(LaunchSpec(name=name, url=expand(entry["url"]),
                                    headers={k: expand(v) for k, v in dict(entry.get("headers") or {}).items()}))
            continue
        if "command" not in entry:
            raise ApexUserError(f"{where} has neither 'command' nor 'url'")
        server_env: dict[str, str] = {}
        if entry.get("envFile"):
            server_env.update(_read_env_file(Path(expand(entry["envFile"]))))
        server_env.update({k: expand(v) for k, v in dict(entry.get("env") or {}).items()})
        specs.append(LaunchSpec(name=name, command=expand(entry["command"]), args=[expand(a) for a in entry.get("args") or []],
                                env=server_env, cwd=workspace))
    return specs

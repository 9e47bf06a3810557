"""Wiring agent hosts (Claude Code, Codex, Cursor) to Apex from the server registry.

Each host has its own file format for MCP servers and its own place to look for skills; all of
them are generated from ``mcp_registry`` and the one ``skills/`` tree, never edited by hand.

Two scopes:

- **project** writes the files committed in this repository (``.mcp.json``, ``.cursor/mcp.json``,
  ``.codex/config.toml``) with the portable interpreter path ``.venv/bin/python`` (Cursor:
  ``${workspaceFolder}/.venv/bin/python``), and links ``skills/`` where each host looks. Hosts
  start project servers from the project root, so the files work in every clone set up with
  ``setup.sh``; a test fails when they drift from the registry.
- **user** registers the servers in the user's own host configuration (``~/.claude.json``,
  ``~/.codex/config.toml``, ``~/.cursor/mcp.json``) with the absolute interpreter of the running
  environment, so Apex's tools work from any directory, and links each skill into the user's
  skill folders. Only Apex's own entries are touched; everything else in those files is kept.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from apex_core.errors import ApexUserError, UnknownNameError
from apex_core.hosting.mcp_registry import GATEWAY, SERVERS, ServerSpec, all_servers
from apex_core.storage import atomic_write_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ("claude", "codex", "cursor")
SCOPES = ("project", "user")
Client = Literal["claude", "codex", "cursor"]
Scope = Literal["project", "user"]

PROJECT_PYTHON = ".venv/bin/python"
"""Project files name the interpreter relative to the project root, where the hosts start servers,
so the committed files work in any clone; Cursor expands its workspace variable instead."""
CURSOR_PYTHON = "${workspaceFolder}/.venv/bin/python"

PROJECT_SKILL_LINKS: dict[str, str] = {"claude": ".claude/skills", "codex": ".agents/skills", "cursor": ".agents/skills"}
"""Where each host looks for project skills. Cursor documents both ``.agents/skills`` and
``.cursor/skills`` (and also reads ``.claude/skills``); linking one of them avoids listing every
skill three times there."""

CODEX_MARKER = "# Apex MCP servers (apex mcp install --client codex); regenerate rather than edit."


def _stdio_entry(server: ServerSpec, python: str) -> dict[str, object]:
    return {"command": python, "args": ["-m", server.module], "env": dict(server.env)}


def _selected(gateway: bool) -> tuple[ServerSpec, ...]:
    return (GATEWAY,) if gateway else SERVERS


def render_claude(python: str = PROJECT_PYTHON, gateway: bool = False) -> str:
    """``.mcp.json`` exactly as ``claude mcp add -s project`` writes it (plus a final newline)."""
    servers = {s.name: {"type": "stdio", **_stdio_entry(s, python)} for s in _selected(gateway)}
    return json.dumps({"mcpServers": servers}, indent=2) + "\n"


AGENT_SERVERS = ("apex-grader", "apex-source")
"""What an optimizing agent run by the pipeline is given: grading and reading source and docs, not
the servers that patch the environment or run pipelines (an agent must not start another)."""


def render_agent_config(python: str, names: tuple[str, ...] = AGENT_SERVERS) -> str:
    """An MCP config (Claude Code's and Cursor's format) with absolute paths, for an agent whose
    working directory is its task's workspace rather than the repository."""
    servers = {s.name: {"type": "stdio", **_stdio_entry(s, python)} for s in SERVERS if s.name in names}
    return json.dumps({"mcpServers": servers}, indent=2) + "\n"


CLAUDE_STARTUP_CAP_S = 60
"""Claude Code waits at most 60 s for an MCP server to start, whatever MCP_TIMEOUT asks
(anthropics/claude-code#16837)."""


def claude_timeouts(names: tuple[str, ...] = AGENT_SERVERS, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Claude Code's MCP timeouts (``MCP_TIMEOUT``: a server's start, ``MCP_TOOL_TIMEOUT``: one tool
    call, both in ms) for these servers, as the registry declares them, where the user has not set
    them. Claude Code has one of each for every server, so the longest counts. Without them a
    grading longer than its default, or a server slow to import on a loaded machine, reads to the
    agent as a tool with no result."""
    servers = [s for s in SERVERS if s.name in names]
    environ = os.environ if environ is None else environ
    wanted = {"MCP_TIMEOUT": min(max(s.startup_timeout_s for s in servers), CLAUDE_STARTUP_CAP_S) * 1000,
              "MCP_TOOL_TIMEOUT": max(s.tool_timeout_s for s in servers) * 1000}
    return {name: str(value) for name, value in wanted.items() if not environ.get(name)}


def render_cursor(python: str = CURSOR_PYTHON, gateway: bool = False) -> str:
    servers = {s.name: _stdio_entry(s, python) for s in _selected(gateway)}
    return json.dumps({"mcpServers": servers}, indent=2) + "\n"


def _toml_string(value: str) -> str:
    return json.dumps(value)  # JSON string escapes are valid TOML basic strings


def _toml_key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _toml_string(name)


def render_codex(python: str = PROJECT_PYTHON, gateway: bool = False) -> str:
    """``[mcp_servers.*]`` tables with the longest tool's timeout (Codex cuts calls at 60 s by
    default) and the environment variables the server reads passed through (Codex passes only
    an allow-list otherwise)."""
    lines = [CODEX_MARKER]
    for server in _selected(gateway):
        key = f"mcp_servers.{_toml_key(server.name)}"
        lines += [
            "",
            f"[{key}]",
            f"command = {_toml_string(python)}",
            f"args = [{', '.join(_toml_string(a) for a in ['-m', server.module])}]",
            f"startup_timeout_sec = {server.startup_timeout_s}",
            f"tool_timeout_sec = {server.tool_timeout_s}",
        ]
        if server.pass_env:
            lines.append(f"env_vars = [{', '.join(_toml_string(v) for v in server.pass_env)}]")
        if server.env:
            lines.append(f"[{key}.env]")
            lines += [f"{_toml_key(k)} = {_toml_string(v)}" for k, v in server.env.items()]
    return "\n".join(lines) + "\n"


PROJECT_FILES: dict[str, tuple[str, Callable[..., str]]] = {
    "claude": (".mcp.json", render_claude),
    "cursor": (".cursor/mcp.json", render_cursor),
    "codex": (".codex/config.toml", render_codex),
}


class Change(BaseModel):
    """One file or link ``install``/``uninstall`` looked at, and what it did there."""

    client: str
    path: Path
    action: Literal["written", "unchanged", "linked", "removed", "kept"]
    note: str = ""


# --- small file helpers --------------------------------------------------------------------------

def _write_if_changed(path: Path, content: str, client: str, note: str = "", new_mode: int = 0o644) -> Change:
    """Write atomically, keeping an existing file's permissions (a new file gets ``new_mode``)."""
    if path.is_file() and path.read_text(encoding="utf-8") == content:
        return Change(client=client, path=path, action="unchanged", note=note)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else new_mode
    # Atomic replace: a host reading its config concurrently sees the old file or the new one.
    atomic_write_text(path, content, mode=mode)
    return Change(client=client, path=path, action="written", note=note)


def _remove_if_empty(path: Path, client: str) -> Change:
    """Remove a host's config file that held nothing but Apex's entries (install made it): an empty
    file left behind is clutter at best, and a host may read an empty file as a broken one."""
    path.unlink()
    return Change(client=client, path=path, action="removed", note="it held only Apex's entries")


def _link(link: Path, target: Path, client: str, relative: bool) -> Change:
    """A symlink to ``target``; an existing real file or directory is the user's and is kept."""
    wanted = os.path.relpath(target, link.parent) if relative else str(target)
    if link.is_symlink() and os.readlink(link) == wanted:
        return Change(client=client, path=link, action="unchanged")
    if link.exists() and not link.is_symlink():
        return Change(client=client, path=link, action="kept", note="a real file or directory is there; not replaced")
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        link.unlink()
    link.symlink_to(wanted, target_is_directory=True)
    return Change(client=client, path=link, action="linked", note=f"-> {wanted}")


def _load_json_config(path: Path) -> dict[str, object]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except json.JSONDecodeError as error:
        raise ApexUserError(f"{path} is not valid JSON ({error.msg}, line {error.lineno}); fix or move it, then run again") from None
    if not isinstance(data, dict):
        raise ApexUserError(f"{path} does not hold a JSON object; fix or move it, then run again")
    return data


# --- user-level locations ------------------------------------------------------------------------

def user_config_path(client: str, home: Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """Where a host keeps user-scope MCP servers (``CLAUDE_CONFIG_DIR`` and ``CODEX_HOME`` respected)."""
    env = os.environ if environ is None else environ
    home = Path(home or env.get("HOME") or Path.home())
    if client == "claude":
        return Path(env["CLAUDE_CONFIG_DIR"]) / ".claude.json" if env.get("CLAUDE_CONFIG_DIR") else home / ".claude.json"
    if client == "codex":
        return Path(env.get("CODEX_HOME") or home / ".codex") / "config.toml"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    raise UnknownNameError("agent client", client, CLIENTS)


def user_skills_dir(client: str, home: Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """Claude Code reads ``~/.claude/skills``; Codex and Cursor both read ``~/.agents/skills``."""
    env = os.environ if environ is None else environ
    home = Path(home or env.get("HOME") or Path.home())
    if client == "claude":
        return Path(env["CLAUDE_CONFIG_DIR"]) / "skills" if env.get("CLAUDE_CONFIG_DIR") else home / ".claude" / "skills"
    if client in ("codex", "cursor"):
        return home / ".agents" / "skills"
    raise UnknownNameError("agent client", client, CLIENTS)


def default_python() -> str:
    """The running interpreter, absolute but not resolved: resolving a venv's symlink would leave the venv."""
    return os.path.abspath(sys.executable)


# --- codex TOML, edited only where Apex's tables are --------------------------------------------

def _is_header(line: str) -> bool:
    return line.lstrip().startswith("[")


def _owned_header(line: str, names: set[str]) -> bool:
    match = re.match(r"\s*\[\s*mcp_servers\s*\.\s*(\"([^\"]+)\"|'([^']+)'|([A-Za-z0-9_-]+))\s*[.\]]", line)
    return bool(match) and (match.group(2) or match.group(3) or match.group(4)) in names


def _strip_codex_tables(text: str, names: set[str]) -> str:
    kept: list[str] = []
    skipping = False
    for line in text.splitlines():
        if line.strip() == CODEX_MARKER:
            continue
        if _is_header(line):
            skipping = _owned_header(line, names)
        if not skipping:
            kept.append(line)
    return "\n".join(kept).rstrip() + ("\n" if kept and any(k.strip() for k in kept) else "")


def merge_codex_config(existing: str, block: str | None, path: Path) -> str:
    """``existing`` with Apex's ``[mcp_servers.*]`` tables replaced by ``block`` (or removed when
    ``block`` is None). Refuses, rather than guesses, when the result would not parse or would
    change anything that is not Apex's."""
    names = {server.name for server in all_servers()}
    try:
        before = tomllib.loads(existing)
    except tomllib.TOMLDecodeError as error:
        raise ApexUserError(f"{path} is not valid TOML ({error}); fix it, then run again") from None
    stripped = _strip_codex_tables(existing, names)
    merged = stripped if block is None else (stripped + ("\n" if stripped else "") + block)
    try:
        after = tomllib.loads(merged)
    except tomllib.TOMLDecodeError as error:  # pragma: no cover - a layout the line editor misread
        raise ApexUserError(f"cannot update {path} safely ({error}); edit Apex's [mcp_servers.*] tables by hand") from None

    def others(data: dict[str, object]) -> dict[str, object]:
        servers = {k: v for k, v in dict(data.get("mcp_servers", {})).items() if k not in names}  # type: ignore[call-overload]
        return {**{k: v for k, v in data.items() if k != "mcp_servers"}, "mcp_servers": servers}

    ours = tomllib.loads(block)["mcp_servers"] if block else {}
    if others(after) != others(before) or {k: v for k, v in after.get("mcp_servers", {}).items() if k in names} != ours:
        raise ApexUserError(
            f"cannot update {path} without touching other settings (Apex's servers are defined there in a form "
            "this editor does not rewrite); remove their [mcp_servers.*] entries by hand and run again"
        )
    return merged


# --- install / uninstall -------------------------------------------------------------------------

def _check(client: str, scope: str) -> None:
    if client not in CLIENTS:
        raise UnknownNameError("agent client", client, CLIENTS)
    if scope not in SCOPES:
        raise UnknownNameError("scope", scope, SCOPES)


def install(
    client: str,
    root: Path = PROJECT_ROOT,
    python: str | None = None,
    *,
    scope: str = "project",
    gateway: bool = False,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Change]:
    """Write (or check) one host's MCP configuration and skill links; returns what was done where."""
    _check(client, scope)
    if scope == "project":
        return _install_project(client, root, python, gateway)
    return _install_user(client, root, python or default_python(), gateway, home, environ)


def _install_project(client: str, root: Path, python: str | None, gateway: bool) -> list[Change]:
    relative, render = PROJECT_FILES[client]
    content = render(python, gateway=gateway) if python else render(gateway=gateway)
    notes = []
    if python is None and not (root / PROJECT_PYTHON).exists():
        notes.append(f"{PROJECT_PYTHON} does not exist here yet: run setup.sh, or install with --scope user")
    if client == "codex":
        notes.append(f"Codex reads it only for trusted projects: trust {root} when Codex asks, or add "
                     f'[projects."{root}"] trust_level = "trusted" to {user_config_path("codex")}')
    return [
        _write_if_changed(root / relative, content, client, "; ".join(notes)),
        _link(root / PROJECT_SKILL_LINKS[client], root / "skills", client, relative=True),
    ]


def _install_user(client: str, root: Path, python: str, gateway: bool, home: Path | None,
                  environ: Mapping[str, str] | None) -> list[Change]:
    path = user_config_path(client, home, environ)
    selected = _selected(gateway)
    if client == "codex":
        existing = path.read_text(encoding="utf-8") if path.exists() else ""
        changes = [_write_if_changed(path, merge_codex_config(existing, render_codex(python, gateway=gateway), path), client,
                                     new_mode=0o600)]
    else:
        data = _load_json_config(path)
        servers = {k: v for k, v in dict(data.get("mcpServers") or {}).items() if k not in {s.name for s in all_servers()}}
        for server in selected:
            entry = _stdio_entry(server, python)
            servers[server.name] = {"type": "stdio", **entry} if client == "claude" else entry
        data["mcpServers"] = servers
        # The hosts keep private state in these files (Claude Code's is mode 600): a new one starts private.
        changes = [_write_if_changed(path, json.dumps(data, indent=2) + "\n", client, new_mode=0o600)]
    from apex_core.hosting.skills import discover_skills

    skills_dir = user_skills_dir(client, home, environ)
    for skill in discover_skills(root / "skills"):
        changes.append(_link(skills_dir / skill.name, skill.path.parent.resolve(), client, relative=False))
    return changes


def uninstall(client: str, root: Path = PROJECT_ROOT, *, scope: str = "user", home: Path | None = None,
              environ: Mapping[str, str] | None = None) -> list[Change]:
    """Remove Apex's entries and skill links from a host's user configuration (other entries stay).
    Project files are part of the repository and are not removed."""
    _check(client, scope)
    if scope == "project":
        raise ApexUserError("project files are committed with the repository; uninstall applies to --scope user")
    path = user_config_path(client, home, environ)
    names = {s.name for s in all_servers()}
    changes: list[Change] = []
    if path.exists():
        if client == "codex":
            text = path.read_text(encoding="utf-8")
            left = merge_codex_config(text, None, path)
            changes.append(_remove_if_empty(path, client) if not left.strip() else _write_if_changed(path, left, client))
        else:
            data = _load_json_config(path)
            servers = dict(data.get("mcpServers") or {})
            if names & set(servers):
                data["mcpServers"] = {k: v for k, v in servers.items() if k not in names}
                if not data["mcpServers"] and set(data) == {"mcpServers"}:
                    changes.append(_remove_if_empty(path, client))
                else:
                    changes.append(_write_if_changed(path, json.dumps(data, indent=2) + "\n", client))
    skills_root = (root / "skills").resolve()
    skills_dir = user_skills_dir(client, home, environ)
    if skills_dir.is_dir():
        for link in sorted(skills_dir.iterdir()):
            if link.is_symlink() and Path(os.readlink(link)).parent == skills_root:
                link.unlink()
                changes.append(Change(client=client, path=link, action="removed"))
    return changes

"""``apex mcp``: the registered MCP servers, serving them, and wiring agent hosts to them.

``list`` shows the registry; ``serve`` replaces this process with one server (stdio for hosts,
streamable HTTP for remote agents); ``install``/``uninstall`` write the hosts' configurations and
skill links; ``config`` prints one host's configuration for ``--mcp-config`` style use; ``skills``
validates the skills every host is pointed at. ``apex_core`` imports no MCP code: ``serve`` execs
``python -m servers``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from apex_core.cli.output import JsonOption, make_console
from apex_core.errors import ApexUserError

app = typer.Typer(help="Apex's MCP servers and how agent hosts (Claude Code, Codex, Cursor) reach them.",
                  no_args_is_help=True, rich_markup_mode=None)

ClientOption = Annotated[str, typer.Option("--client", help="claude, codex, cursor, all, or a comma-separated list.")]
ScopeOption = Annotated[str, typer.Option(
    "--scope", help="project: the repository's committed files (portable .venv/bin/python); "
                    "user: your own host configuration, with this environment's absolute interpreter.")]
GatewayOption = Annotated[bool, typer.Option(
    "--gateway", help="One entry for all servers (the gateway, tools prefixed by server) instead of one entry per server.")]


def _console() -> Console:
    return make_console(markup=True)


def _clients(value: str) -> tuple[str, ...]:
    from apex_core.hosting import hosts

    if value.strip() == "all":
        return hosts.CLIENTS
    names = tuple(dict.fromkeys(c.strip() for c in value.split(",") if c.strip()))
    if not names:
        raise ApexUserError("--client needs a value: claude, codex, cursor or all")
    for name in names:
        if name not in hosts.CLIENTS:
            from apex_core.errors import UnknownNameError

            raise UnknownNameError("agent client", name, (*hosts.CLIENTS, "all"))
    return names


def _scope(value: str) -> str:
    from apex_core.hosting import hosts
    from apex_core.errors import UnknownNameError

    if value not in hosts.SCOPES:
        raise UnknownNameError("scope", value, hosts.SCOPES)
    return value


@app.command("list")
def list_servers(as_json: JsonOption = False) -> None:
    """The registered MCP servers (and the gateway): module, tools, timeouts, environment."""
    from apex_core.hosting.mcp_registry import all_servers

    servers = all_servers()
    if as_json:
        sys.stdout.write(json.dumps([s.model_dump(mode="json") for s in servers], indent=2) + "\n")
        return
    table = Table(title="Apex MCP servers", title_justify="left")
    for column in ("server", "module", "tools (timeout s)", "what it does"):
        table.add_column(column, overflow="fold")
    for server in servers:
        tools = ", ".join(f"{t.name} ({t.timeout_s})" for t in server.tools)
        table.add_row(server.name, server.module, tools, server.description)
    console = _console()
    console.print(table)
    console.print("Serve one: apex mcp serve NAME [--http HOST:PORT]; wire a host: apex mcp install --client claude|codex|cursor|all")


@app.command("serve")
def serve(
    name: Annotated[str, typer.Argument(help="Server name from 'apex mcp list' (apex-grader, ...), or 'apex' for the gateway.")],
    http: Annotated[Optional[str], typer.Option(
        "--http", metavar="HOST:PORT",
        help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (127.0.0.1:8000 loopback; 0.0.0.0:8000 every interface).")] = None,
    path: Annotated[str, typer.Option(help="URL path of the HTTP endpoint.")] = "/mcp",
    max_message_bytes: Annotated[Optional[str], typer.Option(
        "--max-message-bytes", metavar="N",
        help="Refuse MCP messages larger than N bytes (64 KiB to 4 MiB; default APEX_MCP_MAX_MESSAGE_BYTES, else 4 MiB).")] = None,
) -> None:
    """Run one server: stdio by default (what hosts start), or streamable HTTP so the grader can
    run on the GPU host while the agent runs elsewhere. Every server answers each request, and
    refuses a message over the size limit with a JSON-RPC error (HTTP 413) and goes on serving."""
    from apex_core.hosting.mcp_registry import get_server
    from apex_core.hosting.net import parse_host_port

    get_server(name)
    if http is None and path != "/mcp":
        raise ApexUserError("--path applies only with --http HOST:PORT")
    argv = [sys.executable, "-m", "servers", name]
    if http is not None:
        address = parse_host_port(http)
        if not path.startswith("/"):
            raise ApexUserError(f"--path {path!r} must start with '/'")
        argv += ["--http", f"[{address.host}]:{address.port}" if ":" in address.host else f"{address.host}:{address.port}",
                 "--path", path]
        sys.stderr.write(f"apex: serving {name} at {address.url(path)}\n")
    if max_message_bytes is not None:
        argv += ["--max-message-bytes", max_message_bytes]  # checked by the server, which owns the limit
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)


def _print_changes(changes: list, root: Path) -> None:
    console = _console()
    for change in changes:
        try:
            shown = change.path.relative_to(root)
        except ValueError:
            shown = change.path
        note = f"  ({change.note})" if change.note else ""
        console.print(f"{change.client}: {change.action} {shown}{note}", markup=False, highlight=False, soft_wrap=True)


ProjectDirOption = Annotated[Optional[Path], typer.Option(
    "--project-dir", help="The Apex checkout to wire (default: the one this apex runs from).")]


@app.command("install")
def install(
    client: ClientOption,
    scope: ScopeOption = "project",
    gateway: GatewayOption = False,
    python: Annotated[Optional[str], typer.Option(help="Interpreter the hosts start servers with (default: project .venv "
                                                       "for --scope project, this interpreter for --scope user).")] = None,
    project_dir: ProjectDirOption = None,
) -> None:
    """Write or register the MCP configuration and skill links for agent hosts."""
    from apex_core.hosting import hosts

    root = (project_dir or hosts.PROJECT_ROOT).resolve()
    if not (root / "skills").is_dir():
        raise ApexUserError(f"{root} is not an Apex checkout (no skills/ folder); pass --project-dir")
    scope = _scope(scope)
    for name in _clients(client):
        _print_changes(hosts.install(name, root=root, python=python, scope=scope, gateway=gateway), root)


@app.command("uninstall")
def uninstall(client: ClientOption, project_dir: ProjectDirOption = None) -> None:
    """Remove Apex's servers and skill links from your user-level host configuration (others stay)."""
    from apex_core.hosting import hosts

    root = (project_dir or hosts.PROJECT_ROOT).resolve()
    for name in _clients(client):
        changes = hosts.uninstall(name, root=root)
        _print_changes(changes or [], root)
        if not changes:
            _console().print(f"{name}: nothing of Apex's in {hosts.user_config_path(name)}", markup=False, highlight=False)


@app.command("config")
def config(
    client: Annotated[str, typer.Option("--client", help="claude, codex or cursor.")] = "claude",
    scope: ScopeOption = "user",
    gateway: GatewayOption = False,
    python: Annotated[Optional[str], typer.Option(help="Interpreter to name (default as for install).")] = None,
) -> None:
    """Print one host's MCP configuration without writing it, e.g. for
    ``claude -p ... --mcp-config <(apex mcp config)``."""
    from apex_core.hosting import hosts

    names = _clients(client)
    if len(names) != 1:
        raise ApexUserError("--client takes one host here: claude, codex or cursor")
    name = names[0]
    scope = _scope(scope)
    _, render = hosts.PROJECT_FILES[name]
    interpreter = python or (hosts.default_python() if scope == "user" else None)
    sys.stdout.write(render(interpreter, gateway=gateway) if interpreter else render(gateway=gateway))


@app.command("skills")
def skills(as_json: JsonOption = False) -> None:
    """The skills in skills/ that hosts are pointed at, each validated (name rules, description,
    relative references); exit 1 when any is invalid."""
    from apex_core.hosting.skills import SKILLS_DIR, validate_all

    reports = validate_all(SKILLS_DIR)
    if as_json:
        sys.stdout.write(json.dumps([r.model_dump(mode="json") for r in reports], indent=2) + "\n")
    else:
        console = _console()
        for report in reports:
            status = "ok" if report.ok else "INVALID"
            console.print(f"{report.name} ({report.path.parent.name}/SKILL.md): {status}", highlight=False)
            for problem in report.problems:
                console.print(f"  - {problem}", highlight=False)
        if not reports:
            console.print(f"no skills in {SKILLS_DIR}")
    if any(not r.ok for r in reports):
        raise typer.Exit(1)

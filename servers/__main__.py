"""Run one registered server by name:
``python -m servers NAME [--http HOST:PORT] [--path /mcp] [--max-message-bytes N]``.

``apex mcp serve`` replaces its own process with this launcher, so ``apex_core`` never imports
MCP. Stdio is the default (what hosts start); ``--http`` serves streamable HTTP so the grader can
run on the GPU host while the agent runs elsewhere. Nothing here writes to stdout: on stdio it
belongs to the protocol, and errors go to stderr with exit code 2. ``--max-message-bytes`` sets
``APEX_MCP_MAX_MESSAGE_BYTES`` for the server (``servers._guard``), which is where it is read.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from apex_core.errors import ApexUserError
from apex_core.hosting.mcp_registry import get_server
from apex_core.hosting.net import parse_host_port
from servers._guard import LIMIT_ENV, checked_limit, message_limit

log = logging.getLogger("servers")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m servers", description="Run one Apex MCP server.")
    parser.add_argument("name", help="registered server name (apex mcp list), or 'apex' for the gateway")
    parser.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP here instead of stdio")
    parser.add_argument("--path", default="/mcp", help="URL path of the HTTP endpoint (default /mcp)")
    parser.add_argument("--max-message-bytes", metavar="N",
                        help=f"refuse messages larger than N bytes (default: {LIMIT_ENV}, else 4 MiB)")
    args = parser.parse_args(argv)
    try:
        spec = get_server(args.name)
        address = parse_host_port(args.http) if args.http else None
        if not args.path.startswith("/"):
            raise ApexUserError(f"--path {args.path!r} must start with '/'")
        if args.max_message_bytes is not None:
            os.environ[LIMIT_ENV] = str(checked_limit(args.max_message_bytes.strip(), "--max-message-bytes"))
        message_limit()  # a bad APEX_MCP_MAX_MESSAGE_BYTES is one line here, not a traceback once serving
    except ApexUserError as error:
        sys.stderr.write(f"python -m servers: error: {error}\n")
        raise SystemExit(2) from None
    server = importlib.import_module(spec.module).mcp
    if address is None:
        server.run(transport="stdio", show_banner=False)
        return
    if not address.loopback:
        log.warning("serving %s on %s without authentication: anyone who can reach it can run gradings",
                    spec.name, address.url(args.path))
    server.run(transport="http", host=address.host, port=address.port, path=args.path, show_banner=False)


if __name__ == "__main__":
    main()

"""The gateway: every registered Apex server mounted into one, each under its namespace.

For hosts that want a single MCP entry (or one HTTP endpoint on the GPU host): the grader's
``grade_solution`` appears here as ``grader_grade_solution``, and so on for every server in
``apex_core.hosting.mcp_registry.SERVERS``. Mounting keeps each server's own tool code, progress and
errors; nothing is re-declared here, so a server added to the registry joins the gateway as is.
"""

from __future__ import annotations

import importlib
from typing import Any

from apex_core.hosting.mcp_registry import GATEWAY, SERVERS
from servers._common import create_server

mcp = create_server(
    GATEWAY.name,
    "All Apex MCP servers behind one entry; each tool name starts with its server's namespace: "
    + "; ".join(f"{server.namespace}_* = {server.description}" for server in SERVERS),
)

for _server in SERVERS:
    mcp.mount(importlib.import_module(_server.module).mcp, namespace=_server.namespace)


def main() -> Any:
    return mcp.run()


if __name__ == "__main__":
    main()

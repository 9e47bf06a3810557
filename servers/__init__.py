"""Apex's MCP servers: thin FastMCP layers over ``apex_core``, one module per concern.

Conventions every server follows (see servers/README.md):
- build the server with ``servers._common.create_server`` (offline settings, logging to stderr, and
  the middleware that turns a user's mistake into a readable tool error while a bug in Apex stays
  a bug, for every tool);
- declare tools with typed parameters and pydantic results, and call ``apex_core`` for the work;
- never print: on stdio, stdout is the protocol; GPU work runs in child processes;
- register the server in ``apex_core/hosting/mcp_registry.py``, from which host configs are generated.
"""

"""Apex's MCP servers: thin FastMCP layers over ``apex_core``, one module per concern.

Conventions every server follows (see servers/README.md):
- build the server with ``servers._common.create_server`` (offline settings, logging to stderr);
- declare tools with typed parameters and pydantic results, and call ``apex_core`` for the work;
- wrap tool bodies with ``user_errors_as_tool_errors`` so a user's mistake reaches the model as a
  readable tool error while a bug in Apex stays a bug;
- never print: on stdio, stdout is the protocol; GPU work runs in child processes;
- register the server in ``apex_core/hosting/mcp_registry.py``, from which host configs are generated.
"""

"""How Apex is wired into MCP hosts: the one registry of our servers (``mcp_registry``), the hosts'
configuration files generated from it (``hosts``), the skills shipped to agents (``skills``), and
network addresses as users type them (``net``). It imports nothing of Apex but ``errors``, so the
prompts and the CLI can name servers, tools and skills without pulling in the grader."""

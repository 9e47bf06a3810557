"""Apex core library: hardware model, tasks, prompts, grading and the mini-evaluation.

Nothing in this package imports MCP: the servers in ``servers/`` are thin layers over it, so the
same calls serve the CLI, scripts and agents alike.
"""

__version__ = "0.1.0"

"""The environment a headless host (Claude Code, Codex) runs in against the scripted endpoint.

One place for it, because the conformance tests and the GPU prompt benchmark must start the hosts
the same way: a throw-away HOME (the user's own settings and logins never leak in), telemetry and
update checks off, MCP servers waited for, and Apex importable from this checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
HOST_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "CODEX_", "OPENAI_")
"""Variables of the caller's own host setup, dropped so that only what we set reaches the host."""


def headless_host_env(home: Path, apex_cache_dir: Path) -> dict[str, str]:
    """This process's environment for a headless host whose HOME is ``home`` (created here)."""
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    (home / ".codex").mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith(HOST_PREFIXES)}
    env.update({
        "HOME": str(home), "CODEX_HOME": str(home / ".codex"), "XDG_CONFIG_HOME": str(home / ".config"),
        "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CODEX_DISABLE_UPDATE_CHECK": "1",
        # Claude Code starts MCP servers in the background and, headless, waits only 5 s before its
        # first request; on a busy machine the grader (which imports torch) is not up by then and
        # the model would not be offered its tools. Wait for the servers, and allow a slow start.
        "MCP_CONNECTION_NONBLOCKING": "0", "MCP_CONNECT_TIMEOUT_MS": "120000", "MCP_TIMEOUT": "120000",
        "APEX_CACHE_DIR": str(apex_cache_dir),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])),
    })
    return env

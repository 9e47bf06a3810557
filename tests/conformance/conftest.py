"""The real agent clients, installed from the npm registry once per machine, for conformance tests.

Claude Code, Codex and the MCP Inspector are installed with npm into a cache folder keyed by their
pinned versions (reused by every test of a session, and by later sessions while the folder
exists), always with a throw-away HOME so no user configuration is read or written. The pins are
versions verified to work with Node 18+ (Debian's nodejs) and their documented flags; override
them with APEX_TEST_CLAUDE_CODE, APEX_TEST_CODEX and APEX_TEST_MCP_INSPECTOR (an npm version
spec) and the folder with APEX_TEST_NPM_DIR.

Where npm is missing and the tests run as root with apt-get available (CI's fresh Debian image),
Debian's nodejs and npm are installed first; set APEX_TEST_NO_APT=1 to forbid that. Tests that
need a client skip, naming the reason, only when it cannot be installed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripted_model.clients import headless_host_env

REPO_ROOT = Path(__file__).resolve().parents[2]

PINS = {
    "claude": ("@anthropic-ai/claude-code", os.environ.get("APEX_TEST_CLAUDE_CODE", "2.1.197"), "claude"),
    "codex": ("@openai/codex", os.environ.get("APEX_TEST_CODEX", "0.171.0"), "codex"),
    "inspector": ("@modelcontextprotocol/inspector", os.environ.get("APEX_TEST_MCP_INSPECTOR", "0.15.0"), "mcp-inspector"),
}


@dataclass
class NpmClients:
    root: Path | None
    problem: str = ""

    def bin(self, name: str) -> str:
        if self.root is None:
            pytest.skip(f"the {name} client cannot be installed here: {self.problem}")
        path = self.root / "node_modules" / ".bin" / PINS[name][2]
        if not path.exists():
            pytest.skip(f"{PINS[name][0]} did not install: {self.problem or 'its binary is missing'}")
        return str(path)

    def version(self, name: str) -> str:
        if self.root is None:
            return "not installed"
        package = self.root / "node_modules" / PINS[name][0] / "package.json"
        return json.loads(package.read_text())["version"] if package.exists() else "not installed"


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)


def _install(npm: str, root: Path) -> None:
    specs = [f"{package}@{version}" for package, version, _ in PINS.values()]
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "npm_config_cache": str(root / "npm-cache"),
           "npm_config_update_notifier": "false", "npm_config_fund": "false", "npm_config_audit": "false"}
    done = _run([npm, "install", "--no-save", "--prefix", str(root), *specs], 1500, env)
    if done.returncode != 0:
        raise RuntimeError(f"npm install {' '.join(specs)} failed: {done.stderr[-600:]}")


@pytest.fixture(scope="session")
def npm_clients(debian_binary) -> NpmClients:
    digest = hashlib.sha256(json.dumps(sorted(PINS.items())).encode()).hexdigest()[:12]
    base = Path(os.environ.get("APEX_TEST_NPM_DIR") or Path(tempfile.gettempdir()) / f"apex-npm-clients-{os.getuid()}")
    root = base / digest
    root.mkdir(parents=True, exist_ok=True)
    marker = root / "installed.json"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer at a time, even across sessions
        try:
            if not marker.exists():
                _install(debian_binary("npm", ["nodejs", "npm"], "conformance"), root)
                marker.write_text(json.dumps({name: pin[1] for name, pin in PINS.items()}))
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as error:
            return NpmClients(root=None, problem=str(error))
    clients = NpmClients(root=root)
    sys.stderr.write("conformance clients: " + ", ".join(f"{PINS[n][0]} {clients.version(n)}" for n in PINS) + "\n")
    return clients


@pytest.fixture
def client_env(tmp_path: Path) -> dict[str, str]:
    """A throw-away HOME (and CODEX_HOME) with telemetry and update checks off."""
    return headless_host_env(tmp_path / "home", tmp_path / "apex-cache")


def run_client(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture
def run() -> object:
    return run_client

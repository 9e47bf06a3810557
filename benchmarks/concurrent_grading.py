"""Many gradings at once through the grader's MCP server, over streamable HTTP and over stdio.

Run: ``.venv/bin/python benchmarks/concurrent_grading.py [--task cpu-mini__rms_norm] [--per-kind 2]``

It starts the server as a user would (``apex mcp serve apex-grader --http HOST:PORT`` and the
stdio command of ``.mcp.json``), sends honest, wrong and tampering solutions at once over both
transports, and checks every verdict against the one the same file gets when graded alone. It
prints each grading's outcome and the server's throughput under that load (gradings per minute).
The CI test ``tests/servers/test_concurrent_gradings.py`` sends the same load (2 files per kind).
Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
HONEST = (REPO_ROOT / "apex_core" / "agents" / "canned" / "cpu-mini__rms_norm.py").read_text()
WRONG = "import numpy as np\n\ndef rms_norm(x, weight, eps):\n    return (x * weight).astype(np.float32)\n"
TAMPERING = HONEST + "\nimport __main__  # reaching the harness is tampering whatever the outputs\n"
KINDS = {"honest": HONEST, "wrong": WRONG, "tampering": TAMPERING}
EXPECTED = {"honest": "ok", "wrong": "wrong_answer", "tampering": "tampering"}
"""What each kind gets when graded alone (the test confirms it sequentially as well)."""


@dataclass
class Verdict:
    transport: str
    kind: str
    path: str
    outcome: str
    reason: str
    speedup: float | None
    seconds: float
    error: str = ""


def write_solutions(folder: Path, per_kind: int) -> list[tuple[str, Path]]:
    """``per_kind`` files of each kind, each a distinct file (its own name and content hash)."""
    jobs = []
    for kind, body in KINDS.items():
        for number in range(per_kind):
            path = folder / f"{kind}_{number}.py"
            path.write_text(body + f"\n# copy {number}\n")
            jobs.append((kind, path))
    return jobs


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_env(cache: Path) -> dict[str, str]:
    env = {**os.environ, "APEX_CACHE_DIR": str(cache)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def start_http_server(port: int, cache: Path, log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "apex_core.cli.main", "mcp", "serve", "apex-grader", "--http", f"127.0.0.1:{port}"]
    with open(log, "wb") as out:
        return subprocess.Popen(command, cwd=REPO_ROOT, env=server_env(cache), stdout=out, stderr=subprocess.STDOUT)


async def wait_for_port(port: int, process: subprocess.Popen, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the HTTP server exited with code {process.returncode} before it listened")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise RuntimeError(f"the HTTP server did not listen on port {port} within {limit_s:g} s")


async def grade_all(client, transport: str, task: str, jobs: list[tuple[str, Path]]) -> list[Verdict]:
    """Every job at once on one client session."""

    async def one(kind: str, path: Path) -> Verdict:
        started = time.monotonic()
        result = await client.call_tool(
            "grade_solution", {"task_id": task, "solution_path": str(path), "use_cache": False}, raise_on_error=False
        )
        seconds = time.monotonic() - started
        if result.is_error:
            text = result.content[0].text if result.content else "no content"
            return Verdict(transport, kind, str(path), "tool_error", "", None, seconds, error=text)
        data = result.structured_content
        return Verdict(transport, kind, str(path), data["outcome"], data["reason"], data["speedup"], seconds)

    return list(await asyncio.gather(*(one(kind, path) for kind, path in jobs)))


async def run_load(task: str, jobs_http: list[tuple[str, Path]], jobs_stdio: list[tuple[str, Path]], cache: Path,
                   log: Path) -> tuple[list[Verdict], float]:
    """Both transports at once; the verdicts and the wall time from the first call to the last reply."""
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    port = free_port()
    server = start_http_server(port, cache, log)
    try:
        await wait_for_port(port, server)
        entry = json.loads((REPO_ROOT / ".mcp.json").read_text())["mcpServers"]["apex-grader"]
        stdio = StdioTransport(command=entry["command"], args=entry["args"], env=server_env(cache), cwd=str(REPO_ROOT))
        async with Client(f"http://127.0.0.1:{port}/mcp", timeout=600) as http_client, Client(stdio, timeout=600) as stdio_client:
            started = time.monotonic()
            http, piped = await asyncio.gather(
                grade_all(http_client, "http", task, jobs_http), grade_all(stdio_client, "stdio", task, jobs_stdio)
            )
            return http + piped, time.monotonic() - started
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="cpu-mini__rms_norm")
    parser.add_argument("--per-kind", type=int, default=2, help="files of each kind per transport")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="apex-concurrent-") as folder:
        root = Path(folder)
        (root / "http").mkdir()
        (root / "stdio").mkdir()
        jobs_http = write_solutions(root / "http", args.per_kind)
        jobs_stdio = write_solutions(root / "stdio", args.per_kind)
        verdicts, wall = asyncio.run(run_load(args.task, jobs_http, jobs_stdio, root / "cache", root / "server.log"))
    wrong = 0
    for verdict in sorted(verdicts, key=lambda v: (v.transport, v.kind, v.path)):
        agrees = verdict.outcome == EXPECTED[verdict.kind]
        wrong += not agrees
        speed = f"{verdict.speedup:.1f}x" if verdict.speedup else "-"
        print(f"{verdict.transport:5} {verdict.kind:9} {Path(verdict.path).name:16} {verdict.outcome:13} {speed:>8} "
              f"{verdict.seconds:6.1f} s {'' if agrees else 'DIFFERS: ' + (verdict.reason or verdict.error)}")
    count = len(verdicts)
    print(f"{count} gradings at once ({args.per_kind} per kind per transport) in {wall:.1f} s: "
          f"{60 * count / wall:.1f} gradings/min; {wrong} verdict(s) differ from a grading alone; "
          f"{os.cpu_count()} cores, python {sys.version.split()[0]}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())

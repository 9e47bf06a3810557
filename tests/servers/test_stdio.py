"""Apex's stdio transport: lines read with a bound, and a real server process on a real pipe that
answers a request with an object id, refuses a message over the limit and serves the next request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

from servers._stdio import _Oversized, lines

REPO_ROOT = Path(__file__).resolve().parents[2]


def _read_all(data: list[bytes], limit: int) -> list[bytes | str]:
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        for piece in data:
            os.write(write_fd, piece)
        os.close(write_fd)

    threading.Thread(target=feed, daemon=True).start()

    async def collect() -> list[bytes | str]:
        return [("oversized" if isinstance(line, _Oversized) else line) async for line in lines(read_fd, limit)]

    try:
        return anyio.run(collect)
    finally:
        os.close(read_fd)


def test_lines_come_whole_however_the_bytes_arrive_without_their_line_ending():
    assert _read_all([b'{"a"', b': 1}\r\n{"b": 2}\n\n', b'{"c": 3}'], 100) == [b'{"a": 1}', b'{"b": 2}', b"", b'{"c": 3}']


def test_a_line_over_the_limit_is_reported_once_and_the_next_line_is_read_as_usual():
    huge = [b"x" * 50_000] * 10
    assert _read_all([b"short\n", *huge, b"tail of the huge one\nnext\n"], 65_536) == [b"short", "oversized", b"next"]


def test_a_line_of_exactly_the_limit_is_kept():
    assert _read_all([b"y" * 1000 + b"\n"], 1000) == [b"y" * 1000]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``python -m servers apex-pipeline`` as a host starts it, on pipes."""
    folder = tmp_path_factory.mktemp("stdio")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "APEX_CACHE_DIR": str(folder / "cache")}
    process = subprocess.Popen([sys.executable, "-m", "servers", "apex-pipeline"], cwd=folder, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None

    def exchange(line: bytes) -> dict:
        process.stdin.write(line + b"\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline())

    opened = exchange(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "apex-stdio", "version": "1"}}}).encode())
    assert opened["result"]["serverInfo"]["name"] == "apex-pipeline"
    process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    yield exchange
    process.stdin.close()
    assert process.wait(timeout=30) == 0
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert "Traceback" not in stderr, stderr[-3000:]


def test_a_request_with_an_object_id_gets_an_invalid_request_error_with_id_null(server):
    reply = server(b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}')
    assert reply["id"] is None and reply["error"]["code"] == -32600 and "the id is an object" in reply["error"]["message"]
    assert server(b'{"jsonrpc": "2.0", "id": 5, "method": "tools/list"}')["id"] == 5


def test_a_message_over_the_default_limit_gets_an_error_and_the_next_request_its_reply(server):
    huge = b'{"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"pad": "' + b"x" * (5 * 1024 * 1024) + b'"}}'
    reply = server(huge)
    assert reply["id"] is None and reply["error"]["code"] == -32600
    assert reply["error"]["data"] == {"limit_bytes": 4 * 1024 * 1024}
    after = server(b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}')
    assert after["id"] == 7 and "run_pipeline" in {tool["name"] for tool in after["result"]["tools"]}

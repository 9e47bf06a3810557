"""The message guard: what it makes of each message, the limit and how it is configured, and a real
server over real streamable HTTP (``apex mcp serve NAME --http``) answering every bad message with
a JSON-RPC error, 413 above the limit, and serving the next request as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import mcp_types
import pytest

from apex_core.errors import ApexUserError
from servers._guard import DEFAULT_LIMIT, LIMIT_ENV, Rejection, message_limit, screen, too_large
from tests.conftest import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]


def _error(raw: bytes) -> dict:
    screened = screen(raw)
    assert isinstance(screened, Rejection), screened
    return json.loads(screened.json())


@pytest.mark.parametrize(("id_json", "kind"), [('{"a": 1}', "an object"), ("[1]", "an array"), ("1.5", "a fraction"),
                                               ("true", "a boolean"), ("null", "null")])
def test_a_request_whose_id_is_not_a_string_or_integer_is_an_invalid_request_with_id_null(id_json, kind):
    reply = _error(f'{{"jsonrpc": "2.0", "id": {id_json}, "method": "tools/list"}}'.encode())
    assert reply["id"] is None and reply["error"]["code"] == mcp_types.INVALID_REQUEST
    assert f"the id is {kind}" in reply["error"]["message"]


def test_text_that_is_not_json_is_a_parse_error_with_id_null():
    reply = _error(b'{"jsonrpc": "2.0", "id": 1,')
    assert reply == {"jsonrpc": "2.0", "id": None, "error": {"code": mcp_types.PARSE_ERROR, "message": reply["error"]["message"]}}
    assert reply["error"]["message"].startswith("Parse error: the message is not JSON")


def test_bytes_that_are_not_utf8_are_a_parse_error():
    assert _error(b'{"jsonrpc": "2.0", "id": 1, "method": "\xff"}')["error"]["code"] == mcp_types.PARSE_ERROR


def test_json_that_is_not_a_message_is_an_invalid_request_answered_with_the_requests_own_id_where_it_has_one():
    assert _error(b'{"jsonrpc": "2.0", "id": 41, "method": 7}')["id"] == 41
    batch = _error(b"[1, 2]")
    assert batch["id"] is None and "a batch" in batch["error"]["message"]
    assert _error(b'"tools/list"')["error"]["code"] == mcp_types.INVALID_REQUEST


def test_requests_notifications_and_replies_pass_as_the_sdks_own_messages():
    assert isinstance(screen(b'{"jsonrpc": "2.0", "id": "a", "method": "tools/list"}'), mcp_types.JSONRPCRequest)
    assert isinstance(screen(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}'), mcp_types.JSONRPCNotification)
    assert isinstance(screen(b'{"jsonrpc": "2.0", "id": 3, "result": {}}'), mcp_types.JSONRPCResponse)


def test_a_message_over_the_limit_is_refused_with_413_and_the_limit_named():
    rejection = too_large(65536)
    assert rejection.http_status == 413
    reply = json.loads(rejection.json())
    assert reply["id"] is None and reply["error"]["code"] == mcp_types.INVALID_REQUEST
    assert "larger than this server's limit of 65536 bytes (APEX_MCP_MAX_MESSAGE_BYTES)" in reply["error"]["message"]


def test_the_limit_is_4_mib_unless_the_environment_says_otherwise():
    assert message_limit({}) == DEFAULT_LIMIT == 4 * 1024 * 1024
    assert message_limit({LIMIT_ENV: " 65536 "}) == 65536


@pytest.mark.parametrize("value", ["4MiB", "-1", "1024", str(DEFAULT_LIMIT + 1)])
def test_a_limit_that_is_not_a_number_of_bytes_in_range_is_one_clear_error(value):
    with pytest.raises(ApexUserError) as error:
        message_limit({LIMIT_ENV: value})
    assert str(error.value).startswith(f"{LIMIT_ENV}={value!r}: give the largest MCP message")
    assert "from 65536 (64 KiB) to 4194304 (4 MiB" in str(error.value)


def test_a_server_started_with_a_bad_limit_says_so_in_one_line_and_exits_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "APEX_CACHE_DIR": str(tmp_path), LIMIT_ENV: "lots"}
    done = subprocess.run([sys.executable, "-m", "servers.pipeline"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and done.stderr.startswith(f"{LIMIT_ENV}='lots'")


# --- a real server over real streamable HTTP ------------------------------------------------------

@pytest.fixture(scope="module")
def http_server(tmp_path_factory) -> Iterator[str]:
    """``apex mcp serve apex-pipeline --http`` with a 64 KiB limit; its endpoint's URL."""
    folder = tmp_path_factory.mktemp("http")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "APEX_CACHE_DIR": str(folder / "cache")}
    server = subprocess.Popen([sys.executable, "-m", "apex_core.cli.main", "mcp", "serve", "apex-pipeline",
                               "--http", f"127.0.0.1:{port}", "--max-message-bytes", "65536"],
                              cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
        assert b"Traceback" not in stderr, stderr.decode()[-3000:]


class Session:
    """An MCP session over streamable HTTP, spoken in raw JSON-RPC bodies."""

    HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.Client(timeout=60)
        deadline = time.monotonic() + 90
        while True:
            try:
                opened = self.post(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "apex-guard", "version": "1"}}}))
                break
            except httpx.ConnectError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert opened.status_code == 200, opened.text
        self.headers = {**self.HEADERS, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        assert self.post('{"jsonrpc": "2.0", "method": "notifications/initialized"}').status_code == 202

    def post(self, body: str | bytes | Iterator[bytes]) -> httpx.Response:
        return self.client.post(self.url, headers=getattr(self, "headers", self.HEADERS), content=body)

    def tools(self) -> list[str]:
        reply = self.post('{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}')
        assert reply.status_code == 200, reply.text
        data = next(line[len("data: "):] for line in reply.text.splitlines() if line.startswith("data: "))
        return [tool["name"] for tool in json.loads(data)["result"]["tools"]]


def test_over_http_a_request_with_an_object_id_gets_400_and_the_json_rpc_error(http_server):
    session = Session(http_server)
    reply = session.post('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}')
    assert reply.status_code == 400 and reply.headers["content-type"] == "application/json"
    assert reply.json()["id"] is None and reply.json()["error"]["code"] == -32600
    assert "run_pipeline" in session.tools()


def test_over_http_a_body_that_is_not_json_gets_400_and_a_parse_error(http_server):
    session = Session(http_server)
    reply = session.post("{oops")
    assert reply.status_code == 400 and reply.json()["error"]["code"] == -32700 and reply.json()["id"] is None
    assert "run_pipeline" in session.tools()


def test_over_http_a_body_over_the_limit_gets_413_whether_declared_or_streamed_and_the_server_goes_on(http_server):
    session = Session(http_server)
    big = b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"pad": "' + b"x" * 70_000 + b'"}}'
    declared = session.post(big)  # Content-Length says it all
    assert declared.status_code == 413 and declared.json()["error"]["code"] == -32600
    assert "limit of 65536 bytes" in declared.json()["error"]["message"]
    streamed = session.post(iter([big[i:i + 8192] for i in range(0, len(big), 8192)]))  # chunked: counted as it comes
    assert streamed.status_code == 413 and streamed.json()["error"]["data"] == {"limit_bytes": 65536}
    assert "run_pipeline" in session.tools()

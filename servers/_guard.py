"""The guard in front of every Apex MCP server: each message that arrives, over stdio or streamable
HTTP, is checked here before the MCP SDK sees it, so that every request gets a reply and no
message is larger than a limit.

Why it exists: the SDK reads a request whose ``id`` is not a string or an integer (an object, an
array, a fraction, true, null) as a *notification*, since a notification is a request without an
id and pydantic ignores the field it does not know; the client then waits for a reply that never
comes. And it reads a stdio line or an HTTP body of any length into memory (64 MiB were accepted).
JSON-RPC 2.0 wants a reply to every request: Parse error (-32700, id null) to what is not JSON,
Invalid Request (-32600) to what is not a JSON-RPC message, with the request's id where it has a
usable one and null where it has none. A message over the limit is refused with Invalid Request
(id null: it is not read far enough to know its id) and, over HTTP, status 413; the server goes on
serving either way.

The limit is ``APEX_MCP_MAX_MESSAGE_BYTES`` (``--max-message-bytes`` of ``apex mcp serve`` sets it):
4 MiB by default and at most, because the SDK itself refuses HTTP bodies above 4 MiB; at least
64 KiB, which is still a hundred times the largest request an Apex tool takes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import mcp_types
import pydantic_core
from pydantic import ValidationError

from apex_core.errors import ApexUserError

log = logging.getLogger("servers")

LIMIT_ENV = "APEX_MCP_MAX_MESSAGE_BYTES"
DEFAULT_LIMIT = 4 * 1024 * 1024
"""4 MiB: the MCP SDK's own ceiling on an HTTP request body, so one limit holds on both transports."""
SMALLEST_LIMIT = 64 * 1024
LARGEST_LIMIT = DEFAULT_LIMIT


def message_limit(environ: Mapping[str, str] = os.environ) -> int:
    """The largest message, in bytes, a server accepts: ``APEX_MCP_MAX_MESSAGE_BYTES`` or the default.
    A value that is not a whole number in range is the user's mistake, said in one line."""
    text = environ.get(LIMIT_ENV, "").strip()
    if not text:
        return DEFAULT_LIMIT
    return checked_limit(text, LIMIT_ENV)


def checked_limit(text: str, source: str) -> int:
    """``text`` as a message limit in bytes; ``source`` names where it came from in the error."""
    value = int(text) if text.isdigit() else None
    if value is None or not SMALLEST_LIMIT <= value <= LARGEST_LIMIT:
        raise ApexUserError(
            f"{source}={text!r}: give the largest MCP message a server accepts as a whole number of bytes from "
            f"{SMALLEST_LIMIT} (64 KiB) to {LARGEST_LIMIT} (4 MiB, the default and the MCP SDK's own HTTP ceiling)")
    return value


@dataclass(frozen=True)
class Rejection:
    """The JSON-RPC error reply to a message the server will not handle, and the HTTP status it
    goes with when the message came over HTTP."""

    error: mcp_types.JSONRPCError
    http_status: int

    def json(self) -> bytes:
        return self.error.model_dump_json(by_alias=True, exclude_unset=True).encode()


def _reject(request_id: int | str | None, code: int, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST,
            data: dict[str, Any] | None = None) -> Rejection:
    error = mcp_types.ErrorData(code=code, message=message, **({"data": data} if data is not None else {}))
    return Rejection(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error), int(status))


def too_large(limit: int) -> Rejection:
    """The reply to a message longer than ``limit`` bytes."""
    log.warning("refused an MCP message larger than %d bytes (%s)", limit, LIMIT_ENV)
    return _reject(None, mcp_types.INVALID_REQUEST,
                   f"Invalid Request: the message is larger than this server's limit of {limit} bytes ({LIMIT_ENV}); "
                   "send a smaller one (Apex's tools take paths and names, never file contents)",
                   HTTPStatus(413), {"limit_bytes": limit})


def _usable_id(value: object) -> bool:
    """What MCP allows as a request id: a string or an integer (JSON-RPC's fractions and null are not)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _kind(value: object) -> str:
    names = {dict: "an object", list: "an array", bool: "a boolean", float: "a fraction", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def screen(raw: bytes | str) -> mcp_types.JSONRPCMessage | Rejection:
    """One message as read off the wire: the JSON-RPC message it is, or the error reply it gets.

    The order matters: a request with an unusable id is refused before the SDK's own parsing,
    which would take it for a notification and never answer it."""
    try:
        value = pydantic_core.from_json(raw)
    except ValueError as error:
        detail = " ".join(str(error).split())[:200]
        return _reject(None, mcp_types.PARSE_ERROR,
                       f"Parse error: the message is not JSON ({detail}); send one JSON-RPC 2.0 message per line (stdio) "
                       "or per request body (HTTP)")
    if not isinstance(value, dict):
        what = "a batch (an array), which MCP does not use" if isinstance(value, list) else _kind(value)
        return _reject(None, mcp_types.INVALID_REQUEST,
                       f"Invalid Request: the message is {what}; send one JSON-RPC 2.0 object per message")
    if "method" in value and "id" in value and not _usable_id(value["id"]):
        return _reject(None, mcp_types.INVALID_REQUEST,
                       f"Invalid Request: the id is {_kind(value['id'])}; a request's id must be a string or an integer "
                       "(leave the id out for a notification)")
    try:
        return mcp_types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"][1:]) or "the message"
        request_id = value.get("id") if "method" in value and _usable_id(value.get("id")) else None
        return _reject(request_id, mcp_types.INVALID_REQUEST,
                       f"Invalid Request: not a JSON-RPC 2.0 message ({where}: {first['msg']})")


class HTTPMessageGuard:
    """ASGI middleware for the streamable HTTP app: bodies over ``limit`` get 413 with the JSON-RPC
    error, and a POST to the MCP endpoint whose body ``screen`` refuses gets its error with 400;
    anything else goes on to the app with the body replayed."""

    def __init__(self, app: Any, limit: int, endpoint: str) -> None:
        self.app = app
        self.limit = limit
        self.endpoint = endpoint.rstrip("/") or "/"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._answer(too_large(self.limit), send)
            return
        body = bytearray()
        pending: list[dict[str, Any]] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                pending.append(message)
                break
            body += message.get("body", b"")
            if len(body) > self.limit:
                await self._answer(too_large(self.limit), send)
                return
            if not message.get("more_body", False):
                break
        if scope["method"] == "POST" and (scope["path"].rstrip("/") or "/") == self.endpoint:
            screened = screen(bytes(body))
            if isinstance(screened, Rejection):
                await self._answer(screened, send)
                return
        pending.insert(0, {"type": "http.request", "body": bytes(body), "more_body": False})

        async def replay() -> dict[str, Any]:
            return pending.pop(0) if pending else await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _answer(rejection: Rejection, send: Any) -> None:
        body = rejection.json()
        await send({"type": "http.response.start", "status": rejection.http_status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

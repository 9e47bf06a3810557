"""What every Apex MCP server shares: construction, logging, error translation, and answers to
unreadable lines on stdio."""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

# FastMCP reads these at import; on machines without network its banner's update check only waits.
os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

import anyio  # noqa: E402
import mcp_types  # noqa: E402
from fastmcp import FastMCP  # noqa: E402
from fastmcp.exceptions import ToolError  # noqa: E402
from mcp.server.stdio import stdio_server  # noqa: E402
from mcp.shared.message import SessionMessage  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from apex_core.errors import ApexUserError  # noqa: E402
from apex_core.progress import Progress  # noqa: E402

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger("servers")


class ApexServer(FastMCP):
    """FastMCP, except that on stdio a line that is not a JSON-RPC message gets the error reply
    JSON-RPC 2.0 requires (-32700 Parse error or -32600 Invalid Request), where the SDK drops it
    and leaves the client waiting."""

    async def run_stdio_async(self, show_banner: bool = True, log_level: str | None = None, stateless: bool = False) -> None:
        # FastMCP's own run_stdio_async (fastmcp 4.2), with the read stream wrapped.
        from fastmcp.server.context import reset_transport, set_transport
        from fastmcp.utilities.logging import temporary_log_level

        if show_banner:
            from fastmcp.utilities.cli import log_server_banner

            log_server_banner(server=self)
        token = set_transport("stdio")
        try:
            with temporary_log_level(log_level):
                async with self._lifespan_manager():
                    async with stdio_server() as (read_stream, write_stream):
                        log.info("Starting MCP server %r with transport 'stdio'", self.name)
                        await self._mcp_server.run(
                            AnsweringUnreadable(read_stream, write_stream),
                            write_stream,
                            self._mcp_server.create_initialization_options(),
                        )
        finally:
            reset_transport(token)


class AnsweringUnreadable:
    """A transport's read stream that answers the lines it could not read as JSON-RPC messages
    (which the transport hands on as exceptions) and passes every message on."""

    def __init__(self, inner: Any, write_stream: Any) -> None:
        self._inner = inner
        self._write = write_stream

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            reply = rejection(item)
            if reply is not None:
                await self._write.send(SessionMessage(reply))

    def __aiter__(self) -> AnsweringUnreadable:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnsweringUnreadable:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


def rejection(error: Exception) -> mcp_types.JSONRPCError | None:
    """The JSON-RPC 2.0 error reply to a line the transport could not read (None: a blank line,
    which is no message at all)."""
    problems = error.errors() if isinstance(error, ValidationError) else []
    unparsable = [p for p in problems if p["type"] == "json_invalid"]
    if unparsable:
        line = unparsable[0].get("input")
        if isinstance(line, (str, bytes)) and not line.strip():
            return None
        detail = unparsable[0]["msg"]
        return _error(None, mcp_types.PARSE_ERROR, f"Parse error: the line is not JSON ({detail}); send one JSON-RPC 2.0 message per line")
    if not problems:
        log.warning("the transport could not read a message: %r", error)
        return _error(None, mcp_types.INTERNAL_ERROR, f"Internal error: the message could not be read ({type(error).__name__})")
    # Valid JSON, but not a JSON-RPC message: answer the request's id where it has a usable one.
    message = next((p["input"] for p in problems if isinstance(p.get("input"), dict)), None)
    request_id = message.get("id") if isinstance(message, dict) and "method" in message else None
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        request_id = None
    first = problems[0]
    where = ".".join(str(part) for part in first["loc"][1:]) or "the message"
    return _error(request_id, mcp_types.INVALID_REQUEST,
                  f"Invalid Request: not a JSON-RPC 2.0 message ({where}: {first['msg']})")


def _error(request_id: int | str | None, code: int, message: str) -> mcp_types.JSONRPCError:
    return mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=code, message=message))


READ_ONLY = mcp_types.ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
"""For tools that change nothing of the user's (``ToolSummary.read_only`` in the registry says which)."""


T = TypeVar("T")


async def in_thread_with_progress(ctx: Any, work: Callable[[Progress], T]) -> T:
    """Run blocking ``work(progress)`` in a worker thread, forwarding its ``progress(fraction,
    message)`` reports to the client as MCP progress notifications (``ctx`` None: dropped)."""
    import anyio.from_thread
    import anyio.lowlevel
    import anyio.to_thread

    loop = anyio.lowlevel.current_token()

    def progress(fraction: float, message: str) -> None:
        if ctx is not None:
            # Two decimals: reports that grow by at least 0.1% each show larger.
            anyio.from_thread.run(ctx.report_progress, round(100 * fraction, 2), 100.0, message, token=loop)

    return await anyio.to_thread.run_sync(lambda: work(progress))


def create_server(name: str, instructions: str) -> FastMCP:
    """A FastMCP server that logs to stderr and hides the details of unexpected exceptions."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return ApexServer(name, instructions=instructions, mask_error_details=True)


def _as_tool_error(name: str, error: Exception) -> ToolError:
    """What the model reads when a tool fails: the user's mistake as worded, or one line naming
    a fault of Apex's (its traceback goes to the server's log on stderr)."""
    if isinstance(error, ApexUserError):
        return ToolError(str(error))
    log.error("tool %s failed", name, exc_info=error)
    detail = " ".join(str(error).split())[:300] or "no detail"
    return ToolError(
        f"{name} failed inside Apex ({type(error).__name__}: {detail}); this is a fault of the grader, not of your "
        "arguments or solution: retrying will not help, report it (the server's log on stderr has the traceback)"
    )


def user_errors_as_tool_errors(function: F) -> F:
    """Every failure of a tool as a ToolError the model can act on: an ApexUserError's message as
    it is (what was wrong, what would work), anything else as one line saying Apex failed and why."""
    name = function.__name__
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await function(*args, **kwargs)
            except ToolError:
                raise
            except Exception as error:
                raise _as_tool_error(name, error) from None

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except ToolError:
            raise
        except Exception as error:
            raise _as_tool_error(name, error) from None

    return wrapper  # type: ignore[return-value]

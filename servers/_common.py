"""What every Apex MCP server shares: construction (with the message guard on both transports),
logging, and error translation."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

# FastMCP reads these at import; on machines without network its banner's update check only waits.
os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

import mcp_types  # noqa: E402
from fastmcp import FastMCP  # noqa: E402
from fastmcp.exceptions import FastMCPError, ToolError  # noqa: E402
from fastmcp.server.middleware import CallNext, MiddlewareContext  # noqa: E402
from fastmcp.server.middleware import Middleware as FastMCPMiddleware  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402

from apex_core.errors import ApexUserError  # noqa: E402
from apex_core.progress import Progress  # noqa: E402
from servers._guard import HTTPMessageGuard, message_limit  # noqa: E402
from servers._stdio import guarded_stdio  # noqa: E402

log = logging.getLogger("servers")


class ApexServer(FastMCP):
    """FastMCP with ``servers._guard`` in front of both transports: on stdio Apex's own transport
    (``servers._stdio``), over streamable HTTP the guard's middleware. Every request then gets a
    reply (the SDK alone leaves a request with an object id, or a line that is not JSON, unanswered)
    and no message may pass the size limit (``APEX_MCP_MAX_MESSAGE_BYTES``)."""

    async def run_stdio_async(self, show_banner: bool = True, log_level: str | None = None, stateless: bool = False) -> None:
        # FastMCP's own run_stdio_async (fastmcp 4.2), with the guarded transport for the SDK's stdio_server.
        from fastmcp.server.context import reset_transport, set_transport
        from fastmcp.utilities.logging import temporary_log_level

        limit = configured_limit()
        if show_banner:
            from fastmcp.utilities.cli import log_server_banner

            log_server_banner(server=self)
        token = set_transport("stdio")
        try:
            with temporary_log_level(log_level):
                async with self._lifespan_manager():
                    async with guarded_stdio(limit) as (read_stream, write_stream):
                        log.info("Starting MCP server %r with transport 'stdio' (messages up to %d bytes)", self.name, limit)
                        await self._mcp_server.run(read_stream, write_stream, self._mcp_server.create_initialization_options())
        finally:
            reset_transport(token)

    def http_app(self, path: str | None = None, middleware: list[Middleware] | None = None, **options: Any) -> Any:
        """FastMCP's app, with the guard as the innermost middleware (after the Host/Origin check)."""
        import fastmcp

        endpoint = path if path is not None else fastmcp.settings.streamable_http_path
        guard = Middleware(HTTPMessageGuard, limit=configured_limit(), endpoint=endpoint)
        return super().http_app(path=path, middleware=[*(middleware or []), guard], **options)


def configured_limit() -> int:
    """The message limit; a bad ``APEX_MCP_MAX_MESSAGE_BYTES`` ends the server with one line on
    stderr and exit code 2, before it reads anything (however it was started)."""
    try:
        return message_limit()
    except ApexUserError as error:
        sys.stderr.write(f"{error}\n")
        raise SystemExit(2) from None


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
    """A FastMCP server that logs to stderr and turns every tool's failure into an error the model
    can act on (``ToolErrorsForTheModel``), set up once here rather than on each tool."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("fastmcp.server.server").addFilter(_no_traceback_for_user_errors)
    return ApexServer(name, instructions=instructions, mask_error_details=True, middleware=[ToolErrorsForTheModel()])


def _as_tool_error(name: str, error: BaseException) -> ToolError:
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


class ToolErrorsForTheModel(FastMCPMiddleware):
    """Every failure of a tool as a ToolError the model can act on: an ApexUserError's message as
    it is (what was wrong, what would work), anything else as one line saying Apex failed and why.

    FastMCP (4.2) runs a tool inside the middleware chain and replaces what the tool raised by a
    masked ``ToolError`` whose ``__cause__`` is the original; that cause is what is translated here.
    A ToolError the tool raised itself, a mounted server's already translated one (no cause) and an
    argument-validation error pass through unchanged."""

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: CallNext[Any, Any]) -> Any:
        try:
            return await call_next(context)
        except ToolError as error:
            cause = error.__cause__
            if cause is None or isinstance(cause, FastMCPError):
                raise
            raise _as_tool_error(context.message.name, cause) from None


def _no_traceback_for_user_errors(record: logging.LogRecord) -> bool:
    """FastMCP logs every exception of a tool with its traceback; a user's mistake is not a fault."""
    return not (record.exc_info and isinstance(record.exc_info[1], ApexUserError))

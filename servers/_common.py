"""What every Apex MCP server shares: construction, logging and error translation."""

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

from fastmcp import FastMCP  # noqa: E402
from fastmcp.exceptions import ToolError  # noqa: E402

from apex_core.errors import ApexUserError  # noqa: E402

F = TypeVar("F", bound=Callable[..., Any])


def create_server(name: str, instructions: str) -> FastMCP:
    """A FastMCP server that logs to stderr and hides the details of unexpected exceptions."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return FastMCP(name, instructions=instructions, mask_error_details=True)


def user_errors_as_tool_errors(function: F) -> F:
    """Turn ApexUserError into ToolError, whose message the model reads and can act on."""
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await function(*args, **kwargs)
            except ApexUserError as error:
                raise ToolError(str(error)) from None

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except ApexUserError as error:
            raise ToolError(str(error)) from None

    return wrapper  # type: ignore[return-value]

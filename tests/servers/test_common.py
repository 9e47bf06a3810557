"""What every server gets from create_server: tool failures the model can act on, for every tool
without a decorator, and FastMCP's internals that the stdio transport copies, pinned."""

import asyncio
import importlib.metadata
import logging

from fastmcp import Client
from fastmcp.exceptions import ToolError

from apex_core.errors import UnknownNameError
from servers._common import ApexServer, create_server


def _demo_server():
    server = create_server("apex-demo", "A server built by the shared conventions.")

    @server.tool
    def lookup(task_id: str) -> str:
        """Look a task up."""
        raise UnknownNameError("task id", task_id, ["cpu-mini__rms_norm"])

    @server.tool
    async def broken() -> str:
        """A bug."""
        raise RuntimeError("internal detail\nsecond line")

    @server.tool
    def fault(path: str) -> str:
        """A fault below a tool (here: the OS refusing a path)."""
        raise OSError(36, "File name too long", path)

    @server.tool
    def refuses() -> str:
        """A tool that words its own error."""
        raise ToolError("no GPU here: grade on a machine with one")

    return server


async def _call(server, name: str, arguments: dict):
    async with Client(server) as client:
        return await client.call_tool(name, arguments, raise_on_error=False)


def test_a_user_error_reaches_the_model_as_a_readable_tool_error_and_its_log_has_no_traceback(caplog):
    with caplog.at_level(logging.INFO):
        result = asyncio.run(_call(_demo_server(), "lookup", {"task_id": "cpu-mini__rmsnorm"}))
    assert result.is_error
    assert "did you mean 'cpu-mini__rms_norm'" in result.content[0].text
    assert not [r for r in caplog.records if r.exc_info]


def test_a_fault_tells_the_model_what_failed_in_one_line_and_that_retrying_will_not_help():
    for name, arguments, start in [("fault", {"path": "x" * 20}, "fault failed inside Apex (OSError: [Errno 36] File name too long"),
                                   ("broken", {}, "broken failed inside Apex (RuntimeError: internal detail second line)")]:
        result = asyncio.run(_call(_demo_server(), name, arguments))
        text = result.content[0].text
        assert result.is_error and "\n" not in text and text.startswith(start), text
        assert "not of your arguments or solution: retrying will not help" in text


def test_a_tool_error_the_tool_words_itself_and_bad_arguments_pass_unchanged():
    result = asyncio.run(_call(_demo_server(), "refuses", {}))
    assert result.is_error and result.content[0].text == "no GPU here: grade on a machine with one"
    result = asyncio.run(_call(_demo_server(), "lookup", {}))
    assert result.is_error and "task_id" in result.content[0].text and "inside Apex" not in result.content[0].text


def test_a_mounted_servers_errors_reach_the_gateways_client_translated_once():
    gateway = create_server("apex-demo-gateway", "Mounts the demo.")
    gateway.mount(_demo_server(), namespace="demo")
    result = asyncio.run(_call(gateway, "demo_lookup", {"task_id": "cpu-mini__rmsnorm"}))
    assert result.is_error and "did you mean 'cpu-mini__rms_norm'" in result.content[0].text
    result = asyncio.run(_call(gateway, "demo_fault", {"path": "p"}))
    assert result.content[0].text.startswith("demo_fault failed inside Apex (OSError") or \
        result.content[0].text.startswith("fault failed inside Apex (OSError"), result.content[0].text


def test_the_stdio_transport_copies_fastmcp_4_2_and_finds_what_it_copies():
    """ApexServer.run_stdio_async is FastMCP 4.2's with the guarded transport: a FastMCP that moves
    the private parts it uses must fail here, not in a user's host."""
    assert importlib.metadata.version("fastmcp").startswith("4.2."), "re-read FastMCP's run_stdio_async before moving the pin"
    server = ApexServer("apex-pin", instructions="pin")
    assert callable(server._lifespan_manager) and hasattr(server._mcp_server, "run")
    assert hasattr(server._mcp_server, "create_initialization_options")

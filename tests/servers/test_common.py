import asyncio

from fastmcp import Client

from apex_core.errors import UnknownNameError
from servers._common import create_server, user_errors_as_tool_errors


def _demo_server():
    server = create_server("apex-demo", "A server built by the shared conventions.")

    @server.tool
    @user_errors_as_tool_errors
    def lookup(task_id: str) -> str:
        """Look a task up."""
        raise UnknownNameError("task id", task_id, ["cpu-mini__rms_norm"])

    @server.tool
    def broken() -> str:
        """A bug."""
        raise RuntimeError("internal detail")

    @server.tool
    @user_errors_as_tool_errors
    def wrapped_fault(path: str) -> str:
        """A fault below a wrapped tool (here: the OS refusing a path)."""
        raise OSError(36, "File name too long", path)

    return server


async def _call(name: str, arguments: dict):
    async with Client(_demo_server()) as client:
        return await client.call_tool(name, arguments, raise_on_error=False)


def test_a_user_error_reaches_the_model_as_a_readable_tool_error():
    result = asyncio.run(_call("lookup", {"task_id": "cpu-mini__rmsnorm"}))
    assert result.is_error
    assert "did you mean 'cpu-mini__rms_norm'" in result.content[0].text


def test_an_internal_error_is_masked():
    result = asyncio.run(_call("broken", {}))
    assert result.is_error and "internal detail" not in result.content[0].text


def test_a_fault_below_a_wrapped_tool_still_tells_the_model_what_failed_and_that_retrying_will_not_help():
    result = asyncio.run(_call("wrapped_fault", {"path": "x" * 20}))
    assert result.is_error
    text = result.content[0].text
    assert "\n" not in text
    assert text.startswith("wrapped_fault failed inside Apex (OSError: [Errno 36] File name too long")
    assert "not of your arguments or solution: retrying will not help" in text

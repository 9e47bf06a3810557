import pytest
from pydantic import ValidationError

from apex_core.hosting import mcp_registry
from apex_core.errors import UnknownNameError
from apex_core.hosting.mcp_registry import GATEWAY, SERVERS, ServerSpec, ToolProbe, ToolSummary


def _tool(name: str, timeout_s: int = 60) -> ToolSummary:
    return ToolSummary(name=name, when_to_use="when testing the registry", timeout_s=timeout_s)


def test_the_shipped_registry_is_consistent():
    mcp_registry.check_registry()
    assert SERVERS and all(server.probe is not None for server in SERVERS)


def test_a_server_gets_its_namespace_from_its_name_and_the_longest_tool_timeout():
    server = ServerSpec(name="apex-source-explorer", module="servers.source_explorer", description="d",
                        tools=(_tool("search", 30), _tool("read_file", 600)))
    assert server.namespace == "sourceexplorer" and server.tool_timeout_s == 600


def test_the_gateway_carries_every_tool_under_its_servers_namespace():
    expected = {f"{s.namespace}_{t.name}" for s in SERVERS for t in s.tools}
    assert {t.name for t in GATEWAY.tools} == expected
    assert GATEWAY.probe is not None and GATEWAY.probe.tool in expected
    assert GATEWAY.tool_timeout_s == max(s.tool_timeout_s for s in SERVERS)


@pytest.mark.parametrize("bad", [
    {"name": "Apex_Grader"},
    {"name": "apex--grader"},
    {"module": "grader"},
    {"tools": (_tool("check"), _tool("check"))},
    {"probe": ToolProbe(tool="missing", expect_key="x")},
])
def test_malformed_entries_are_refused(bad):
    fields = {"name": "apex-x", "module": "servers.x", "description": "d", "tools": (_tool("check"),), **bad}
    with pytest.raises(ValidationError):
        ServerSpec(**fields)


def test_two_servers_with_one_name_or_namespace_are_refused():
    one = ServerSpec(name="apex-a", module="servers.a", description="d", tools=(_tool("x"),), namespace="same")
    two = ServerSpec(name="apex-b", module="servers.b", description="d", tools=(_tool("y"),), namespace="same")
    with pytest.raises(ValueError, match="share a namespace: same"):
        mcp_registry.check_registry((one, two))
    with pytest.raises(ValueError, match="share a name: apex-a"):
        mcp_registry.check_registry((one, one.model_copy(update={"namespace": "other", "module": "servers.c"})))


def test_looking_up_a_server_suggests_the_nearest_name():
    assert mcp_registry.get_server("apex").module == "servers.gateway"
    with pytest.raises(UnknownNameError, match="did you mean 'apex-grader'"):
        mcp_registry.get_server("apex-grade")

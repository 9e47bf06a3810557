"""Tool-surface hygiene of every registered server (and the gateway), enforced.

What an agent relies on: each tool says when to use it, takes typed and constrained parameters,
returns a structured result, answers a bad argument with an error it can read (and stays up),
and on stdio writes nothing but protocol messages to stdout. The checks run against the real
servers, in memory and as raw JSON-RPC over stdio (no client library smoothing anything over).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fastmcp import Client

from apex_core.hosting.mcp_registry import GATEWAY, SERVERS, all_servers

REPO_ROOT = Path(__file__).resolve().parents[2]
CANNED = "apex_core/agents/canned/cpu-mini__rms_norm.py"
WHEN_CUES = re.compile(r"\b(use (it|this|them)|when|while|before|after|once|to (compare|rank|pick|choose|check|see))\b", re.I)
SERVER_IDS = [s.name for s in all_servers()]


def _tools(module: str) -> list[Any]:
    async def listing() -> list[Any]:
        async with Client(importlib.import_module(module).mcp) as client:
            return await client.list_tools()

    return asyncio.run(listing())


@pytest.fixture(scope="module")
def listed() -> dict[str, list[Any]]:
    return {server.name: _tools(server.module) for server in all_servers()}


@pytest.mark.parametrize("name", SERVER_IDS)
def test_the_registry_lists_exactly_the_tools_each_server_has(listed, name):
    spec = next(s for s in all_servers() if s.name == name)
    assert {t.name for t in listed[name]} == {t.name for t in spec.tools}


@pytest.mark.parametrize("name", SERVER_IDS)
def test_tools_the_registry_calls_read_only_are_annotated_read_only_and_no_others(listed, name):
    spec = next(s for s in all_servers() if s.name == name)
    read_only = {t.name for t in spec.tools if t.read_only}
    annotated = {t.name for t in listed[name] if t.annotations is not None and t.annotations.readOnlyHint}
    assert annotated == read_only


@pytest.mark.parametrize("name", SERVER_IDS)
def test_every_tool_description_tells_an_agent_when_to_use_it(listed, name):
    for tool in listed[name]:
        description = tool.description or ""
        assert len(description) >= 60, f"{tool.name}: description too short to choose the tool by"
        assert WHEN_CUES.search(description), f"{tool.name}: description does not say when to use it: {description!r}"


def _property_problems(name: str, schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    variants = schema.get("anyOf") or [schema]
    problems = []
    if not schema.get("description"):
        problems.append(f"{name}: no description")
    for variant in variants:
        kind = variant.get("type")
        if kind is None and "enum" not in variant and "const" not in variant and "$ref" not in variant:
            problems.append(f"{name}: untyped")
        elif kind == "string" and not ({"minLength", "pattern", "enum", "format", "maxLength"} & set(variant)):
            problems.append(f"{name}: a string with no constraint (minLength, pattern, enum)")
        elif kind in ("number", "integer") and not ({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} & set(variant)):
            problems.append(f"{name}: a number with no bounds")
        elif kind == "array" and not ("items" in variant and "maxItems" in variant):
            problems.append(f"{name}: an array without item type or size limit")
    return problems


@pytest.mark.parametrize("name", SERVER_IDS)
def test_every_parameter_is_typed_constrained_and_described(listed, name):
    problems = []
    for tool in listed[name]:
        schema = tool.inputSchema
        assert schema.get("additionalProperties") is False, f"{tool.name}: unknown arguments would be silently ignored"
        for prop, prop_schema in schema.get("properties", {}).items():
            problems += [f"{tool.name}.{p}" for p in _property_problems(prop, prop_schema, schema.get("$defs", {}))]
    assert not problems, problems


@pytest.mark.parametrize("name", SERVER_IDS)
def test_every_tool_declares_a_structured_result(listed, name):
    for tool in listed[name]:
        output = tool.outputSchema
        assert output and output.get("type") == "object" and output.get("properties"), f"{tool.name}: no object outputSchema"


# --- raw JSON-RPC over stdio --------------------------------------------------------------------

class RawStdio:
    """A server process spoken to in newline-delimited JSON-RPC, every stdout line kept."""

    def __init__(self, module: str, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", module], cwd=cwd, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.lines: list[str] = []
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next_id = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(message, dict) and "id" in message and ("result" in message or "error" in message):
                self._replies.put(message)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._write({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = 120) -> dict[str, Any]:
        self._next_id += 1
        self._write({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params or {}})
        while True:
            reply = self._replies.get(timeout=timeout)
            if reply["id"] == self._next_id:
                return reply

    def _write(self, message: dict[str, Any]) -> None:
        self.write_line(json.dumps(message))

    def write_line(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def unreadable(self, line: str, timeout: float = 60) -> dict[str, Any]:
        """Send a line that is no JSON-RPC message and return the reply to it (every earlier
        request has had its reply, so the next one is this line's)."""
        self.write_line(line)
        return self._replies.get(timeout=timeout)

    def close(self) -> str:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=5)
        return self.process.stderr.read() if self.process.stderr else ""


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "APEX_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO_ROOT)}


def _bad_calls(tool: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """Arguments an agent might get wrong, each with the parameter the error must name."""
    schema = tool["inputSchema"]
    properties = schema.get("properties", {})
    calls = []
    required = schema.get("required", [])
    if required:
        calls.append(({}, required[0]))
    # An object where the schema wants something else (a parameter that takes objects is skipped).
    scalar = next((p for p, schema in properties.items()
                   if "object" not in json.dumps(schema.get("type", schema.get("anyOf", "")))), None)
    if scalar is not None:
        calls.append(({**{r: "x" * 8 for r in required}, scalar: {"not": "valid"}}, scalar))
    calls.append(({**{r: "x" * 8 for r in required}, "no_such_parameter": 1}, "no_such_parameter"))
    return calls


@pytest.mark.parametrize("spec", all_servers(), ids=SERVER_IDS)
def test_over_stdio_only_protocol_reaches_stdout_and_bad_arguments_are_readable_errors(spec, tmp_path):
    server = RawStdio(spec.module, REPO_ROOT, _env(tmp_path))
    try:
        init = server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                             "clientInfo": {"name": "apex-hygiene", "version": "1"}}, timeout=60)
        assert init["result"]["serverInfo"]["name"] == spec.name
        server.notify("notifications/initialized")
        tools = server.request("tools/list")["result"]["tools"]
        assert {t["name"] for t in tools} == {t.name for t in spec.tools}
        # JSON-RPC 2.0: a line that is not JSON gets a Parse error with id null; JSON that is not
        # a request gets Invalid Request, with the request's id where it has one.
        parse = server.unreadable("{not json")
        assert parse["id"] is None and parse["error"]["code"] == -32700, parse
        assert "Parse error" in parse["error"]["message"]
        invalid = server.unreadable('{"jsonrpc": "2.0", "id": 41, "method": 7}')
        assert invalid["id"] == 41 and invalid["error"]["code"] == -32600, invalid
        server.write_line("")  # a blank line is no message: no reply, so the next reply is the batch's
        batch = server.unreadable("[1, 2]")
        assert batch["id"] is None and batch["error"]["code"] == -32600, batch
        # A request whose id is an object (the SDK alone takes it for a notification and never answers),
        # and one over the size limit: each gets Invalid Request with id null, and the server goes on.
        odd = server.unreadable('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}')
        assert odd["id"] is None and odd["error"]["code"] == -32600, odd
        huge = server.unreadable('{"jsonrpc": "2.0", "id": 42, "method": "tools/list", "params": {"pad": "'
                                 + "x" * (4 * 1024 * 1024) + '"}}')
        assert huge["id"] is None and huge["error"]["data"] == {"limit_bytes": 4 * 1024 * 1024}, huge
        for tool in tools:
            for arguments, culprit in _bad_calls(tool):
                reply = server.request("tools/call", {"name": tool["name"], "arguments": arguments})
                result = reply.get("result") or {}
                text = " ".join(c.get("text", "") for c in result.get("content", []))
                assert result.get("isError") is True, f"{tool['name']}({arguments}) did not fail: {reply}"
                assert culprit in text, f"{tool['name']}({arguments}): the error does not name {culprit!r}: {text[:300]}"
        if spec.probe is not None:
            reply = server.request("tools/call", {"name": spec.probe.tool, "arguments": dict(spec.probe.arguments)})
            assert not reply["result"].get("isError") and spec.probe.expect_key in reply["result"]["structuredContent"]
        assert len(server.request("tools/list")["result"]["tools"]) == len(tools)  # still serving after all that
    finally:
        stderr = server.close()
    for line in server.lines:
        message = json.loads(line)  # a non-JSON line would be a stray print
        assert message.get("jsonrpc") == "2.0", line
    assert server.process.returncode == 0, stderr[-2000:]


def test_a_real_grading_over_stdio_leaks_nothing_from_the_solution_processes(tmp_path):
    solution = tmp_path / "noisy.py"
    solution.write_text(
        "import numpy as np\nprint('stdout from the solution at import')\n"
        "def rms_norm(x, weight, eps):\n    print('stdout from every call')\n"
        "    return (x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight).astype(x.dtype)\n"
    )
    server = RawStdio("servers.grader", REPO_ROOT, _env(tmp_path))
    try:
        server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "apex-hygiene", "version": "1"}}, timeout=60)
        server.notify("notifications/initialized")
        reply = server.request("tools/call", {"name": "check_correctness",
                                              "arguments": {"task_id": "cpu-mini__rms_norm", "solution_path": str(solution)}},
                               timeout=240)
    finally:
        server.close()
    assert reply["result"]["structuredContent"]["outcome"] == "ok", reply
    for line in server.lines:
        assert json.loads(line).get("jsonrpc") == "2.0", line


@pytest.mark.parametrize("module", sorted({s.module for s in all_servers()}))
def test_importing_a_server_prints_nothing(module, tmp_path):
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=REPO_ROOT, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == ""


def test_the_gateway_mounts_every_server_under_its_namespace(listed):
    names = {t.name for t in listed[GATEWAY.name]}
    for server in SERVERS:
        assert {f"{server.namespace}_{t.name}" for t in server.tools} <= names


# --- every reply validates against its tool's own output schema -------------------------------

SOLUTIONS = {
    "wrong_answer": "def rms_norm(x, weight, eps):\n    return x.copy()\n",
    "compile_error": "def rms_norm(x, weight, eps)\n    return x\n",
    "runtime_error": "def rms_norm(x, weight, eps):\n    raise ValueError('no')\n",
    "crash": "import os\ndef rms_norm(x, weight, eps):\n    os._exit(3)\n",
    "timeout": "import time\ndef rms_norm(x, weight, eps):\n    time.sleep(60)\n",
    # A grader import no honest solution makes (never executed): tampering, whatever the answer.
    "tampering": "if False:\n    import apex_core\ndef rms_norm(x, weight, eps):\n    return x.copy()\n",
}


def _loose_task() -> Any:
    """cpu-mini's RMSNorm with a tolerance that swamps its reference: the grader refuses such a
    task as its own (infra) error."""
    from apex_core.tasks import get_task

    task = get_task("cpu-mini__rms_norm")
    loose = {dtype: tolerance.model_copy(update={"atol": 1000.0}) for dtype, tolerance in task.tolerances.items()}
    return task.model_copy(update={"id": "cpu-mini__rms_norm_loose", "tolerances": loose})


def _grader_calls(tmp_path: Path) -> list[tuple[str, dict[str, Any], str]]:
    """(tool, arguments, what the reply must show) for every grader tool and every outcome."""
    paths = {}
    for name, body in SOLUTIONS.items():
        paths[name] = tmp_path / f"{name}.py"
        paths[name].write_text(body)
    cpu, canned = "cpu-mini__rms_norm", str(REPO_ROOT / CANNED)
    calls = [
        ("grade_solution", {"task_id": cpu, "solution_path": canned}, "ok"),
        ("grade_solution", {"task_id": cpu, "solution_path": canned}, "cached"),
        ("grade_solution", {"task_id": "cpu-mini__rms_norm_loose", "solution_path": canned}, "infra_error"),
        ("check_correctness", {"task_id": cpu, "solution_path": canned}, "ok"),
        ("benchmark", {"task_id": cpu, "solution_path": canned}, "ok"),
        ("hardware_spec", {}, "arch"),
        ("hardware_spec", {"gpu": "mi355x"}, "arch"),
    ]
    for outcome, path in paths.items():
        arguments = {"task_id": cpu, "solution_path": str(path)}
        calls.append(("grade_solution", {**arguments, "timeout_s": 2} if outcome == "timeout" else arguments, outcome))
    # Last: both verdicts come from the cache by then.
    calls.append(("compare", {"task_id": cpu, "solution_paths": [str(paths["wrong_answer"]), canned]}, "ranking"))
    return calls


WORKLOAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("list_workloads", {}, "workloads"),
    ("benchmark_workload", {"workload": "cpu-mini", "runs": 2}, "tokens_per_s"),
    ("profile_workload", {"workload": "cpu-mini", "calls": 1, "top": 5}, "results_dir"),
    # No results_dir: the newest run under ./results, the one just profiled.
    ("identify_kernels", {"top_k": 5}, "kernels"),
    ("find_kernel_source", {"name": "_rms_norm_forward_kernel"}, "found"),
]
"""The profiler's and the identifier's tools, in an order where each finds what it needs."""

SOURCE_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("find_kernel", {"name": "_sampled_addmm_kernel"}, "found"),  # a Triton kernel every torch 2.x ships
    ("read_source", {"location": "_sampled_addmm_kernel", "context": 5}, "text"),
    ("find_callers", {"name": "_sampled_addmm_kernel", "limit": 5}, "refs"),
    ("find_callees", {"name": "_sampled_addmm_kernel"}, "refs"),
    ("list_launch_sites", {"name": "_sampled_addmm_kernel"}, "sites"),
    ("grep_source", {"pattern": "tl\\.dot\\(", "package": "torch", "limit": 3}, "hits"),
    ("search_docs", {"query": "LDS size per CU of the MI355X", "k": 3}, "hits"),
    ("hardware_facts", {"gpu": "mi355x", "fields": ["lds_per_cu_kib", "compute_units"]}, "facts"),
]
"""The source server's tools."""

PATCHER_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("patch_status", {}, "patched"),
    ("apply_patch", {"task_id": "cpu-mini__rms_norm", "solution_path": str(REPO_ROOT / CANNED)}, "check"),
    ("check_accuracy", {"workload": "cpu-mini", "prompts": 2, "tokens": 4}, "kept"),  # the canned solution passes: kept
    ("run_final_benchmark", {"workload": "cpu-mini", "runs": 2}, "kernel_gain"),  # restores at its end
    ("integrate_winners", {"results_dir": "results"}, "winners"),  # the test's results/ holds no gradings
    ("restore_patches", {}, "restored"),
]
"""The patcher server's tools, in an order that leaves nothing patched."""
PIPELINE_CALLS = [
    ("list_runs", {}, "runs"),
    ("run_pipeline", {"workload": "cpu-mini", "runs": 2, "iterations": 1, "top_k": 1}, "run_id"),  # every stage; patches restored
    ("pipeline_status", {}, "run_id"),
    ("show_leaderboard", {}, "standings"),
    ("export_rl_dataset", {"output_dir": "results/export", "sft": True}, "rows"),
    ("past_experiments", {"task_id": "cpu-mini__rms_norm"}, "past_gradings"),
]
"""The pipeline server's tools: one whole cpu-mini run, then the tools that read it."""

PREPARED_BY: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
    "apex-identifier": [("servers.profiler", "profile_workload", {"workload": "cpu-mini", "calls": 1, "top": 5})],
    "apex-patcher": [("servers.grader", "grade_solution", {"task_id": "cpu-mini__rms_norm", "solution_path": str(REPO_ROOT / CANNED)})],
}
"""What a server's calls stand on that another server makes (module, tool, arguments): identify reads
the newest profiled run, a patch needs the file's signed grading. Made first, in the same folder."""


def _wire(value: Any) -> Any:
    """What a reply carries as JSON: NaN and infinity become null, as in every MCP transport."""
    import pydantic_core

    return json.loads(pydantic_core.to_json(value))


GATEWAY_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("hardware_spec", {"gpu": "mi355x"}, "arch"),
    ("list_workloads", {}, "workloads"),
    ("find_kernel_source", {"name": "_rms_norm_forward_kernel"}, "found"),
    ("find_kernel", {"name": "_sampled_addmm_kernel"}, "found"),
    ("hardware_facts", {"gpu": "mi355x", "fields": ["lds_per_cu_kib"]}, "facts"),
    ("patch_status", {}, "patched"),
    ("list_runs", {}, "runs"),
]
"""One cheap call per mounted server through the gateway: its replies are the servers' own (the
schemas are compared for every tool), so the expensive tools are not run a second time."""


def _validated_replies(module: str, calls: list[tuple[str, dict[str, Any], str]],
                       prepared_by: Sequence[tuple[str, str, dict[str, Any]]] = ()) -> tuple[dict[str, Any], list[tuple[str, str, Any]]]:
    """The server's output schemas and its replies to ``calls``, made in order in one session
    after the other servers' ``prepared_by`` calls."""
    async def session() -> tuple[dict[str, Any], list[tuple[str, str, Any]]]:
        for other, tool, arguments in prepared_by:
            async with Client(importlib.import_module(other).mcp) as client:
                prepared = await client.call_tool(tool, arguments, raise_on_error=False)
                assert not prepared.is_error, (other, tool, prepared.content)
        async with Client(importlib.import_module(module).mcp) as client:
            schemas = {tool.name: tool.outputSchema for tool in await client.list_tools()}
            replies = []
            for tool, arguments, expected in calls:
                reply = await client.call_tool(tool, arguments, raise_on_error=False)
                replies.append((tool, expected, reply))
            return schemas, replies

    schemas, replies = asyncio.run(session())
    for name, expected, reply in replies:
        assert not reply.is_error, (name, reply.content)
        data = _wire(reply.structured_content)
        jsonschema.Draft202012Validator(schemas[name]).validate(data)
        if expected == "cached":
            assert data["cached"] and data["outcome"] == "ok", (name, data)
        else:
            assert data.get("outcome") == expected or expected in data, (name, expected, data.get("reason"))
    return schemas, replies


@pytest.fixture
def every_task(monkeypatch):
    from apex_core.tasks import catalog

    tasks = {**catalog.all_tasks(), "cpu-mini__rms_norm_loose": _loose_task()}
    monkeypatch.setattr(catalog, "all_tasks", lambda: tasks)


@pytest.mark.slow
@pytest.mark.site_packages  # the workload, patcher and pipeline servers profile, patch and run cpu-mini
@pytest.mark.parametrize("name", [s.name for s in SERVERS])
def test_every_reply_of_every_tool_validates_against_its_own_output_schema(name, every_task, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the workload tools write ./results
    spec = next(s for s in SERVERS if s.name == name)
    by_tool = {tool.name: server.name for server in SERVERS for tool in server.tools}
    calls = _grader_calls(tmp_path) + WORKLOAD_CALLS + SOURCE_CALLS + PATCHER_CALLS + PIPELINE_CALLS
    schemas, replies = _validated_replies(spec.module, [c for c in calls if by_tool[c[0]] == name], PREPARED_BY.get(name, []))
    assert {tool for tool, _, _ in replies} == set(schemas), "a tool was left out"


def test_the_gateway_answers_with_each_servers_own_schemas_and_replies(listed, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespaced = {f"{server.namespace}_{tool.name}": (server.name, tool.name) for server in SERVERS for tool in server.tools}
    own = {(server, tool.name): tool.outputSchema for server, tools in listed.items() for tool in tools}
    for tool in listed[GATEWAY.name]:
        assert tool.outputSchema == own[namespaced[tool.name]], f"{tool.name}: the gateway's schema differs from its server's"
    prefix = {tool.name: f"{server.namespace}_{tool.name}" for server in SERVERS for tool in server.tools}
    _, replies = _validated_replies(GATEWAY.module, [(prefix[tool], a, e) for tool, a, e in GATEWAY_CALLS])
    assert {namespaced[tool][0] for tool, _, _ in replies} == {s.name for s in SERVERS}, "a mounted server was not called"

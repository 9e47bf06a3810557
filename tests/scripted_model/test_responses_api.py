"""The scripted model endpoint spoken to over real HTTP as Codex speaks OpenAI's Responses API: the
same script as Claude Code's, its MCP tool names translated both ways."""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from scripted_model import Script, ScriptedModelServer
from scripted_model.responses_api import codex_name

TOOL = "mcp__apex-grader__grade_solution"
SCRIPT = {
    "name": "unit",
    "turns": [
        {"name": "call", "match": {"user_text_contains": "grade it", "tools_include": [TOOL], "system_contains": "Be brief"},
         "reply": [{"thinking": "Grade first."}, {"text": "Grading now."},
                   {"tool_use": {"name": TOOL, "input": {"task_id": "t", "solution_path": "{{ user_text }}"}}}]},
        {"name": "report", "match": {"tool_result_for": TOOL, "tool_result_is_error": False, "tool_result_matches": {"outcome": "ok"}},
         "reply": [{"text": "Score {{ tool_result.score:.1f }}, compiled {{ tool_result.score_breakdown.compiled:g }}."}]},
    ],
}
GRADER = {"type": "namespace", "name": "mcp__apex_grader", "description": "Apex grader",
          "tools": [{"type": "function", "name": "grade_solution", "parameters": {"type": "object"}}]}
SHELL = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}


def _post(url: str, body: Any, path: str = "/v1/responses") -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection(url.removeprefix("http://"), timeout=30)
    connection.request("POST", path, body=json.dumps(body), headers={"content-type": "application/json",
                                                                     "authorization": "Bearer sk-test"})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, data


def _events(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: "):]) for line in data.decode().splitlines() if line.startswith("data: ")]


def _request(*items: dict[str, Any], stream: bool = True) -> dict[str, Any]:
    prompt = [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
              {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context/>"}]},
              {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "please grade it"}]}]
    return {"model": "gpt-test", "stream": stream, "tools": [SHELL, GRADER], "input": [*prompt, *items]}


@pytest.fixture
def endpoint():
    with ScriptedModelServer(Script.model_validate(SCRIPT)) as server:
        yield server


def test_codex_names_an_mcp_tool_by_its_namespace_with_dashes_made_underscores():
    assert codex_name(TOOL) == "mcp__apex_grader__grade_solution"
    assert codex_name("mcp__my.server__read-file") == "mcp__my_server__read_file"
    assert codex_name("exec_command") == "exec_command"


def test_a_turn_streams_as_the_responses_api_does_calling_the_tool_in_its_namespace(endpoint):
    status, headers, data = _post(endpoint.url, _request())
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = _events(data)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    added = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [i["type"] for i in added] == [i["type"] for i in done] == ["reasoning", "message", "function_call"]
    assert added[1]["content"] == [] and added[2]["arguments"] == ""
    assert done[0]["summary"] == [{"type": "summary_text", "text": "Grade first."}]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == done[1]["content"][0]["text"] == "Grading now."
    call = done[2]
    assert (call["namespace"], call["name"]) == ("mcp__apex_grader", "grade_solution") and call["call_id"]
    arguments = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    assert json.loads(arguments) == json.loads(call["arguments"]) == {"task_id": "t", "solution_path": "please grade it"}
    completed = events[-1]["response"]
    assert completed["status"] == "completed" and completed["output"] == done and completed["id"] == events[0]["response"]["id"]
    assert completed["usage"]["total_tokens"] == completed["usage"]["input_tokens"] + completed["usage"]["output_tokens"] > 0


def test_the_next_turn_matches_the_result_under_the_scripts_name_and_quotes_it_without_codexs_header(endpoint):
    call = [e["item"] for e in _events(_post(endpoint.url, _request())[2]) if e["type"] == "response.output_item.done"][2]
    result = {"outcome": "ok", "score": 304.0, "score_breakdown": {"compiled": 20.0}}
    output = [{"type": "input_text", "text": "Wall time: 1.2 seconds\nOutput:"}, {"type": "input_text", "text": json.dumps(result)}]
    status, _, data = _post(endpoint.url, _request(call, {"type": "function_call_output", "call_id": call["call_id"],
                                                          "output": output}, stream=False))
    response = json.loads(data)
    assert status == 200 and response["object"] == "response" and response["status"] == "completed"
    (message,) = response["output"]
    assert message["role"] == "assistant" and message["content"][0]["text"] == "Score 304.0, compiled 20."
    assert [r.answered_by for r in endpoint.requests] == ["turn 1: call", "turn 2: report"]


def test_a_shell_command_that_exits_non_zero_is_an_error_result():
    script = Script.model_validate({"name": "shell", "turns": [
        {"match": {"tool_result_for": "exec_command", "tool_result_is_error": True}, "reply": [{"text": "It said {{ tool_result }}"}]}]})
    shell = {"type": "function_call", "call_id": "call_9", "name": "exec_command", "arguments": "{\"cmd\": \"false\"}"}
    output = "Chunk ID: ab12\nWall time: 0.0 seconds\nProcess exited with code 3\nOriginal token count: 2\nOutput:\nno such file\n"
    with ScriptedModelServer(script) as endpoint:
        status, _, data = _post(endpoint.url, _request(shell, {"type": "function_call_output", "call_id": "call_9",
                                                               "output": output}, stream=False), path="/responses")
    assert status == 200 and json.loads(data)["output"][0]["content"][0]["text"] == "It said no such file\n"


def test_apply_patch_run_as_a_command_loses_both_heads_and_its_exit_code_counts():
    script = Script.model_validate({"name": "patch", "turns": [
        {"match": {"tool_result_for": "exec_command", "tool_result_is_error": False, "tool_result_contains": "A solution.py"},
         "reply": [{"text": "{{ tool_result }}"}]}]})
    patch = {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"}
    output = "Wall time: 0.0 seconds\nOutput:\nExit code: 0\nWall time: 0.1 seconds\nOutput:\nSuccess. Updated the following files:\nA solution.py\n"
    with ScriptedModelServer(script) as endpoint:
        status, _, data = _post(endpoint.url, _request(patch, {"type": "function_call_output", "call_id": "call_1",
                                                               "output": output}, stream=False))
    assert status == 200 and json.loads(data)["output"][0]["content"][0]["text"].startswith("Success. Updated")


def test_a_request_the_script_does_not_expect_is_an_error_in_the_responses_shape(endpoint):
    status, _, data = _post(endpoint.url, {"model": "m", "input": "grade something else", "stream": True})
    error = json.loads(data)["error"]
    assert status == 400 and error["type"] == "invalid_request_error"
    assert "turn 1 (call) does not apply: the user text does not contain 'grade it'" in error["message"]
    status, _, data = _post(endpoint.url, {"model": "m"})
    assert status == 400 and "needs 'model' and an 'input'" in json.loads(data)["error"]["message"]
    assert not endpoint.finished

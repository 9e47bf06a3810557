"""The scripted model endpoint, spoken to over real HTTP as a Messages API client would."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from apex_core.errors import ApexUserError
from scripted_model import Script, ScriptedModelServer, load_script, render_text
from scripted_model.script import SCRIPTS_DIR, TemplateError

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOL = "mcp__apex-grader__grade_solution"

SCRIPT = {
    "name": "unit",
    "turns": [
        {"name": "call", "match": {"user_text_contains": "grade it", "tools_include": [TOOL]},
         "reply": [{"thinking": "Grade first."}, {"text": "Grading now."},
                   {"tool_use": {"name": TOOL, "input": {"task_id": "t", "solution_path": "{{ user_text }}"}}}]},
        {"name": "report", "match": {"tool_result_for": TOOL, "tool_result_matches": {"outcome": "ok"}},
         "reply": [{"text": "Score {{ tool_result.score:.1f }}, compiled {{ tool_result.score_breakdown.compiled:g }}."}]},
    ],
    "side_replies": [{"name": "title", "match": {"model_pattern": "haiku"}, "reply": [{"text": "A title"}]}],
}


def _post(url: str, body: Any, path: str = "/v1/messages", key: str | None = "sk-test") -> tuple[int, dict[str, str], bytes]:
    host = url.removeprefix("http://")
    connection = http.client.HTTPConnection(host, timeout=30)
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    if key:
        headers["x-api-key"] = key
    connection.request("POST", path, body=json.dumps(body), headers=headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, data


def _events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in data.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines() if ": " in line)
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return events


def _assemble(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Rebuild the content blocks from the stream, the way SDKs do."""
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for kind, data in events:
        if kind == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif kind == "content_block_delta":
            delta, block = data["delta"], blocks[data["index"]]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
        elif kind == "content_block_stop" and data["index"] in partial:
            blocks[data["index"]]["input"] = json.loads(partial[data["index"]])
    return [blocks[i] for i in sorted(blocks)]


def _request(text: str, *, stream: bool = True, model: str = "claude-test", extra: list | None = None) -> dict[str, Any]:
    return {"model": model, "max_tokens": 1000, "stream": stream, "tools": [{"name": TOOL, "input_schema": {}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}, *(extra or [])]}


@pytest.fixture
def endpoint(tmp_path):
    with ScriptedModelServer(Script.model_validate(SCRIPT), record_path=tmp_path / "requests.jsonl") as server:
        yield server


def test_a_turn_streams_as_the_messages_api_does(endpoint):
    status, headers, data = _post(endpoint.url, _request("please grade it"))
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = _events(data)
    kinds = [k for k, _ in events]
    assert kinds[:2] == ["message_start", "ping"] and kinds[-2:] == ["message_delta", "message_stop"]
    assert events[0][1]["message"]["role"] == "assistant" and events[0][1]["message"]["content"] == []
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use" and events[-2][1]["usage"]["output_tokens"] > 0
    blocks = _assemble(events)
    assert [b["type"] for b in blocks] == ["thinking", "text", "tool_use"]
    assert blocks[0] == {"type": "thinking", "thinking": "Grade first.", "signature": "scripted"}
    assert blocks[1]["text"] == "Grading now."
    assert blocks[2]["name"] == TOOL and blocks[2]["input"] == {"task_id": "t", "solution_path": "please grade it"}
    assert blocks[2]["id"].startswith("toolu_")


def test_the_next_turn_quotes_the_tool_result_and_side_replies_do_not_consume_turns(endpoint):
    _, _, first = _post(endpoint.url, _request("grade it"))
    call = _assemble(_events(first))[2]
    side_status, _, side = _post(endpoint.url, _request("title please", stream=False, model="claude-haiku-4"))
    assert side_status == 200 and json.loads(side)["content"] == [{"type": "text", "text": "A title"}]
    result = {"outcome": "ok", "score": 304.0, "score_breakdown": {"compiled": 20.0}}
    follow_up = [{"role": "assistant", "content": [call]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": json.dumps(result)}]}]
    status, _, data = _post(endpoint.url, _request("grade it", stream=False, extra=follow_up))
    message = json.loads(data)
    assert status == 200 and message["stop_reason"] == "end_turn" and message["type"] == "message"
    assert message["content"] == [{"type": "text", "text": "Score 304.0, compiled 20."}]
    assert endpoint.finished
    assert [r.answered_by for r in endpoint.requests] == ["turn 1: call", "side: title", "turn 2: report"]


@pytest.mark.parametrize(("body", "status", "message"), [
    (_request("something else"), 400, "turn 1 (call) does not apply: the user text does not contain 'grade it'"),
    ({"model": "m"}, 400, "needs 'model' and a 'messages' list"),
])
def test_a_request_the_script_does_not_expect_is_an_api_error_naming_why(endpoint, body, status, message):
    got, _, data = _post(endpoint.url, body)
    error = json.loads(data)
    assert got == status and error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert message in error["error"]["message"]
    assert endpoint.requests[-1].error and not endpoint.finished


def test_a_missing_key_is_401_and_the_recording_never_holds_credentials(endpoint, tmp_path):
    status, _, _ = _post(endpoint.url, _request("grade it"), key=None)
    assert status == 401
    _post(endpoint.url, _request("grade it"))
    lines = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and lines[1]["headers"]["x-api-key"] == "<redacted>" and "sk-test" not in json.dumps(lines)


def test_count_tokens_and_exhaustion(endpoint):
    status, _, data = _post(endpoint.url, _request("x"), path="/v1/messages/count_tokens")
    assert status == 200 and json.loads(data)["input_tokens"] > 0
    with ScriptedModelServer(load_script("say-hi")) as once:
        assert _post(once.url, _request("hi"))[0] == 200
        status, _, data = _post(once.url, _request("hi again"))
        assert status == 400 and "every scripted turn has been used" in json.loads(data)["error"]["message"]


def test_an_error_turn_returns_that_status():
    script = Script.model_validate({"name": "busy", "turns": [{"error": {"status": 529, "message": "busy now"}},
                                                              {"reply": [{"text": "ok"}]}]})
    with ScriptedModelServer(script) as server:
        status, _, data = _post(server.url, _request("a"))
        assert status == 529 and json.loads(data)["error"] == {"type": "overloaded_error", "message": "busy now"}
        assert _post(server.url, _request("a"))[0] == 200


def test_placeholders_fail_loudly_when_they_name_nothing():
    assert render_text("{{ a.b:.2f }} and {{ a.c.0 }}", {"a": {"b": 1.234, "c": ["x"]}}) == "1.23 and x"
    with pytest.raises(TemplateError, match="nothing at 'missing'"):
        render_text("{{ a.missing }}", {"a": {}})


def test_every_shipped_script_loads_and_bad_scripts_say_where(tmp_path):
    for path in SCRIPTS_DIR.glob("*.yaml"):
        load_script(path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nturns:\n  - reply: []\n")
    with pytest.raises(ApexUserError, match="needs either 'reply' blocks or an 'error'"):
        load_script(bad)
    as_json = tmp_path / "s.json"
    as_json.write_text(json.dumps({"name": "j", "turns": [{"reply": [{"type": "text", "text": "hi"}]}]}))
    assert load_script(as_json).turns[0].reply[0].text == "hi"
    with pytest.raises(ApexUserError, match="shipped scripts: .*grade-cpu-mini-rms-norm"):
        load_script("no-such-script")


def test_the_command_line_prints_the_base_url_and_can_stop_when_done(tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "scripted_model", "--script", "say-hi", "--listen",
                                "127.0.0.1:0", "--record", str(tmp_path / "r.jsonl"), "--exit-when-done"],
                               cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    assert line.startswith("ANTHROPIC_BASE_URL=http://127.0.0.1:")
    assert process.stdout.readline().strip() == f"OPENAI_BASE_URL={line.split('=', 1)[1]}/v1"
    status, _, _ = _post(line.split("=", 1)[1], _request("hello"))
    assert status == 200 and process.wait(timeout=30) == 0
    assert json.loads((tmp_path / "r.jsonl").read_text())["answered_by"] == "turn 1: greet"
    bad = subprocess.run([sys.executable, "-m", "scripted_model", "--script", "nope"], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no script file 'nope'" in bad.stderr

"""OpenAI's Responses API (``POST /v1/responses``), as Codex speaks it.

A request carries ``instructions``, ``tools`` and ``input``: the conversation so far as items
(``message`` with a role and text parts, ``function_call`` with a ``call_id`` and JSON
``arguments``, ``function_call_output`` answering a ``call_id``, ``reasoning``). The reply is a
``response`` whose ``output`` holds ``message``, ``function_call`` and ``reasoning`` items, or
the stream of it: ``response.created``, ``response.in_progress``, per item
``response.output_item.added``, its deltas and ``response.output_item.done``, then
``response.completed`` with the usage.

What is Codex's own (seen in the requests codex 0.171.0 sends): each MCP server's tools come as a
``namespace`` tool named ``mcp__<server>`` (characters outside ``[A-Za-z0-9_]`` made ``_``)
holding one function per tool, and a call names the namespace and the function; scripts write
``mcp__<server>__<tool>``, translated both ways here. A tool's output is headed by lines such as
``Wall time: 0.01 seconds`` and ``Process exited with code 1`` up to a line ``Output:`` (twice
for ``apply_patch`` run as a command); the heads are dropped before matching and quoting, and a
non-zero exit code marks the result as an error (the API has no error flag: a failed MCP call
reads as its message).
"""

from __future__ import annotations

import itertools
import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

from scripted_model.dialect import Event, Reply, chunks
from scripted_model.script import Conversation, Script, ToolResult, tool_result

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
_MCP_NAME = re.compile(r"mcp__(.+?)__(.+)")
_OUTPUT_HEAD = re.compile(r"\A((?:[A-Z][^\n]*\n){0,8}?)Output:(?:\n|\Z)")
_EXIT_CODE = re.compile(r"^(?:Process exited with code|Exit code:) (-?\d+)$", re.MULTILINE)
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
_CALLS = ("function_call", "custom_tool_call")


def codex_name(name: str) -> str:
    """The name Codex offers a script's tool under (namespace and function joined by ``__``)."""
    match = _MCP_NAME.fullmatch(name)
    return f"mcp__{_UNSAFE.sub('_', match[1])}__{_UNSAFE.sub('_', match[2])}" if match else name


def _offered(body: dict[str, Any]) -> dict[str, tuple[str | None, str]]:
    """Each function the request offers: its joined name -> (namespace, name)."""
    offered: dict[str, tuple[str | None, str]] = {}
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and inner.get("name"):
                    offered[f"{tool.get('name')}__{inner['name']}"] = (str(tool.get("name")), str(inner["name"]))
        elif tool.get("name") or tool.get("type"):
            name = str(tool.get("name") or tool.get("type"))
            offered[name] = (None, name)
    return offered


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content
                         if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text"))
    return ""


def _output(item: dict[str, Any], name: str) -> ToolResult:
    output = item.get("output")
    failed = False
    if isinstance(output, dict):  # the {content, success} shape some clients send
        failed = output.get("success") is False
        output = output.get("content")
    text = _text(output)
    while (head := _OUTPUT_HEAD.match(text)) is not None:  # apply_patch run as a command nests a second head
        text = text[head.end():]
        code = _EXIT_CODE.search(head[1])
        failed = failed or (code is not None and int(code[1]) != 0)
    return tool_result(name, text, failed)


class ResponsesApi:
    def problem(self, body: object) -> str | None:
        if not isinstance(body, dict) or not isinstance(body.get("input"), (str, list)) or not body.get("model"):
            return "a Responses request needs 'model' and an 'input' string or list"
        return None

    def read(self, body: dict[str, Any], script: Script) -> Conversation:
        script_names = {codex_name(n): n for n in script.tool_names()}
        raw = body["input"]
        items = [i for i in raw if isinstance(i, dict)] if isinstance(raw, list) else [{"role": "user", "content": raw}]
        system = [_text(body.get("instructions"))]
        user_text = ""
        called: dict[str, str] = {}
        results: list[ToolResult] = []
        latest: list[ToolResult] = []  # the trailing run of outputs: what the request returns now
        for item in items:
            kind = item.get("type") or ("message" if "role" in item else "")
            if kind in _OUTPUTS:
                result = _output(item, called.get(str(item.get("call_id")), ""))
                results.append(result)
                latest.append(result)
                continue
            latest = []
            if kind in _CALLS:
                joined = f"{item['namespace']}__{item.get('name')}" if item.get("namespace") else str(item.get("name"))
                called[str(item.get("call_id"))] = script_names.get(joined, joined)
            elif kind == "message":
                text = _text(item.get("content"))
                if item.get("role") in ("system", "developer"):
                    system.append(text)
                elif item.get("role") == "user" and text:
                    user_text = text
        return Conversation(model=str(body.get("model", "")), system="\n".join(filter(None, system)),
                            tools=tuple(script_names.get(n, n) for n in _offered(body)), user_text=user_text,
                            results=tuple(results), latest_results=tuple(latest))

    # --- replying -------------------------------------------------------------------------------

    def _items(self, reply: Reply) -> list[dict[str, Any]]:
        offered = _offered(reply.request)
        items: list[dict[str, Any]] = []
        for block in reply.blocks:
            suffix = uuid.uuid4().hex[:24]
            if block["type"] == "text":
                items.append({"type": "message", "id": f"msg_{suffix}", "status": "completed", "role": "assistant",
                              "content": [{"type": "output_text", "text": block["text"], "annotations": []}]})
            elif block["type"] == "thinking":
                items.append({"type": "reasoning", "id": f"rs_{suffix}", "summary": [{"type": "summary_text", "text": block["thinking"]}]})
            else:
                joined = codex_name(block["name"])
                split = _MCP_NAME.fullmatch(joined)
                namespace, name = offered.get(joined) or ((f"mcp__{split[1]}", split[2]) if split else (None, joined))
                call = {"type": "function_call", "id": f"fc_{suffix}", "call_id": block["id"], "name": name,
                        "arguments": json.dumps(block["input"]), "status": "completed"}
                items.append({**call, "namespace": namespace} if namespace else call)
        return items

    @staticmethod
    def _response(reply: Reply, response_id: str, output: list[dict[str, Any]], done: bool) -> dict[str, Any]:
        truncated = reply.stop_reason == "max_tokens"
        return {"id": response_id, "object": "response", "created_at": int(time.time()), "model": reply.model,
                "status": ("incomplete" if truncated else "completed") if done else "in_progress",
                "incomplete_details": {"reason": "max_output_tokens"} if done and truncated else None, "error": None,
                "output": output,
                "usage": {"input_tokens": reply.input_tokens, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": reply.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": reply.input_tokens + reply.output_tokens} if done else None}

    def whole(self, reply: Reply) -> dict[str, Any]:
        return self._response(reply, f"resp_{uuid.uuid4().hex[:24]}", self._items(reply), done=True)

    def events(self, reply: Reply) -> Iterator[Event]:
        response_id = f"resp_{uuid.uuid4().hex[:24]}"
        items = self._items(reply)
        sequence = itertools.count()

        def event(kind: str, **data: Any) -> Event:
            return kind, {"type": kind, "sequence_number": next(sequence), **data}

        yield event("response.created", response=self._response(reply, response_id, [], done=False))
        yield event("response.in_progress", response=self._response(reply, response_id, [], done=False))
        for index, item in enumerate(items):
            yield event("response.output_item.added", output_index=index, item=_begun(item))
            where = {"item_id": item["id"], "output_index": index}
            if item["type"] == "message":
                part = item["content"][0]
                yield event("response.content_part.added", **where, content_index=0, part={**part, "text": ""})
                for piece in chunks(part["text"], 24):
                    yield event("response.output_text.delta", **where, content_index=0, delta=piece)
                yield event("response.output_text.done", **where, content_index=0, text=part["text"])
                yield event("response.content_part.done", **where, content_index=0, part=part)
            elif item["type"] == "reasoning":
                for summary_index, part in enumerate(item["summary"]):
                    yield event("response.reasoning_summary_part.added", **where, summary_index=summary_index,
                                part={**part, "text": ""})
                    for piece in chunks(part["text"], 24):
                        yield event("response.reasoning_summary_text.delta", **where, summary_index=summary_index, delta=piece)
                    yield event("response.reasoning_summary_text.done", **where, summary_index=summary_index, text=part["text"])
                    yield event("response.reasoning_summary_part.done", **where, summary_index=summary_index, part=part)
            else:
                for piece in chunks(item["arguments"], 16):
                    yield event("response.function_call_arguments.delta", **where, delta=piece)
                yield event("response.function_call_arguments.done", **where, arguments=item["arguments"])
            yield event("response.output_item.done", output_index=index, item=item)
        yield event("response.completed", response=self._response(reply, response_id, items, done=True))

    def error(self, status: int, kind: str, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def _begun(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as ``response.output_item.added`` announces it: nothing generated yet."""
    empty = {"message": {"content": []}, "reasoning": {"summary": []}, "function_call": {"arguments": ""}}[item["type"]]
    return {**item, **empty, "status": "in_progress"} if "status" in item else {**item, **empty}

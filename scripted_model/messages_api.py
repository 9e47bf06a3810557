"""Anthropic's Messages API (``POST /v1/messages``), as Claude Code speaks it.

A request is a ``messages`` list of user and assistant turns whose content is text or blocks
(``text``, ``tool_use`` with an id, ``tool_result`` naming that id); the reply is one assistant
message, or the stream ``message_start``, ``ping``, ``content_block_start/delta/stop`` per block,
``message_delta`` (the stop reason and usage) and ``message_stop``. Tool names are the script's
own (Claude Code's), so nothing is renamed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from scripted_model.dialect import Event, Reply, chunks
from scripted_model.script import Conversation, Script, ToolResult, tool_result


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _results(message: dict[str, Any], names_by_id: dict[str, str]) -> list[ToolResult]:
    content = message.get("content")
    blocks = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(content, list) else []
    return [tool_result(names_by_id.get(str(b.get("tool_use_id")), ""), _text_of(b.get("content")), bool(b.get("is_error")))
            for b in blocks]


class MessagesApi:
    def problem(self, body: object) -> str | None:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body.get("model"):
            return "a Messages request needs 'model' and a 'messages' list"
        return None

    def read(self, body: dict[str, Any], script: Script) -> Conversation:
        messages = [m for m in body["messages"] if isinstance(m, dict)]
        names_by_id = {str(b.get("id")): str(b.get("name")) for m in messages if m.get("role") == "assistant"
                       and isinstance(m.get("content"), list) for b in m["content"]
                       if isinstance(b, dict) and b.get("type") == "tool_use"}
        users = [m for m in messages if m.get("role") == "user"]
        spoken = [m for m in users if isinstance(m.get("content"), str)
                  or any(isinstance(b, dict) and b.get("type") == "text" for b in m.get("content") or [])]
        return Conversation(
            model=str(body.get("model", "")),
            system=_text_of(body.get("system", "")),
            tools=tuple(str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)),
            user_text=_text_of(spoken[-1].get("content")) if spoken else "",
            results=tuple(r for m in users for r in _results(m, names_by_id)),
            latest_results=tuple(_results(users[-1], names_by_id)) if users else (),
        )

    def whole(self, reply: Reply) -> dict[str, Any]:
        return {"id": f"msg_scripted_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant", "model": reply.model,
                "content": reply.blocks, "stop_reason": reply.stop_reason, "stop_sequence": None,
                "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}

    def events(self, reply: Reply) -> Iterator[Event]:
        start = {**self.whole(reply), "content": [], "stop_reason": None}
        start["usage"] = {**start["usage"], "output_tokens": 1}
        yield "message_start", {"type": "message_start", "message": start}
        yield "ping", {"type": "ping"}
        for index, block in enumerate(reply.blocks):
            yield from self._block(index, block)
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
        yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                                "usage": {"output_tokens": reply.output_tokens}}
        yield "message_stop", {"type": "message_stop"}

    @staticmethod
    def _block(index: int, block: dict[str, Any]) -> Iterator[Event]:
        def start(content_block: dict[str, Any]) -> Event:
            return "content_block_start", {"type": "content_block_start", "index": index, "content_block": content_block}

        def delta(payload: dict[str, Any]) -> Event:
            return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": payload}

        if block["type"] == "text":
            yield start({"type": "text", "text": ""})
            for piece in chunks(block["text"], 24):
                yield delta({"type": "text_delta", "text": piece})
        elif block["type"] == "thinking":
            yield start({"type": "thinking", "thinking": "", "signature": ""})
            for piece in chunks(block["thinking"], 24):
                yield delta({"type": "thinking_delta", "thinking": piece})
            yield delta({"type": "signature_delta", "signature": block["signature"]})
        else:
            yield start({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}})
            for piece in chunks(json.dumps(block["input"]), 16):
                yield delta({"type": "input_json_delta", "partial_json": piece})

    def error(self, status: int, kind: str, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": kind, "message": message}}

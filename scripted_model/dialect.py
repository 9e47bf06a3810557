"""What every API the scripted model speaks must do, and what a rendered reply is.

A dialect reads its API's request body into a ``Conversation`` (the script's terms: which tools
are offered, what the user said, what the tools returned) and writes a ``Reply`` (the script's
content blocks) back in its API's shape, whole or as server-sent events. ``messages_api`` speaks
Anthropic's Messages API (Claude Code), ``responses_api`` OpenAI's Responses API (Codex); the
server picks one by the request's path, and the same script answers either.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from scripted_model.script import Conversation, Script

Event = tuple[str, dict[str, Any]]
"""One server-sent event: its name and its JSON data."""


@dataclass(frozen=True)
class Reply:
    """A scripted turn ready to send: its content blocks (``script.render_blocks``) and what the
    envelope reports."""

    blocks: list[dict[str, Any]]
    stop_reason: str
    model: str
    input_tokens: int
    output_tokens: int
    request: dict[str, Any]
    """The request it answers (a dialect may need the host's own tool names from it)."""


class Dialect(Protocol):
    def problem(self, body: object) -> str | None:
        """Why ``body`` is not a request of this API (None when it is one)."""

    def read(self, body: dict[str, Any], script: Script) -> Conversation: ...

    def whole(self, reply: Reply) -> dict[str, Any]:
        """The reply as one JSON body, for a request that did not ask for a stream."""

    def events(self, reply: Reply) -> Iterator[Event]:
        """The reply as the API streams it."""

    def error(self, status: int, kind: str, message: str) -> dict[str, Any]:
        """An error body as this API shapes it."""


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def chunks(text: str, size: int) -> list[str]:
    """Pieces of ``text`` for delta events (one empty piece for empty text, as the APIs send)."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]

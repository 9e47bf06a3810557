"""Scripts for the scripted model: which assistant turn answers which request, and with what.

A script is data (YAML or JSON): an ordered list of turns, each with conditions on the request it
answers (``match``) and the assistant content to reply with (text, tool calls, thinking) or an
API error to return. Reply text may quote the conversation with ``{{ path }}`` placeholders, e.g.
``{{ tool_result.score_breakdown.compiled }}`` or ``{{ tool_result.speedup:.2f }}``, so a scripted
final message can report what a real tool returned. Side replies answer requests that are not
part of the scripted conversation (a host's background calls) without consuming a turn.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from apex_core.errors import ApexUserError

SCRIPTS_DIR = Path(__file__).resolve().parent / "scripts"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextBlock(_Strict):
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(_Strict):
    type: Literal["tool_use"] = "tool_use"
    name: str = Field(min_length=1)
    input: dict[str, Any] = {}
    id: str | None = None
    """Default: derived from the script, turn and block, so transcripts are reproducible."""


class ThinkingBlock(_Strict):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = "scripted"


Block = Annotated[Union[TextBlock, ToolUseBlock, ThinkingBlock], Field(discriminator="type")]


def _expand_shorthand(value: object) -> object:
    """``- text: hi`` / ``- tool_use: {name, input}`` / ``- thinking: ...`` in script files."""
    if not isinstance(value, list):
        return value
    blocks = []
    for item in value:
        if isinstance(item, dict) and "type" not in item and len(item) == 1:
            (kind, body), = item.items()
            if kind in ("text", "thinking") and isinstance(body, str):
                item = {"type": kind, kind: body}
            elif kind == "tool_use" and isinstance(body, dict):
                item = {"type": "tool_use", **body}
        blocks.append(item)
    return blocks


class Match(_Strict):
    """Conditions on a request; every condition given must hold."""

    user_text_contains: str | None = None
    """The latest user text (not tool results) contains this."""
    tool_result_for: str | None = None
    """The latest user message returns the result of a call to this tool."""
    tool_result_contains: str | None = None
    tool_result_matches: dict[str, Any] | None = None
    """The latest tool result, parsed as JSON, has these keys with these values."""
    tool_result_is_error: bool | None = None
    tools_include: list[str] = []
    """The request offers these tools (names as the host sends them)."""
    system_contains: str | None = None
    model_pattern: str | None = None
    """A regular expression the requested model name must match (e.g. haiku for side calls)."""


class ApiError(_Strict):
    """An error the endpoint returns instead of a message, as the Messages API shapes it."""

    status: int = Field(default=529, ge=400, le=599)
    type: str = "overloaded_error"
    message: str = "scripted error"


class Turn(_Strict):
    name: str = ""
    match: Match = Match()
    reply: list[Block] = []
    error: ApiError | None = None
    stop_reason: Literal["end_turn", "tool_use", "max_tokens", "stop_sequence"] | None = None
    """Default: tool_use when the reply calls a tool, else end_turn."""
    delay_s: float = Field(default=0.0, ge=0, le=600)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: object) -> object:
        if isinstance(data, dict) and "reply" in data:
            data = {**data, "reply": _expand_shorthand(data["reply"])}
        return data

    @model_validator(mode="after")
    def _one_answer(self) -> Turn:
        if bool(self.reply) == (self.error is not None):
            raise ValueError("a turn needs either 'reply' blocks or an 'error', not both")
        return self

    @property
    def effective_stop_reason(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        return "tool_use" if any(isinstance(b, ToolUseBlock) for b in self.reply) else "end_turn"


class Script(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    model: str | None = None
    """Model name reported in replies; default: the one the request asked for."""
    turns: list[Turn] = Field(min_length=1)
    side_replies: list[Turn] = []
    """Answer matching requests that are not the next turn, without consuming it."""


# --- reading a request ---------------------------------------------------------------------------

def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


class Conversation:
    """What a Messages request says, in the terms scripts match and quote."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.messages: list[dict[str, Any]] = [m for m in body.get("messages", []) if isinstance(m, dict)]
        self.tool_names_by_id: dict[str, str] = {}
        for message in self.messages:
            if message.get("role") == "assistant" and isinstance(message.get("content"), list):
                for block in message["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        self.tool_names_by_id[str(block.get("id"))] = str(block.get("name"))

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def tools(self) -> list[str]:
        return [str(t.get("name")) for t in self.body.get("tools", []) or [] if isinstance(t, dict)]

    @property
    def system(self) -> str:
        return _text_of(self.body.get("system", ""))

    def _last_user(self) -> dict[str, Any] | None:
        return next((m for m in reversed(self.messages) if m.get("role") == "user"), None)

    @property
    def user_text(self) -> str:
        """Text of the latest user message that is not only tool results."""
        for message in reversed(self.messages):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str) or any(isinstance(b, dict) and b.get("type") == "text" for b in content or []):
                return _text_of(content)
        return ""

    def tool_results(self, whole_conversation: bool = False) -> list[dict[str, Any]]:
        """Tool results (name, text, JSON when the text parses, error flag) of the latest user
        message, or of every user message in order with ``whole_conversation``."""
        if whole_conversation:
            messages = [m for m in self.messages if m.get("role") == "user"]
        else:
            last = self._last_user()
            messages = [last] if last is not None else []
        blocks = [b for m in messages if isinstance(m.get("content"), list) for b in m["content"]]
        results = []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = _text_of(block.get("content"))
                try:
                    parsed: Any = json.loads(text)
                except (json.JSONDecodeError, TypeError):
                    parsed = text
                results.append({"name": self.tool_names_by_id.get(str(block.get("tool_use_id")), ""), "text": text,
                                "json": parsed, "is_error": bool(block.get("is_error"))})
        return results

    def mismatch(self, match: Match) -> str | None:
        """Why ``match`` does not hold for this request (None when it does)."""
        if match.model_pattern and not re.search(match.model_pattern, self.model):
            return f"model {self.model!r} does not match {match.model_pattern!r}"
        if match.user_text_contains is not None and match.user_text_contains not in self.user_text:
            return f"the user text does not contain {match.user_text_contains!r}"
        missing = [t for t in match.tools_include if t not in self.tools]
        if missing:
            return f"the request does not offer the tools {missing}"
        if match.system_contains is not None and match.system_contains not in self.system:
            return f"the system prompt does not contain {match.system_contains!r}"
        wants_result = (match.tool_result_for, match.tool_result_contains, match.tool_result_matches, match.tool_result_is_error)
        if any(w is not None for w in wants_result):
            results = self.tool_results()
            if match.tool_result_for is not None:
                results = [r for r in results if r["name"] == match.tool_result_for]
            if not results:
                return f"the request returns no result of {match.tool_result_for or 'any tool'}"
            result = results[-1]
            if match.tool_result_is_error is not None and result["is_error"] != match.tool_result_is_error:
                return f"the tool result's error flag is {result['is_error']}: {result['text'][:300]}"
            if match.tool_result_contains is not None and match.tool_result_contains not in result["text"]:
                return f"the tool result does not contain {match.tool_result_contains!r}: {result['text'][:300]}"
            if match.tool_result_matches is not None:
                data = result["json"] if isinstance(result["json"], dict) else {}
                wrong = {k: data.get(k) for k, v in match.tool_result_matches.items() if data.get(k) != v}
                if wrong:
                    return f"the tool result has {wrong}, not {match.tool_result_matches}"
        return None

    def context(self) -> dict[str, Any]:
        """What ``{{ ... }}`` placeholders can quote."""
        results = self.tool_results()
        return {
            "tool_result": results[-1]["json"] if results else None,
            # Every tool's latest result in the conversation, so a last turn can quote them all.
            "tool_results": {r["name"]: r["json"] for r in self.tool_results(whole_conversation=True)},
            "user_text": self.user_text,
            "model": self.model,
        }


# --- rendering a reply ---------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][\w.\-]*)\s*(?::([^}]*))?\}\}")


class TemplateError(ApexUserError):
    """A placeholder that names nothing in the conversation."""


def render_text(text: str, context: dict[str, Any]) -> str:
    def substitute(match: re.Match[str]) -> str:
        path, spec = match.group(1), (match.group(2) or "").strip()
        value: Any = context
        for part in path.split("."):
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                raise TemplateError(f"placeholder {{{{ {path} }}}}: nothing at {part!r} in the conversation")
        if isinstance(value, (dict, list)):
            return json.dumps(value)
        try:
            return format(value, spec) if spec else str(value)
        except (ValueError, TypeError) as error:
            raise TemplateError(f"placeholder {{{{ {path}:{spec} }}}}: {error}") from None

    return _PLACEHOLDER.sub(substitute, text)


def _render_value(value: Any, context: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return render_text(value, context)
    if isinstance(value, list):
        return [_render_value(v, context) for v in value]
    if isinstance(value, dict):
        return {k: _render_value(v, context) for k, v in value.items()}
    return value


def render_blocks(script: Script, turn_index: int, turn: Turn, context: dict[str, Any]) -> list[dict[str, Any]]:
    """The turn's reply as Messages API content blocks, placeholders filled in."""
    blocks: list[dict[str, Any]] = []
    for index, block in enumerate(turn.reply):
        if isinstance(block, TextBlock):
            blocks.append({"type": "text", "text": render_text(block.text, context)})
        elif isinstance(block, ThinkingBlock):
            blocks.append({"type": "thinking", "thinking": render_text(block.thinking, context), "signature": block.signature})
        else:
            digest = hashlib.sha256(f"{script.name}/{turn_index}/{index}".encode()).hexdigest()[:24]
            blocks.append({"type": "tool_use", "id": block.id or f"toolu_{digest}", "name": block.name,
                           "input": _render_value(block.input, context)})
    return blocks


def load_script(path: Path | str) -> Script:
    """A script from a YAML or JSON file, or by name from the scripts shipped with Apex."""
    candidate = Path(path)
    if not candidate.exists() and not candidate.suffix:
        candidate = SCRIPTS_DIR / f"{path}.yaml"
    if not candidate.is_file():
        shipped = sorted(p.stem for p in SCRIPTS_DIR.glob("*.yaml"))
        raise ApexUserError(f"no script file {str(path)!r}; give a path or one of the shipped scripts: {', '.join(shipped)}")
    try:
        data = yaml.safe_load(candidate.read_text(encoding="utf-8"))  # JSON is YAML too
    except yaml.YAMLError as error:
        raise ApexUserError(f"{candidate} is not valid YAML/JSON: {error}") from None
    try:
        return Script.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApexUserError(f"{candidate}: {where}: {first['msg']}") from None

"""Scripts for the scripted model: which assistant turn answers which request, and with what.

A script is data (YAML or JSON): an ordered list of turns, each with conditions on the request it
answers (``match``) and the assistant content to reply with (text, tool calls, thinking) or an
API error to return. Reply text may quote the conversation with ``{{ path }}`` placeholders, e.g.
``{{ tool_result.score_breakdown.compiled }}`` or ``{{ tool_result.speedup:.2f }}``, so a scripted
final message can report what a real tool returned. Side replies answer requests that are not
part of the scripted conversation (a host's background calls) without consuming a turn.

Scripts name MCP tools ``mcp__<server>__<tool>`` (as Claude Code does). A host that names them its
own way (Codex: the namespace ``mcp__<server>`` with ``-`` made ``_``, then the tool) has them
translated both ways by its API dialect, so one script can be served to either host; built-in
tools (Claude Code's ``Write``, Codex's ``exec_command``) are the host's own and scripts name them
as that host does.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
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
    """The request offers these tools (MCP tools as ``mcp__<server>__<tool>``, whatever the host)."""
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

    def tool_names(self) -> set[str]:
        """Every tool name the script calls, matches on or offers, as written: a dialect whose host
        names tools its own way maps the host's names back onto these."""
        names: set[str] = set()
        for turn in [*self.turns, *self.side_replies]:
            names.update(b.name for b in turn.reply if isinstance(b, ToolUseBlock))
            names.update(turn.match.tools_include)
            if turn.match.tool_result_for is not None:
                names.add(turn.match.tool_result_for)
        return names


# --- what a request says -------------------------------------------------------------------------

@dataclass(frozen=True)
class ToolResult:
    """One tool's result as the host sent it back, under the name the script knows the tool by."""

    name: str
    text: str
    json: Any
    """The text parsed as JSON, or the text itself when it is not JSON."""
    is_error: bool


def tool_result(name: str, text: str, is_error: bool) -> ToolResult:
    try:
        parsed: Any = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        parsed = text
    return ToolResult(name=name, text=text, json=parsed, is_error=is_error)


@dataclass(frozen=True)
class Conversation:
    """A request in the terms scripts match and quote, whichever API it came in (the dialects in
    ``messages_api`` and ``responses_api`` read their bodies into this). Tool names are the
    script's: a dialect maps the names its host uses back to the ones the script was written with."""

    model: str = ""
    system: str = ""
    tools: tuple[str, ...] = ()
    """The tools the request offers."""
    user_text: str = ""
    """Text of the latest user message that is not only tool results."""
    results: tuple[ToolResult, ...] = ()
    """Every tool result in the conversation, in order."""
    latest_results: tuple[ToolResult, ...] = ()
    """The results the request returns now (of the model's latest tool calls)."""

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
            results = [r for r in self.latest_results if match.tool_result_for in (None, r.name)]
            if not results:
                return f"the request returns no result of {match.tool_result_for or 'any tool'}"
            result = results[-1]
            if match.tool_result_is_error is not None and result.is_error != match.tool_result_is_error:
                return f"the tool result's error flag is {result.is_error}: {result.text[:300]}"
            if match.tool_result_contains is not None and match.tool_result_contains not in result.text:
                return f"the tool result does not contain {match.tool_result_contains!r}: {result.text[:300]}"
            if match.tool_result_matches is not None:
                data = result.json if isinstance(result.json, dict) else {}
                wrong = {k: data.get(k) for k, v in match.tool_result_matches.items() if data.get(k) != v}
                if wrong:
                    return f"the tool result has {wrong}, not {match.tool_result_matches}"
        return None

    def context(self) -> dict[str, Any]:
        """What ``{{ ... }}`` placeholders can quote."""
        return {
            "tool_result": self.latest_results[-1].json if self.latest_results else None,
            # Every tool's latest result in the conversation, so a last turn can quote them all.
            "tool_results": {r.name: r.json for r in self.results},
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
    """The turn's reply as content blocks (text, thinking, tool_use with an id), placeholders filled
    in: the Messages API's shape, which the other dialects translate into theirs."""
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

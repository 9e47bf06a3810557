"""The tools a policy may call inside an episode, each answered as text it reads next.

The read-only ones are the source explorer's and the documentation search's own functions (the
apex-source MCP server calls the same ones). ``check`` and ``benchmark`` grade a draft through the
episode's executor on the public shapes only, so no tool call tells the policy anything about the
hidden shapes a submission is judged on. A bad argument is the tool's one-line error, never an
exception in the trainer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from apex_core.errors import ApexUserError
from apex_core.executors import Executor, GradingRequest, SolutionContent
from apex_core.grader import GradeOptions, GradeResult
from apex_core.rl.models import ToolName
from apex_core.tasks.schema import Task

TOOL_DESCRIPTIONS: dict[ToolName, str] = {
    "find_kernel": 'where a kernel or function is defined in the installed packages; arguments {"name": str}',
    "read_source": 'numbered source lines; arguments {"location": "PATH:START-END or a function name", "context": int}',
    "grep_source": 'search the installed packages line by line; arguments {"pattern": regex, "package": str, "limit": int}',
    "search_docs": 'the skills, docs, hardware facts and kernel docstrings; arguments {"query": str, "k": int}',
    "check": 'grade a draft for correctness on the public shapes, no timing, no reward; arguments {"code": str}',
    "benchmark": 'grade a draft for correctness and speed on the public shapes, no reward; arguments {"code": str}',
}

_EXPLORER_TTL_S = 300.0
_explorer_cache: tuple[float, Any] | None = None
_explorer_lock = threading.Lock()


def _explorer() -> Any:
    """One source explorer per process, rebuilt every few minutes (building it reads the index)."""
    global _explorer_cache
    from apex_core.sources.explorer import SourceExplorer

    with _explorer_lock:
        now = time.monotonic()
        if _explorer_cache is None or now - _explorer_cache[0] > _EXPLORER_TTL_S:
            _explorer_cache = (now, SourceExplorer.build())
        return _explorer_cache[1]


def _text(value: Any) -> str:
    if isinstance(value, BaseModel):
        return value.model_dump_json(indent=1)
    if isinstance(value, list) and all(isinstance(v, BaseModel) for v in value):
        return json.dumps([v.model_dump(mode="json") for v in value], indent=1)
    return str(value)


def _argument(arguments: dict[str, Any], name: str, kind: type, default: Any = ...) -> Any:
    value = arguments.get(name, default)
    if value is ...:
        raise ApexUserError(f"missing argument {name!r} ({kind.__name__})")
    if value is not None and not isinstance(value, kind):
        raise ApexUserError(f"argument {name!r} must be {kind.__name__}, not {type(value).__name__}")
    return value


def draft_options(timing: bool) -> GradeOptions:
    """A draft's grading: public shapes only, with or without timing."""
    return GradeOptions(timing=timing, hidden_shapes=False)


def grade_code(executor: Executor, task: Task, code: str, options: GradeOptions, target: str | None) -> GradeResult:
    request = GradingRequest(task_id=task.id, solution=SolutionContent(name=task.solution_filename, content=code.encode()),
                             options=options, target=target if task.needs_gpu else None)
    return executor.grade(request).result


def draft_verdict(result: GradeResult) -> str:
    """A draft's verdict as the policy reads it: the outcome, the speed where timed, the reason."""
    parts = [f"outcome: {result.outcome.value}", f"correct: {result.correct}"]
    if result.speedup is not None:
        parts.append(f"speedup: {result.speedup:.3f}x")
    if result.reason:
        parts.append(f"reason: {result.reason[:1500]}")
    return "\n".join(parts)


def run_tool(tool: ToolName, arguments: dict[str, Any], task: Task, executor: Executor, target: str | None) -> str:
    """The tool's answer as text; ApexUserError (a bad argument, nothing found) says why in one line."""
    calls: dict[str, Callable[[], Any]] = {
        "find_kernel": lambda: _explorer().find(_argument(arguments, "name", str)),
        "read_source": lambda: _explorer().show(_argument(arguments, "location", str),
                                                context=_argument(arguments, "context", int, 20)),
        "grep_source": lambda: _explorer().grep(_argument(arguments, "pattern", str), package=_argument(arguments, "package", str, None),
                                                limit=min(_argument(arguments, "limit", int, 50), 200)),
        "search_docs": lambda: _search_docs(_argument(arguments, "query", str), min(_argument(arguments, "k", int, 5), 20)),
        "check": lambda: draft_verdict(grade_code(executor, task, _argument(arguments, "code", str), draft_options(False), target)),
        "benchmark": lambda: draft_verdict(grade_code(executor, task, _argument(arguments, "code", str), draft_options(True), target)),
    }
    unknown = set(arguments) - _KNOWN_ARGUMENTS[tool]
    if unknown:
        raise ApexUserError(f"{tool} takes {', '.join(sorted(_KNOWN_ARGUMENTS[tool]))}; not {', '.join(sorted(unknown))}")
    try:
        return _text(calls[tool]())
    except ValidationError as error:
        raise ApexUserError(f"{tool}: {error.errors()[0]['msg']}") from None


def _search_docs(query: str, k: int) -> Any:
    from apex_core.docsearch import search

    return search(query, k)


_KNOWN_ARGUMENTS: dict[str, set[str]] = {
    "find_kernel": {"name"}, "read_source": {"location", "context"}, "grep_source": {"pattern", "package", "limit"},
    "search_docs": {"query", "k"}, "check": {"code"}, "benchmark": {"code"},
}

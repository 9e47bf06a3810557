"""Functions whose parameters are made rather than written out.

A setting declared once on a pydantic model becomes a command's option (typer) and a tool's
parameter (FastMCP); both read a function's parameters from ``inspect.signature`` and its type
hints, so a function given a made ``__signature__`` and matching ``__annotations__`` takes exactly
the model's settings, under any of the two."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def parameters_of(function: Callable[..., Any]) -> list[inspect.Parameter]:
    """A written function's parameters, keyword-only so they can sit before or after made ones."""
    return [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in inspect.signature(function, eval_str=True).parameters.values()]


def with_parameters(parameters: list[inspect.Parameter], returns: Any = None) -> Callable[[F], F]:
    """Give ``function(**arguments)`` these parameters, as typer and FastMCP read them."""

    def decorate(function: F) -> F:
        function.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
        function.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": returns}
        return function

    return decorate

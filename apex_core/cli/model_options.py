"""Command options made from a settings model's fields.

A setting of ``apex run`` (its name, type, default, bounds and help) is declared once, as a field of
``RunConfig``; the commands that take it (``apex run``, ``apex optimize-kernel``) and the pipeline
server's tool derive their parameters from that field, so the three cannot drift apart (they
did: two copies hard-coded defaults that the model had changed). What the command line needs
differently is done here: a tuple is one comma-separated option, a bool a ``--x/--no-x`` pair,
and the bounds are shown in the help, while the model still checks every value.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin

import annotated_types
import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

def comma_list(value: str | None) -> tuple[str, ...]:
    """``"a, b,,c"`` as ``("a", "b", "c")``; nothing given is ``()``."""
    return tuple(part.strip() for part in value.split(",") if part.strip()) if value else ()


def option_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _optional_inner(annotation: Any) -> Any | None:
    """``X`` of ``X | None``; None when the annotation is not optional."""
    if get_origin(annotation) in (Union, types.UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        if len(inner) == 1 and len(get_args(annotation)) == 2:
            return inner[0]
    return None


def _is_list(annotation: Any) -> bool:
    return get_origin(annotation) in (tuple, list)


def _bounds(info: FieldInfo) -> str:
    """The field's numeric bounds as help text, e.g. ``1-50`` or ``> 0``."""
    low = high = None
    for rule in info.metadata:
        if isinstance(rule, annotated_types.Ge):
            low = f"{rule.ge}"
        elif isinstance(rule, annotated_types.Gt):
            low = f"> {rule.gt}"
        elif isinstance(rule, annotated_types.Le):
            high = f"{rule.le}"
    if low is not None and high is not None and not low.startswith(">"):
        return f"{low}-{high}"
    if low is not None:
        return low if low.startswith(">") else f">= {low}"
    return f"<= {high}" if high is not None else ""


def _choices(annotation: Any) -> tuple[str, ...]:
    inner = get_args(annotation)[0] if _is_list(annotation) else annotation
    return tuple(str(v) for v in get_args(inner)) if get_origin(inner) is Literal else ()


def option_help(info: FieldInfo) -> str:
    """The model's description as a sentence, with its choices and bounds."""
    if not info.description:
        raise TypeError("a setting without a description cannot become an option: give the field one")
    text = info.description[0].upper() + info.description[1:]
    annotation = _optional_inner(info.annotation) or info.annotation
    notes = []
    if _is_list(annotation):
        choices = _choices(annotation)
        notes.append(f"comma-separated: {', '.join(choices)}" if choices else "comma-separated")
    bounds = _bounds(info)
    if bounds:
        notes.append(bounds)
    return text + (f" ({'; '.join(notes)})" if notes else "") + "."


def _cli_type(annotation: Any) -> Any:
    inner = _optional_inner(annotation)
    if inner is not None:
        return Optional[_cli_type(inner)]
    return str if _is_list(annotation) else annotation


def _cli_default(info: FieldInfo, annotation: Any) -> Any:
    default = info.get_default(call_default_factory=True)
    if _is_list(_optional_inner(annotation) or annotation):
        return ",".join(str(v) for v in default) if default else None
    return default


def options_from(model: type[BaseModel], names: Iterable[str], *, defaults: Mapping[str, Any] | None = None) -> list[inspect.Parameter]:
    """Keyword parameters for a typer command, one per field in ``names``, in that order.

    ``defaults`` replaces a field's default on this command only (``apex run`` takes no workload
    when it resumes)."""
    parameters = []
    for name in names:
        info = model.model_fields[name]
        annotation = _cli_type(info.annotation)
        if name in (defaults or {}):
            default = defaults[name]  # type: ignore[index]
            annotation = Optional[annotation] if default is None else annotation
        else:
            default = _cli_default(info, info.annotation)
        if default is None and _optional_inner(annotation) is None:
            annotation = Optional[annotation]
        flags = (f"{option_name(name)}/--no-{name.replace('_', '-')}",) if info.annotation is bool else (option_name(name),)
        option = typer.Option(*flags, help=option_help(info))
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=Annotated[annotation, option]))
    return parameters


def settings_from(model: type[BaseModel], values: Mapping[str, Any]) -> dict[str, Any]:
    """The model's input from a command's option values: comma lists split into tuples, paths as text."""
    settings: dict[str, Any] = {}
    for name, value in values.items():
        info = model.model_fields[name]
        annotation = _optional_inner(info.annotation) or info.annotation
        if value is None and annotation is info.annotation and not info.is_required():
            continue  # an option left empty whose field cannot be None: the field's default
        if _is_list(annotation) and isinstance(value, str):
            value = comma_list(value)
        elif value is not None and not isinstance(value, (str, int, float, bool, tuple)):
            value = str(value)
        settings[name] = value
    return settings

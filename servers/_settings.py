"""Tool parameters made from a settings model's fields (``RunConfig``): a tool takes a setting
with the model's own type, bounds, default and description, so a tool, the command line and the
model cannot disagree about it. ``apex_core/cli/model_options.py`` does the same for commands."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, Field


def tool_parameters(model: type[BaseModel], names: Iterable[str], *, rename: Mapping[str, str] | None = None) -> list[inspect.Parameter]:
    """Keyword parameters for a tool function, one per field; ``rename`` gives a field another name on the tool."""
    parameters = []
    for name in names:
        info = model.model_fields[name]
        if not info.description:
            raise TypeError(f"{model.__name__}.{name} has no description: a tool parameter needs one for the model to read")
        described = Field(description=info.description[0].upper() + info.description[1:] + ".")
        annotation = Annotated[(info.annotation, *info.metadata, described)]  # type: ignore[valid-type]
        default = inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True)
        parameters.append(inspect.Parameter((rename or {}).get(name, name), inspect.Parameter.KEYWORD_ONLY,
                                            default=default, annotation=annotation))
    return parameters


def settings_of(model: type[BaseModel], arguments: Mapping[str, Any], *, rename: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The model's input from a tool call's arguments (its renamed parameters back to field names)."""
    field_of = {tool_name: field for field, tool_name in (rename or {}).items()}
    return {field_of.get(name, name): value for name, value in arguments.items()}

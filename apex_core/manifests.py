"""Reading a manifest: a TOML file whose ``[[table]]`` entries each become one pydantic model.

The documentation PDFs (docs_index/manifest.toml) and the source checkouts
(apex_core/sources/checkouts.toml) are both lists a person edits by hand, so both fail the same
way on a mistake: one line naming the file, what is wrong and where to look, never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from apex_core.errors import ApexUserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

Entry = TypeVar("Entry", bound=BaseModel)


def read_entries(path: Path, table: str, model: type[Entry], *, what: str, help_hint: str, unique: str) -> list[Entry]:
    """The ``[[table]]`` entries of ``path`` as ``model``s, each ``name`` used once.

    ``what`` names the manifest in messages ("PDF", "checkouts"), ``help_hint`` says where its
    format is described, ``unique`` what the ``name`` is ("file name", "folder name").
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        entries = [model.model_validate(entry) for entry in data.get(table, [])]
    except FileNotFoundError:
        raise ApexUserError(f"{path}: no such manifest; it lists its entries as [[{table}]] tables") from None
    except (tomllib.TOMLDecodeError, ValidationError) as error:
        why = error.errors()[0]["msg"] if isinstance(error, ValidationError) else str(error).splitlines()[0]
        raise ApexUserError(f"{path}: not a valid {what} manifest ({why}); {help_hint}") from None
    names = [getattr(entry, "name") for entry in entries]
    if len(set(names)) != len(names):
        raise ApexUserError(f"{path}: two entries share a {unique}; each needs its own")
    return entries

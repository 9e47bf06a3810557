"""Records quoted into a prompt as data: one fenced JSON block, never prose.

What earlier gradings measured is worth showing an agent. Shown as sentences, though, it would
read like the prompt's own instructions. Each record is one line of JSON inside a ```json fence,
under a heading that says it is data. Backticks are escaped inside the JSON (as ``\\u0060``), so
no value can close the fence and go on as prompt text. Callers pass pydantic models whose fields
are numbers and closed vocabularies (``apex_core.pipeline.knowledge.PastGrading``); the fence is
the second defence, not the first.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel


def quoted_records(records: Sequence[BaseModel]) -> str:
    """``records`` as a fenced JSON array, one record per line."""
    lines = [r.model_dump_json().replace("`", "\\u0060") for r in records]  # NaN and infinity are null
    return "```json\n[\n" + ",\n".join(f" {line}" for line in lines) + "\n]\n```"

"""The hardware model's facts as passages: every number of every GPU, with its public source.

One passage per GPU says what the part is (vendor, arch, family, notes); one per sourced number
says the number in words, with its unit and the document it was read from, so "LDS size of the
MI355X" finds "AMD Instinct MI355X (mi355x, gfx950, CDNA4): LDS per CU is 160 KiB. Source: ...".
The line range is the line of ``apex_core/hardware/specs.py`` that sets the number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from apex_core.hardware import specs as specs_module
from apex_core.hardware.facts import field_words
from apex_core.hardware.specs import GPU_SPECS, SOURCED_FIELDS, GpuSpec

SPECS_FILE = Path(specs_module.__file__).resolve()

@dataclass(frozen=True)
class Fact:
    section: str
    text: str
    line: int | None


def hardware_facts() -> list[Fact]:
    """A passage for each GPU of the hardware model and one for each of its sourced numbers."""
    lines = SPECS_FILE.read_text(encoding="utf-8").splitlines()
    facts: list[Fact] = []
    for spec in GPU_SPECS:
        start = _line_of(lines, rf'^\s*key="{re.escape(spec.key)}"', 0)
        title = f"{spec.product_name} ({spec.key}, {spec.arch}, {spec.family})"
        overview = (f"{title}: a {spec.vendor.upper()} GPU of the {spec.family} family, architecture {spec.arch}, "
                    f"{spec.memory_gb:g} GB {spec.memory_type}. Name patterns: {', '.join(spec.name_patterns)}.")
        if spec.notes:
            overview += f" Notes: {spec.notes}"
        facts.append(Fact(f"{spec.key}", overview, start))
        for field in SOURCED_FIELDS:
            value = getattr(spec, field)
            if value is None:
                continue
            words, unit = field_words(field)
            line = _line_of(lines, rf"^\s*{field}=", start - 1 if start else 0)
            facts.append(Fact(f"{spec.key} {field}", _fact_text(title, spec, field, words, value, unit), line))
    return facts


def _fact_text(title: str, spec: GpuSpec, field: str, words: str, value: object, unit: str) -> str:
    amount = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{title}: {words} is {amount}{' ' + unit if unit else ''}. Source: {spec.sources[field]}."


def _line_of(lines: list[str], pattern: str, after: int) -> int | None:
    """1-based number of the first line from index ``after`` on that matches ``pattern``."""
    compiled = re.compile(pattern)
    for index in range(after, len(lines)):
        if compiled.search(lines[index]):
            return index + 1
    return None

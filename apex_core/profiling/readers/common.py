"""What the readers of other profilers' files share: opening a file, units, one-line errors."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from apex_core.errors import ApexUserError

#: Time units as the tools spell them, in microseconds.
UNIT_US = {
    "ns": 1e-3, "nsecond": 1e-3, "nanosecond": 1e-3,
    "us": 1.0, "usecond": 1.0, "microsecond": 1.0,
    "ms": 1e3, "msecond": 1e3, "millisecond": 1e3,
    "s": 1e6, "second": 1e6,
}


class ProfileFormatError(ApexUserError):
    """A profiler output file that is missing or not in the format its reader expects."""


def read_text(path: Path, what: str) -> str:
    """The file's text, or a one-line error naming the format that was expected."""
    if not path.exists():
        raise ProfileFormatError(f"{path} does not exist (expected {what})")
    if not path.is_file():
        raise ProfileFormatError(f"{path} is not a file (expected {what})")
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ProfileFormatError(f"{path} is not text (expected {what})") from None


def csv_rows(lines: list[str]) -> list[dict[str, str]]:
    """CSV rows from the header line on (``lines[0]`` is the header)."""
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def number(text: str | None, path: Path, column: str) -> float:
    """A number as the tools print it (``1,234.5`` included), or a one-line error."""
    try:
        return float((text or "").replace(",", "").strip())
    except ValueError:
        raise ProfileFormatError(f"{path}: column {column!r} holds {text!r}, not a number") from None


def unit_us(unit: str, path: Path) -> float:
    try:
        return UNIT_US[unit.strip().lower()]
    except KeyError:
        raise ProfileFormatError(f"{path}: unknown time unit {unit!r} (known: {', '.join(sorted(UNIT_US))})") from None

"""The errors a user (or an agent) can cause, and how they are worded.

Every user mistake becomes one ``ApexUserError`` with a message that says what is wrong and what
would be right; the CLI prints it on one line and exits 2, and MCP servers turn it into a tool
error the model can act on. Anything else that escapes is a bug in Apex, not the user's fault.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ApexUserError(Exception):
    """Bad input from the person or agent driving Apex (exit code 2, never a traceback)."""


class UnknownNameError(ApexUserError):
    """A name (task id, GPU arch, model, ...) that is not in its catalogue."""

    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.known = sorted(known)
        super().__init__(unknown_name_message(kind, name, self.known))


class NotFoundError(ApexUserError):
    """What was asked for is not there (a kernel, a definition, a match): the CLI exits 1 for it, as
    grep does when nothing matches, so a script tells "nothing found" (1) from a mistake (2)."""


class TaskDefinitionError(ApexUserError):
    """A task definition file that cannot be used as it is."""


class SolutionFileError(ApexUserError):
    """A solution path that is missing, unreadable or of the wrong kind."""


class AgentUnavailableError(ApexUserError):
    """The requested agent backend cannot run on this machine."""


def nearest(name: str, known: Iterable[str], limit: int = 3) -> list[str]:
    """Closest known names first; substring matches count even when the edit distance is large."""
    known = list(known)
    close = difflib.get_close_matches(name, known, n=limit, cutoff=0.5)
    lowered = name.lower()
    for candidate in known:
        if len(close) >= limit:
            break
        if candidate not in close and lowered and (lowered in candidate.lower() or candidate.lower() in lowered):
            close.append(candidate)
    return close


def unknown_name_message(kind: str, name: str, known: list[str]) -> str:
    suggestions = nearest(name, known)
    if suggestions:
        hint = "did you mean " + ", ".join(repr(s) for s in suggestions) + "?"
    elif len(known) <= 12:
        hint = "known: " + ", ".join(known)
    else:
        hint = f"{len(known)} are known; list them with the matching 'list' command"
    return f"unknown {kind} {name!r}: {hint}"

"""Searching the indexed files line by line, and doing it for a user's pattern in a child process
under a time limit.

Why a child process: Python's ``re`` backtracks, so a pattern such as ``(a+)+$`` against a long
line of a's takes exponential time, and ``re`` holds the GIL while it matches: run inside the
source server, one such search would pin a core and stop every other request from being answered
(issue 28). A child process is killed when its time is up (:data:`SEARCH_TIMEOUT_S`), and while the
server's thread waits for it (a blocking wait, which releases the GIL) the server goes on answering.
The child also caps its own CPU time (``RLIMIT_CPU``), so it dies even if its parent died first.
Starting it costs about 0.05 s of CPU (``python -I -S``: no site-packages, nothing but the
standard library and this package), a sixth of a search that reads every file of torch.

Why not a linear-time engine: RE2 (``google-re2``) cannot backtrack badly, but it has no
lookaround and no backreferences, and the tools have always promised "a Python regular
expression". The ``regex`` module has a time-out, but it is another engine with its own edge cases
and would be one more dependency to pin. ``re`` in a killable process keeps exactly the syntax
users know and needs nothing new.

The explorer's own searches (an escaped name followed by ``(``, a ``def NAME(``) cannot backtrack
badly; they use :func:`scan_files` in process.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from apex_core.errors import ApexUserError
from apex_core.sources.real_paths import read_text_inside

SEARCH_TIMEOUT_S = 10.0
"""Wall-clock time one search may take. A search that reads every file of torch, triton and
transformers takes 0.3 s with the files in the page cache (docs/sources.md, "Figures")."""
MAX_FILE_BYTES = 4 * 1024**2
"""Generated files larger than this (amalgamations, tables) are not searched line by line."""
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
"""The folder holding ``apex_core``, which the child puts first on its path."""
_CHILD = f"import sys; sys.path.insert(0, {_PACKAGE_PARENT!r}); from apex_core.sources.grep import main; sys.exit(main())"
_NO_PREFILTER = re.compile(r"\\[AZ]|\(\?<?[=!]")
"""Patterns whose match on a line may not be a match on the whole text: ``\\A``, ``\\Z`` and
lookarounds, which can see past a line's end there."""


class ScanCounter:
    """How many files a scan read (a generator cannot return it alongside its matches)."""

    def __init__(self) -> None:
        self.files = 0


class SearchOutcome(NamedTuple):
    matches: list[tuple[str, int]]
    """(path, line number) of each matching line, in the order the files were given."""
    files_searched: int


def scan_files(regex: re.Pattern[str], files: Iterable[tuple[str, str]], *, limit: int, needle: str | None = None,
               max_bytes: int = MAX_FILE_BYTES, counter: ScanCounter | None = None) -> Iterator[tuple[str, int]]:
    """(path, line number) of each line of ``files`` ((path, real root of its tree) pairs) that
    ``regex`` matches, at most ``limit``. Each line is matched on its own, so ``^`` and ``$`` are
    its start and end. A file is first searched whole (a line's match is a match there too, with
    ``re.MULTILINE``), which spares most files the line-by-line pass; ``needle``, a literal every
    match contains, spares even that. A file whose real location is outside its tree (a link),
    that is not a regular file, that cannot be read or is over ``max_bytes`` is skipped."""
    whole = None if _NO_PREFILTER.search(regex.pattern) else re.compile(regex.pattern, regex.flags | re.MULTILINE)
    found = 0
    counter = counter if counter is not None else ScanCounter()
    for path, root in files:
        try:
            text = read_text_inside(path, root, max_bytes)
        except OSError:
            continue
        if text is None:
            continue
        counter.files += 1
        if (needle is not None and needle not in text) or (whole is not None and not whole.search(text)):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line):
                yield path, number
                found += 1
                if found >= limit:
                    return


def search_in_child(pattern: str, flags: int, trees: list[tuple[str, list[str]]], *, limit: int,
                    timeout_s: float = SEARCH_TIMEOUT_S, max_bytes: int = MAX_FILE_BYTES) -> SearchOutcome:
    """:func:`scan_files` with the user's ``pattern`` (already known to compile) over ``trees``
    ((real root, paths under it) pairs), in a child process killed after ``timeout_s`` seconds;
    a search cut short is the user's one-line error."""
    request = json.dumps({"pattern": pattern, "flags": flags, "trees": trees, "limit": limit, "max_bytes": max_bytes,
                          "cpu_seconds": math.ceil(timeout_s) + 1})
    process = subprocess.Popen(child_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, encoding="utf-8")
    try:
        out, err = process.communicate(request, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise ApexUserError(f"the search did not finish in {timeout_s:g} s: simplify the pattern (avoid nested quantifiers "
                            "such as (a+)+) or search fewer files (one package, a path glob)") from None
    except BaseException:
        process.kill()
        process.communicate()
        raise
    if process.returncode != 0:
        lines = [line for line in err.splitlines() if line.strip()]
        raise RuntimeError(f"the search process failed (exit {process.returncode}): {lines[-1] if lines else 'no message'}")
    reply = json.loads(out)
    return SearchOutcome(matches=[(path, number) for path, number in reply["matches"]], files_searched=reply["files"])


def child_command() -> list[str]:
    """The child's command line: this interpreter, isolated (``-I``: no environment variables, no
    current folder on the path) and without site-packages (``-S``: it needs only the standard
    library and this package, and starts in about 30 ms)."""
    return [sys.executable, "-I", "-S", "-c", _CHILD]


def main() -> int:
    """The child: a request (JSON) on stdin, the matches (JSON) on stdout."""
    request = json.loads(sys.stdin.read())
    _limit_cpu(int(request["cpu_seconds"]))
    regex = re.compile(request["pattern"], int(request["flags"]))
    counter = ScanCounter()
    files = ((path, root) for root, paths in request["trees"] for path in paths)
    matches = list(scan_files(regex, files, limit=int(request["limit"]), max_bytes=int(request["max_bytes"]), counter=counter))
    sys.stdout.write(json.dumps({"files": counter.files, "matches": matches}))
    return 0


def _limit_cpu(seconds: int) -> None:
    """At most ``seconds`` of CPU (then SIGXCPU ends the process), even if nobody is left to kill it."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard == resource.RLIM_INFINITY:
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    else:
        resource.setrlimit(resource.RLIMIT_CPU, (min(seconds, hard), hard))

"""The judge's ledger: every grading this installation made, signed, indexed by task and solution sha256.

Why: a ``GradeResult`` is plain JSON that anyone can write: an agent in its workspace, a user with
an editor, a script that raises a speedup. Integration and the patcher's tools act on gradings, so
they must tell a grading the judge made from one that only looks like it. So each grading, as the
grader hands it out (``apex grade``, the MCP grader tools and the executors through
``service.grade_cached`` and ``Executor._finish``, the pipeline's loop through
``optimize.grade_with_retries``), is recorded here, signed with the installation's key
(``signing.py``: the grade cache's key and code), at::

    <cache dir>/gradings/<task id>/<solution sha256>/<digest>.json

``digest`` is the sha256 of the grading's canonical content (``canonical``); the signature's name
binds the record to the task, the solution's hash and that digest, so a record copied to another
file's folder or under another digest does not verify. The key stays in the cache directory: never
in a results folder, never in a confined solution's view (``sandbox.py``).

A claimed grading (a result file under ``apex integrate --results``, an ``apex grade --json``
output) is verified by its own digest: a signed record of it means the judge made exactly this
grading of exactly that file. Anything else gets a one-line reason: no signed grading of that file
here (a plain or forged result, one from another machine), or the fields in which it differs from
the signed ones (edited after grading). The canonical content leaves out the solution's path and
whether the cache answered: the cache answers for the same bytes at another path.

Infrastructure errors are not recorded (they are no verdict on the solution), nor gradings of no
file (no hash to bind them to).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from apex_core.grader.cache import default_cache_dir
from apex_core.grader.result import GradeResult, Outcome
from apex_core.grader.signing import Signer

LEDGER_DIR = "gradings"
NOT_CANONICAL = frozenset({"solution_path", "cached"})
"""Fields that say where and how a grading was handed out, not what the judge found."""
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SHOWN_DIFFERENCES = 3


class SignedGrading(BaseModel):
    """One record of the ledger, verified: the grading and when it was recorded (by this machine's clock)."""

    result: GradeResult
    recorded_at_ns: int


def canonical(result: GradeResult) -> str:
    """The grading as the judge vouches for it: its JSON (as ``apex grade --json`` and the tools give
    it, non-finite numbers as null) without ``NOT_CANONICAL``, keys sorted, no spaces."""
    content = json.loads(result.model_dump_json(exclude=set(NOT_CANONICAL)))
    return json.dumps(content, sort_keys=True, separators=(",", ":"))


def digest(result: GradeResult) -> str:
    return hashlib.sha256(canonical(result).encode()).hexdigest()


class GradingLedger:
    """The signed records of the gradings made here, under ``root`` (default: the cache directory)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or default_cache_dir()
        self.signer = Signer(self.root)

    def _folder(self, task_id: str, solution_hash: str) -> Path | None:
        """Where the gradings of one file for one task are; None for names that cannot be a task id
        or a sha256 (a claimed result is read from untrusted files: no path is built from them)."""
        if not (_TASK_ID.fullmatch(task_id) and _SHA256.fullmatch(solution_hash)):
            return None
        return self.root / LEDGER_DIR / task_id / solution_hash

    @staticmethod
    def _name(task_id: str, solution_hash: str, content_digest: str) -> str:
        return f"grading:{task_id}:{solution_hash}:{content_digest}"

    def record(self, result: GradeResult) -> bool:
        """Sign and keep ``result``; False where it is not recorded (an infrastructure error, a
        grading of no file, no key to sign with). Recording the same grading again (the cache
        answering for it) makes it the newest."""
        if result.outcome is Outcome.infra_error:
            return False
        folder = self._folder(result.task_id, result.provenance.solution_hash)
        if folder is None:
            return False
        text = canonical(result)
        content_digest = hashlib.sha256(text.encode()).hexdigest()
        body = json.dumps({"recorded_at_ns": time.time_ns(), "solution_path": result.solution_path, "result": json.loads(text)},
                          sort_keys=True)
        return self.signer.write(folder / f"{content_digest}.json",
                                 self._name(result.task_id, result.provenance.solution_hash, content_digest), body)

    def signed(self, task_id: str, solution_hash: str) -> list[SignedGrading]:
        """Every verified record of gradings of the file with ``solution_hash`` for ``task_id``, newest first."""
        folder = self._folder(task_id, solution_hash)
        if folder is None or not folder.is_dir():
            return []
        found = []
        for path in folder.glob("*.json"):
            body = self.signer.read(path, self._name(task_id, solution_hash, path.stem))
            if body is None:
                continue
            try:
                entry = json.loads(body)
                result = GradeResult.model_validate({**entry["result"], "solution_path": entry["solution_path"]})
                found.append(SignedGrading(result=result, recorded_at_ns=int(entry["recorded_at_ns"])))
            except (ValueError, TypeError, KeyError, ValidationError):
                continue
        return sorted(found, key=lambda s: s.recorded_at_ns, reverse=True)

    def verify(self, claim: GradeResult) -> str | None:
        """None when the judge signed exactly ``claim`` (its path and cache flag aside); else why not, in one line."""
        solution_hash = claim.provenance.solution_hash
        folder = self._folder(claim.task_id, solution_hash)
        if folder is None:
            return (f"not a grading by this installation's judge: task {_shown(claim.task_id)} with solution hash "
                    f"{_shown(solution_hash)} is no task id and sha256 the judge writes")
        content_digest = digest(claim)
        if self.signer.read(folder / f"{content_digest}.json", self._name(claim.task_id, solution_hash, content_digest)) is not None:
            return None
        signed = self.signed(claim.task_id, solution_hash)
        if not signed:
            return (f"no grading of this file (sha256 {solution_hash[:12]}) for {claim.task_id} was signed by this installation's "
                    "judge: a plain or forged result, or one graded elsewhere; grade the file here (apex grade --task "
                    f"{claim.task_id} --solution FILE)")
        claimed = json.loads(canonical(claim))
        differences = min((_differences(claimed, json.loads(canonical(s.result))) for s in signed), key=len)
        shown = "; ".join(differences[:_SHOWN_DIFFERENCES]) + ("; ..." if len(differences) > _SHOWN_DIFFERENCES else "")
        return f"edited after grading: differs from the judge's signed grading of this file in {shown}"


def _differences(claimed: dict[str, Any], signed: dict[str, Any], prefix: str = "") -> list[str]:
    """The fields where ``claimed`` differs from ``signed``, one level into nested objects (provenance, score)."""
    found = []
    for key in sorted(set(claimed) | set(signed)):
        mine, theirs = claimed.get(key), signed.get(key)
        if mine == theirs:
            continue
        if isinstance(mine, dict) and isinstance(theirs, dict) and not prefix:
            found.extend(_differences(mine, theirs, f"{key}."))
        else:
            found.append(f"{prefix}{key} {_shown(mine)} (signed: {_shown(theirs)})")
    return found


def _shown(value: Any) -> str:
    """A value as one short line."""
    text = " ".join(json.dumps(value).split())
    return text if len(text) <= 40 else text[:37] + "..."

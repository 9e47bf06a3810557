"""The final benchmark's arms: which solution sits at which patch point in each, and the confined
worker that runs one arm (``apex_core.patcher.hold`` makes the environment hold exactly an arm).

An arm is a set of patches (task, solution file, point). The original arm has none; the control
has each integrated kernel's task *baseline* at the winner's point; the candidate has the winners;
with two winners or more, "without k" is the candidate with kernel k's baseline back. A worker is
started while the environment holds its arm and warmed up (every module imported, every kernel
compiled), so it keeps that code when the environment changes for the next arm; once every worker
is loaded the environment is restored and the arms are stepped in turn.

Every solution is bound to its sha256 when the benchmark starts: an arm is never built from a file
that changed since (an agent's process editing its winner mid-benchmark changes nothing measured).
Binding and holding a set of patches is the patcher's (``patcher.hold``: the accuracy gate holds
sets too); which set each arm is, and the worker that runs it, are the final benchmark's.
"""

from __future__ import annotations

import secrets
import time

from pydantic import BaseModel

from apex_core.errors import ApexUserError
from apex_core.grader import ChildFailed, ConfinedChild
from apex_core.patcher.hold import ArmPatch, bound_patch
from apex_core.workloads.spec import WorkloadSpec

ORIGINAL, CONTROL, CANDIDATE = "original", "control", "candidate"
WITHOUT = "without:"
LOAD_TIMEOUT_S = 1800.0
STEP_TIMEOUT_S = 900.0


class Arm(BaseModel):
    name: str
    """original, control, candidate, or without:<task id>."""
    patches: list[ArmPatch]


def baseline_patch(winner: ArmPatch) -> ArmPatch:
    """The control's patch for a winner: the task's own baseline at the winner's point."""
    from apex_core.tasks import get_task

    return bound_patch(winner.task_id, get_task(winner.task_id).baseline_path, winner.point)


def plan_arms(winners: list[ArmPatch], baselines: dict[str, ArmPatch]) -> list[Arm]:
    """original, control, candidate, and one leave-one-out arm per winner when there are two or more
    (with one winner, the control is already the candidate without it)."""
    arms = [Arm(name=ORIGINAL, patches=[]), Arm(name=CONTROL, patches=[baselines[w.task_id] for w in winners]),
            Arm(name=CANDIDATE, patches=list(winners))]
    if len(winners) >= 2:
        arms += [Arm(name=f"{WITHOUT}{left.task_id}",
                     patches=[baselines[w.task_id] if w.task_id == left.task_id else w for w in winners]) for left in winners]
    return arms


class BenchWorker:
    """One arm's workload in a confined child, stepped on request and timed by this process."""

    def __init__(self, arm: Arm, spec: WorkloadSpec, patched: list[tuple[str, str]], *, unconfined: bool = False) -> None:
        self.arm = arm
        self.spec = spec
        self.child = ConfinedChild("apex_core.pipeline.stages.final.worker", unconfined=unconfined)
        self.graph_fallback: str | None = None
        try:
            reply = self.child.request({"op": "load", "spec": spec.model_dump(mode="json"), "patched": patched}, LOAD_TIMEOUT_S)
        except ChildFailed as failure:
            self.child.close()
            raise ApexUserError(f"the {arm.name} arm's workload did not load: {failure}") from None
        if not reply.get("ok"):
            self.child.close()
            raise ApexUserError(f"the {arm.name} arm's workload did not load: {str(reply.get('message'))[:400]}")
        self.notes = [str(n) for n in reply.get("notes", [])][:50]

    def step(self, seed: int | None = None) -> tuple[float, list[list[int]]]:
        """One request mix drawn from ``seed``: (seconds by this process's clock, the greedy tokens)."""
        seed = secrets.randbelow(2**31) if seed is None else seed
        start = time.perf_counter()
        try:
            reply = self.child.request({"op": "step", "seed": seed}, STEP_TIMEOUT_S)
        except ChildFailed as failure:
            raise ApexUserError(f"the {self.arm.name} arm's workload failed: {failure}") from None
        seconds = time.perf_counter() - start
        if not reply.get("ok"):
            raise ApexUserError(f"the {self.arm.name} arm's workload failed: {str(reply.get('message'))[:400]}")
        if reply.get("graph_fallback"):
            self.graph_fallback = str(reply["graph_fallback"])[:400]
        return seconds, _token_rows(reply.get("tokens"))

    def audit(self, seed: int, rows: list[list[int]]) -> list[list[float]]:
        """The leads of another arm's greedy tokens for ``seed`` under this arm's model
        (``apex_core.workloads.audit``); asked of the original arm only, which runs no patched code."""
        try:
            reply = self.child.request({"op": "audit", "seed": seed, "rows": rows}, STEP_TIMEOUT_S)
        except ChildFailed as failure:
            raise ApexUserError(f"the {self.arm.name} arm could not audit the tokens: {failure}") from None
        leads = reply.get("leads")
        if not reply.get("ok") or not _is_lead_rows(leads, rows):
            raise ApexUserError(f"the {self.arm.name} arm could not audit the tokens: {str(reply.get('message'))[:400]}")
        return leads  # type: ignore[return-value]

    def close(self) -> None:
        self.child.close()


def _is_lead_rows(value: object, rows: list[list[int]]) -> bool:
    """Whether ``value`` holds one float per token of ``rows`` (NaN allowed: it fails the margin)."""
    return (isinstance(value, list) and len(value) == len(rows)
            and all(isinstance(v, list) and len(v) == len(r) and all(isinstance(x, float | int) for x in v)
                    for v, r in zip(value, rows)))


def _token_rows(value: object) -> list[list[int]]:
    """The reply's tokens as rows of ints; anything else is no tokens (and agrees with nothing)."""
    if not isinstance(value, list) or len(value) > 4096:
        return []
    rows = []
    for row in value:
        if not isinstance(row, list) or len(row) > 1 << 16 or not all(type(t) is int for t in row):
            return []
        rows.append(row)
    return rows

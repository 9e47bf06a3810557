"""The accuracy gate: after patching, before the final benchmark (and ``apex patch check``), the
patched model is compared with the original, and a patch set that fails is cut down to what passes.

Why: the grader checks a kernel on its task's shapes and inputs; inside the model a kernel meets
other row counts, magnitudes and a dozen layers that compound its error. A kernel within tolerance
on standard-normal rows may still move a model's logits a hundred times more than a correct one
(``accuracy_compare`` has the thresholds and the reasoning; docs/patching.md, "The accuracy gate").

How, with the environment holding the applied patches when the gate starts:

1. each applied patch is bound to its solution file's sha256 (``hold.bound_patch``), so a file that
   changes during the gate is refused rather than compared;
2. everything is restored and the *original* model runs in a confined child
   (``accuracy_worker``): the workload's model, same weights (its seed) and fixed prompts, greedy
   decode; its tensors come back as a file in the child's scratch, read with the tensors-only loader;
3. the patches are put back (``hold.hold``; the in-model check is skipped for a file whose copy
   beside the module is byte for byte the one checked when it was applied) and the *patched* model
   runs the same way; ``accuracy_compare.compare_arms`` judges it;
4. a failing set is bisected: halves held alone on top of what already passed, down to the patch
   that makes it fail, which is left out; the rest is tried again, until what remains passes;
5. the environment is left holding exactly the patches that passed (nothing, when none did), and
   the report records every set tried, its figures, its verdict, and each culprit with its reason.

Every process that imports the patched stack is a confined child; this one never imports it. The
original arm runs our code and the installed stack only; what the patched arm's child returns is
checked for shape, finiteness and that its tokens are the argmax of its own logits, and judged
against the original's, never taken at its word.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from apex_core.errors import ApexUserError
from apex_core.patcher.accuracy_compare import ArmOutputs, Comparison, Thresholds, compare_arms, thresholds_for
from apex_core.patcher.hold import ArmPatch, bound_patch, checked_when_applied, hold
from apex_core.patcher.lock import ProcessIdentity
from apex_core.progress import Progress, reporter
from apex_core.workloads.spec import WorkloadSpec

ACCURACY_FILE = "accuracy.json"
REQUEST_SEED = 27_003
"""Draws the gate's fixed prompts (``requests.prompt_ids``): the same in every arm and every run."""
DEFAULT_PROMPTS, DEFAULT_TOKENS = 4, 16
MAX_PROMPTS, MAX_TOKENS = 64, 512
MAX_PREFILL_POSITIONS = 32
"""Prompt positions whose logits are compared: all of a short prompt, else this many spread evenly
(the last always among them), which keeps a 128k vocabulary's logits to tens of MB per arm."""
RUN_TIMEOUT_S = 1800.0
GATE = "the accuracy gate"
"""What is measuring, as ``hold``'s refusals name it."""


class SetTrial(BaseModel):
    """One patch set compared with the original."""

    patches: list[ArmPatch]
    comparison: Comparison | None = Field(default=None, description="the figures; None when the patched model gave none")
    passed: bool
    reason: str = Field(description="one line: why it failed, or the figures that passed")


class Culprit(BaseModel):
    """A patch rolled back by the gate."""

    task_id: str
    solution: str
    point: str | None
    sha256: str
    reason: str = Field(description="what the smallest failing set with it did (the set, then the figures)")


class AccuracyReport(BaseModel):
    run_id: str
    workload: WorkloadSpec = Field(description="the workload as the gate ran it (eager decode, dynamic cache)")
    prompts: int
    prompt_tokens: int
    tokens: int = Field(description="greedy tokens decoded per prompt after the prefill's")
    positions: list[int] = Field(description="prompt positions whose logits were compared")
    thresholds: Thresholds
    applied: list[ArmPatch] = Field(description="the patches applied when the gate began")
    trials: list[SetTrial] = Field(description="every patch set compared, in order")
    culprits: list[Culprit] = Field(description="patches rolled back, each with its reason")
    kept: list[ArmPatch] = Field(description="what the environment holds now: exactly the patches that passed")
    passed: bool = Field(description="every applied patch passed; nothing was rolled back")
    confined: bool = Field(description="the children ran confined (False only with --unconfined, as asked)")
    verdict: str
    results_dir: str
    created_at: str


class ArmFailed(Exception):
    """An arm's child gave no usable tensors; the message says why in one line."""


def accuracy_gate(spec: WorkloadSpec, results_root: Path, *, prompts: int = DEFAULT_PROMPTS, tokens: int = DEFAULT_TOKENS,
                  unconfined: bool = False, progress: Progress | None = None) -> AccuracyReport:
    """Compare the model with this environment's applied patches against the original; roll back
    the patches that make it fail (bisection). Afterwards the environment holds exactly
    ``report.kept`` (all applied and checked; none at all when nothing passed), and
    ``<results_root>/<run_id>/accuracy.json`` holds the report.

    Raises ApexUserError (one line) when nothing is patched, the input is out of range, the workload
    cannot be gated here, or the original model itself cannot run; the environment then holds what
    it held before."""
    from apex_core.grader import require_confinement
    from apex_core.patcher.patcher import restore, status

    report = reporter(progress)
    spec = _gated_spec(spec, prompts, tokens)
    thresholds = thresholds_for(spec.dtype)
    journal = status()
    records = [p for p in (journal.active() if journal else []) if p.state == "applied"]
    if journal is None or not records:
        raise ApexUserError("nothing is patched in this environment: apply solutions first (apex patch apply or apex "
                            "integrate); the gate compares the patched model with the original")
    require_confinement("run patched code in the accuracy gate", unconfined)
    applied = [bound_patch(p.task_id or "", Path(p.solution or ""), p.point) for p in records]
    checked = checked_when_applied(records, unconfined)
    # The gate leaves the patches as it found them: a run's own stay its own, a user's stay until apex patch restore.
    owned = all(r.owner == ProcessIdentity.current() for r in records)
    positions = prefill_positions(spec.prompt_tokens)
    held: list[ArmPatch] | None = applied

    def hold_exactly(patches: list[ArmPatch]) -> None:
        nonlocal held
        if held != patches:
            held = None  # unknown until hold returns
            hold(patches, results_root, checked, unconfined=unconfined, owned=owned, during=GATE)
            held = list(patches)

    def run(name: str) -> ArmOutputs:
        return run_arm(name, spec, prompts, tokens, positions, unconfined)

    trials: list[SetTrial] = []

    def trial(patches: list[ArmPatch]) -> SetTrial:
        """``patches`` held and compared; a set already compared is not run again."""
        seen = next((t for t in trials if t.patches == patches), None)
        if seen is not None:
            return seen
        report(min(0.9, 0.2 + 0.1 * len(trials)), f"comparing the model with {_names(patches)} against the original")
        hold_exactly(patches)
        try:
            comparison = compare_arms(original, run("patched"), thresholds)
            tried = SetTrial(patches=patches, comparison=comparison, passed=comparison.passed, reason=comparison.reason)
        except ArmFailed as failure:
            tried = SetTrial(patches=patches, passed=False, reason=str(failure))
        trials.append(tried)
        return tried

    culprits: list[Culprit] = []
    try:
        report(0.0, "restoring the original stack")
        held = None
        restore()
        held = []
        report(0.05, "running the original model")
        try:
            original = run("original")
        except ArmFailed as failure:
            raise ApexUserError(f"the original {spec.id} model could not be run for the accuracy gate: {failure}") from None
        remaining = list(applied)
        latest = trial(remaining)
        while not latest.passed:
            culprit, failing = _find_culprit(remaining, latest, trial)
            culprits.append(Culprit(task_id=culprit.task_id, solution=culprit.solution, point=culprit.point,
                                    sha256=culprit.sha256, reason=f"with {_names(failing.patches)}: {failing.reason}"))
            remaining = [p for p in remaining if p != culprit]
            if not remaining:
                break
            latest = trial(remaining)
        hold_exactly(remaining)
    except BaseException:
        if held != applied:
            try:
                hold(applied, results_root, checked, unconfined=unconfined, owned=owned, during=GATE)  # as it was before the gate
            except (ApexUserError, OSError) as error:
                report(1.0, f"could not put the patches back ({error}); apex patch status shows what is patched")
        raise
    return _write(spec, prompts, tokens, positions, thresholds, applied, trials, culprits, remaining, unconfined,
                  results_root, report)


def _find_culprit(suspects: list[ArmPatch], failing: SetTrial,
                  trial: Callable[[list[ArmPatch]], SetTrial]) -> tuple[ArmPatch, SetTrial]:
    """The patch of ``suspects`` (together failing) that makes a passing set fail, and the smallest
    failing set seen with it. Halves are tried on top of what already passed: a half that fails holds
    the culprit; one that passes joins the base. Where only a combination fails, the patch that tips
    it over is the one found (and left out; the rest is tried again)."""
    base: list[ArmPatch] = []
    while len(suspects) > 1:
        half, rest = suspects[: len(suspects) // 2], suspects[len(suspects) // 2:]
        tried = trial(base + half)
        if not tried.passed:
            suspects, failing = half, tried
        else:
            base, suspects = base + half, rest
    return suspects[0], failing


def _gated_spec(spec: WorkloadSpec, prompts: int, tokens: int) -> WorkloadSpec:
    """The workload resolved for this machine, decoding eagerly over the dynamic cache; one line
    for input the gate cannot take."""
    if not 1 <= prompts <= MAX_PROMPTS:
        raise ApexUserError(f"--prompts {prompts}: give 1 to {MAX_PROMPTS} prompts (default {DEFAULT_PROMPTS})")
    if not 1 <= tokens <= MAX_TOKENS:
        raise ApexUserError(f"--tokens {tokens}: give 1 to {MAX_TOKENS} greedy tokens per prompt (default {DEFAULT_TOKENS})")
    if spec.stack != "transformers":
        raise ApexUserError(f"{spec.id} is served by {spec.stack}, whose logits the gate cannot read; gate the same model's "
                            f"embedded workload ({spec.model}) instead")
    return spec.resolved().model_copy(update={"graphs": False, "kv_cache": "dynamic", "batch": prompts})


def prefill_positions(prompt_tokens: int) -> list[int]:
    """The prompt positions compared: every one up to ``MAX_PREFILL_POSITIONS``, else that many
    spread evenly from the first to the last."""
    if prompt_tokens <= MAX_PREFILL_POSITIONS:
        return list(range(prompt_tokens))
    step = (prompt_tokens - 1) / (MAX_PREFILL_POSITIONS - 1)
    return sorted({round(i * step) for i in range(MAX_PREFILL_POSITIONS)})


def run_arm(name: str, spec: WorkloadSpec, prompts: int, tokens: int, positions: list[int], unconfined: bool) -> ArmOutputs:
    """The model as the environment holds it now, in a confined child; its tensors, read and checked."""
    import torch

    from apex_core.grader import ChildFailed, ConfinedChild
    from apex_core.patcher.accuracy_worker import OUTPUTS_FILE

    with ConfinedChild("apex_core.patcher.accuracy_worker", unconfined=unconfined) as child:
        try:
            said = child.request({"op": "run", "spec": spec.model_dump(mode="json"), "prompts": prompts, "tokens": tokens,
                                  "positions": positions, "request_seed": REQUEST_SEED}, RUN_TIMEOUT_S)
        except ChildFailed as failure:
            raise ArmFailed(f"the {name} model's process failed: {failure}"[:600]) from None
        if said.get("ok") is not True:
            message = str(said.get("message") or "no reason given")[:500]
            if name == "original" and said.get("user_error"):
                raise ApexUserError(message)
            raise ArmFailed(f"the {name} model failed: {message}")
        path = child.scratch / OUTPUTS_FILE
        if not path.is_file() or path.is_symlink():
            raise ArmFailed(f"the {name} model's process left no outputs")
        try:
            data = torch.load(path, weights_only=True)
        except Exception as error:  # noqa: BLE001 - an unreadable file is a failure, whatever it holds
            raise ArmFailed(f"the {name} model's outputs could not be read: {error}"[:500]) from None
    return checked_outputs(name, data, prompts, tokens, len(positions))


def checked_outputs(name: str, data: object, prompts: int, tokens: int, positions: int) -> ArmOutputs:
    """The child's file as an ``ArmOutputs`` once it has exactly the shapes and dtypes asked for,
    finite logits, and greedy tokens that are the largest of its own logits at each step."""
    import torch

    if not isinstance(data, dict) or set(data) != {"prefill", "decode", "tokens"}:
        raise ArmFailed(f"the {name} model's outputs are not the prefill, decode and tokens tensors")
    prefill, decode, chosen = data["prefill"], data["decode"], data["tokens"]
    vocab = prefill.shape[-1] if isinstance(prefill, torch.Tensor) and prefill.dim() == 3 else -1
    expected = {"prefill": (prefill, torch.float32, (prompts, positions, vocab)),
                "decode": (decode, torch.float32, (prompts, tokens, vocab)),
                "tokens": (chosen, torch.int64, (prompts, tokens + 1))}
    for key, (value, dtype, shape) in expected.items():
        if type(value) is not torch.Tensor or value.dtype != dtype or tuple(value.shape) != shape or vocab < 2:
            what = f"{tuple(value.shape)} {value.dtype}" if isinstance(value, torch.Tensor) else type(value).__name__
            raise ArmFailed(f"the {name} model's {key} is {what}, not {shape} {dtype}")
    for key, value in (("prefill", prefill), ("decode", decode)):
        if not bool(torch.isfinite(value).all()):
            where = tuple(int(i) for i in (~torch.isfinite(value)).nonzero()[0][:2])
            raise ArmFailed(f"the {name} model's {key} logits are not finite (NaN or infinity), first at prompt {where[0]}, "
                             f"{'position' if key == 'prefill' else 'step'} {where[1]}")
    if int(chosen.min()) < 0 or int(chosen.max()) >= vocab:
        raise ArmFailed(f"the {name} model's greedy tokens lie outside its vocabulary of {vocab}")
    steps = torch.cat([prefill[:, -1:, :], decode], dim=1)
    picked = steps.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    if not bool((picked == steps.amax(dim=-1)).all()):
        raise ArmFailed(f"the {name} model's greedy tokens are not the largest of its own logits")
    return ArmOutputs(prefill=prefill, decode=decode, tokens=chosen)


def _names(patches: list[ArmPatch]) -> str:
    return ", ".join(p.task_id for p in patches) if patches else "no patch"


def _write(spec: WorkloadSpec, prompts: int, tokens: int, positions: list[int], thresholds: Thresholds,
           applied: list[ArmPatch], trials: list[SetTrial], culprits: list[Culprit], kept: list[ArmPatch],
           unconfined: bool, results_root: Path, report: Progress) -> AccuracyReport:
    passed = not culprits
    if passed:
        verdict = f"passed: {trials[0].reason}"
    else:
        left = f"kept {_names(kept)}" if kept else "nothing kept: the environment is restored"
        verdict = "rolled back " + "; ".join(f"{c.task_id} ({c.reason})" for c in culprits) + f"; {left}"
    created = dt.datetime.now(dt.timezone.utc)
    run_id = f"{created.strftime('%Y%m%d-%H%M%S')}-{spec.id}-accuracy-{secrets.token_hex(3)}"
    folder = results_root / run_id
    result = AccuracyReport(run_id=run_id, workload=spec, prompts=prompts, prompt_tokens=spec.prompt_tokens, tokens=tokens,
                            positions=positions, thresholds=thresholds, applied=applied, trials=trials, culprits=culprits,
                            kept=kept, passed=passed, confined=not unconfined, verdict=verdict, results_dir=str(folder),
                            created_at=created.isoformat())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ACCURACY_FILE).write_text(json.dumps(result.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    report(1.0, verdict)
    return result

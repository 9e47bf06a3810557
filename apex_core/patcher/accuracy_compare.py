"""The accuracy gate's judgement: a patched model's logits and greedy tokens against the original's,
under thresholds set per dtype.

What is compared (``compare_arms``), per prompt, on the same weights, seed and prompts:

- the logits at the prompt positions (the prefill) and at every decode step whose inputs are still
  the same in both arms (every greedy token before it agreed): the largest absolute error, the
  largest relative error (L2 norm of the error over the L2 norm of the original's logits, per
  position), the largest absolute error over the position's largest logit, and the KL divergence of
  the next-token distributions (original to patched, in nats);
- the greedy tokens, one by one, up to the first that differs. A difference where the original's
  token led the patched one's by at most the tie margin is a near-tie: the comparison of that prompt
  ends there, as passed, since from there on the two arms decode different inputs. A difference
  where the original's lead was larger is a flip: the patch changed a decision the original made
  clearly, and the set fails.

Why thresholds relative to the logits, and one budget per dtype. The workloads' weights are random
(``hf.build_model``), so their next-token distributions are nearly uniform: logits with a spread of
about 0.65 (cpu-mini) to 1.3 (Llama-3.1's width), where a trained model's spread is several times
that. An absolute KL or logit threshold would pass almost anything there (cpu-mini's logits off by
0.13% give a KL of 4e-7 nats), so every threshold scales with the original's own logits and with the
dtype's rounding. One number per dtype, the relative error budget, sets all of them:

- ``relative`` = the budget: the largest relative L2 error of any one position's logits;
- ``max_abs`` = 2 x budget, over that position's largest logit: one logit may stray further than
  the typical one (the tail of a vocabulary-sized sample of errors);
- ``kl`` = (3 x budget)^2 / 2: the KL divergence that errors of the budget's size give on a logit
  spread of 3, a trained model's (for small errors KL ~ variance of the error / 2), so the figure
  means the same on a trained model; on near-uniform random logits it is the looser of the tests;
- ``tie`` = 2 x budget, over the step's largest logit: the lead that two logits, each off by the
  budget against the other, can overturn. Within the max_abs allowance a flip may need up to twice
  that (two logits each off by max_abs, lined up against the original's choice), which random
  rounding at the budget does not do (it is several of the errors' standard deviations) but a
  systematic error at the top of the distribution does (a wrong vocabulary tile, a bias at some
  positions) while the figures averaged over the vocabulary stay small. So the token test catches
  what the logit tests let through, and a flip below the margin is what any correct kernel may do.

Why exact token equality is not demanded: where two tokens nearly tie (and in bf16, logits one
rounding apart are common), any correct kernel with another summation order may pick the other;
demanding equality there would fail correct patches at random.

The budgets (``BUDGETS``), and why:

- float32 (the CPU): 1e-4. A correct kernel differs from the stack's by its summation order, a few
  units of float32's rounding (6e-8) per operation; our canned NumPy RMSNorm against cpu-mini's
  Python baseline moves the logits by 6e-7 (160 times under), and a deeper model or another kernel
  has two orders of magnitude of room. A kernel that moves eps out of the square root is over it
  (1.3e-3 on cpu-mini), as arithmetic with a 10-bit mantissa (float16, TF32: roundings of 5e-4)
  is expected to be (not measured).
- bfloat16 (GPUs): 6e-2, twice the largest error a correct kernel was measured to make. On the
  H200 (2026-12-04, benchmarks/results/e2e-credit-h200-2026-12-04/) our reference solutions, each
  graded correct, at Liger's points of Llama-3.1-8B (8 layers, random weights) moved the logits
  by 2.2% (rms_norm), 2.2% (silu_and_mul) and 3.0% (rope) relative, 3.1% together, the largest
  absolute error up to 3.6% of the position's largest logit, KL at most 8e-4 nats, and no greedy
  token flipped beyond a near-tie; fla's gated delta rule of ours in Qwen3.5 (4 layers) 2.0%. A
  bf16 kernel that rounds once where the stack rounds twice moves each element by a rounding
  (2^-8), and eight layers compound it on logits whose spread is small (random weights). The
  first budget, 2e-2, rolled back all three Llama references. What this costs: at bfloat16 the
  gate cannot tell an error of a few percent from rounding (the eps-outside-the-root mistake
  moves a bf16 Llama's logits by 2.4%, measured on the CPU at hidden 1024): float32 (cpu-mini,
  CI) catches it; a bf16 run catches only what flips tokens or moves the logits by more.
- float16: 7.5e-3, bfloat16's budget scaled by their roundings (float16 keeps 3 more mantissa bits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from apex_core.errors import ApexUserError

BUDGETS: dict[str, float] = {"float32": 1e-4, "bfloat16": 6e-2, "float16": 7.5e-3}
"""Relative error budget of the logits per model dtype; every threshold derives from it."""
TRAINED_LOGIT_SPREAD = 3.0
"""The logit spread at which the KL threshold means the budget (a trained model's, not a random one's)."""


class Thresholds(BaseModel):
    """What a patched model may differ from the original by, for one dtype (module docstring: why)."""

    dtype: str
    relative: float = Field(description="largest relative L2 error of one position's logits")
    max_abs: float = Field(description="largest absolute logit error over that position's largest logit")
    kl: float = Field(description="largest KL divergence (original to patched) of one next-token distribution, nats")
    tie: float = Field(description="a differing greedy token is a near-tie when the original's lead is at most this "
                                   "times the step's largest logit")


def thresholds_for(dtype: str) -> Thresholds:
    """The thresholds of a model dtype; one line naming the known dtypes otherwise."""
    if dtype not in BUDGETS:
        raise ApexUserError(f"the accuracy gate has no thresholds for {dtype} models; it knows {', '.join(BUDGETS)}")
    budget = BUDGETS[dtype]
    return Thresholds(dtype=dtype, relative=budget, max_abs=2 * budget, kl=(TRAINED_LOGIT_SPREAD * budget) ** 2 / 2,
                      tie=2 * budget)


@dataclass(frozen=True)
class ArmOutputs:
    """One arm's tensors as the gate read them (``accuracy_worker``: what each holds)."""

    prefill: Any
    """float32 (prompts, positions, vocab); the last position is the prompt's last."""
    decode: Any
    """float32 (prompts, tokens, vocab)."""
    tokens: Any
    """int64 (prompts, tokens + 1)."""


class LogitFigures(BaseModel):
    positions: int = Field(description="logit vectors compared: prompt positions and decode steps with equal inputs")
    max_abs: float = Field(description="largest absolute logit error")
    max_abs_ratio: float = Field(description="largest absolute error of a position over that position's largest logit")
    relative: float = Field(description="largest relative L2 error of one position's logits")
    kl_max: float = Field(description="largest KL divergence of one next-token distribution (nats)")
    kl_mean: float
    worst: str = Field(description="where the largest relative error is")


class TokenFigures(BaseModel):
    sequences: int
    compared: int = Field(description="greedy tokens compared: each prompt's up to and including its first difference")
    agreed: int
    near_ties: int = Field(description="prompts whose tokens parted at a near-tie (comparison ended there, passed)")
    flip: str | None = Field(default=None, description="the first difference beyond a near-tie, described")


class Comparison(BaseModel):
    logits: LogitFigures
    tokens: TokenFigures
    passed: bool
    reason: str = Field(description="one line: the first threshold exceeded, or the figures within them")


def compare_arms(original: ArmOutputs, patched: ArmOutputs, thresholds: Thresholds) -> Comparison:
    """The patched arm against the original (both read and checked by the gate: same shapes, finite)."""
    import torch

    prompts, steps = original.tokens.shape[0], original.decode.shape[1]
    compared = agreed = near_ties = 0
    flip: str | None = None
    rows: list[tuple[Any, Any, str]] = []
    for b in range(prompts):
        first_difference = steps + 1
        for j in range(steps + 1):
            compared += 1
            ours, theirs = int(original.tokens[b, j]), int(patched.tokens[b, j])
            if ours == theirs:
                agreed += 1
                continue
            first_difference = j
            step = (original.prefill[b, -1] if j == 0 else original.decode[b, j - 1]).double()
            lead = float(step[ours] - step[theirs])
            margin = thresholds.tie * float(step.abs().max())
            if lead <= margin:
                near_ties += 1
            elif flip is None:
                flip = (f"greedy token {j} of prompt {b} differs: the original chose {ours} by a lead of {lead:.3g} over the "
                        f"patched model's {theirs} (a near-tie is at most {margin:.3g})")
            break
        rows.append((original.prefill[b], patched.prefill[b], f"prompt {b}, prefill position"))
        usable = min(first_difference, steps)  # decode step j+1 saw tokens 0..j, all equal
        if usable:
            rows.append((original.decode[b, :usable], patched.decode[b, :usable], f"prompt {b}, decode step"))
    logits = _logit_figures(rows, torch)
    tokens = TokenFigures(sequences=prompts, compared=compared, agreed=agreed, near_ties=near_ties, flip=flip)
    return Comparison(logits=logits, tokens=tokens, **_verdict(logits, tokens, thresholds))


def _logit_figures(rows: list[tuple[Any, Any, str]], torch: Any) -> LogitFigures:
    positions = 0
    max_abs = max_ratio = relative = kl_max = kl_sum = 0.0
    worst = ""
    tiny = torch.finfo(torch.float64).tiny
    for original, patched, where in rows:
        o, p = original.double(), patched.double()
        error = p - o
        scale = o.abs().amax(dim=-1).clamp_min(tiny)
        row_relative = error.norm(dim=-1) / o.norm(dim=-1).clamp_min(tiny)
        log_o, log_p = torch.log_softmax(o, dim=-1), torch.log_softmax(p, dim=-1)
        kl = (log_o.exp() * (log_o - log_p)).sum(dim=-1).clamp_min(0.0)
        positions += o.shape[0]
        max_abs = max(max_abs, float(error.abs().max()))
        max_ratio = max(max_ratio, float((error.abs().amax(dim=-1) / scale).max()))
        kl_max, kl_sum = max(kl_max, float(kl.max())), kl_sum + float(kl.sum())
        index = int(row_relative.argmax())
        if not worst or float(row_relative[index]) > relative:
            relative, worst = float(row_relative[index]), f"{where} {index}"
    return LogitFigures(positions=positions, max_abs=max_abs, max_abs_ratio=max_ratio, relative=relative, kl_max=kl_max,
                        kl_mean=kl_sum / max(positions, 1), worst=worst)


def _verdict(logits: LogitFigures, tokens: TokenFigures, thresholds: Thresholds) -> dict[str, Any]:
    limits = f"{thresholds.dtype}'s threshold"
    if logits.relative > thresholds.relative:
        return {"passed": False, "reason": f"logits off by {logits.relative:.3g} relative ({limits} {thresholds.relative:.3g}) "
                                           f"at {logits.worst}"}
    if logits.max_abs_ratio > thresholds.max_abs:
        return {"passed": False, "reason": f"a logit off by {logits.max_abs_ratio:.3g} of its position's largest "
                                           f"({limits} {thresholds.max_abs:.3g}; {logits.max_abs:.3g} absolute)"}
    if logits.kl_max > thresholds.kl:
        return {"passed": False, "reason": f"next-token distributions {logits.kl_max:.3g} nats apart (KL; {limits} "
                                           f"{thresholds.kl:.3g})"}
    if tokens.flip is not None:
        return {"passed": False, "reason": tokens.flip}
    ties = f", {tokens.near_ties} prompt(s) parting at a near-tie" if tokens.near_ties else ""
    return {"passed": True, "reason": f"logits within {thresholds.dtype}'s thresholds (relative {logits.relative:.2g}, "
                                      f"KL {logits.kl_max:.2g} nats over {logits.positions} positions); greedy tokens agree "
                                      f"on {tokens.agreed} of {tokens.compared} compared{ties}"}

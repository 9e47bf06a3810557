"""The accuracy gate's judgement on logits built to sit on either side of each threshold, and its
reading of what an arm's child hands back (``accuracy.checked_outputs``): no model, no child."""

from __future__ import annotations

import re

import pytest
import torch

from apex_core.errors import ApexUserError
from apex_core.patcher.accuracy import MAX_PREFILL_POSITIONS, ArmFailed, checked_outputs, prefill_positions
from apex_core.patcher.accuracy_compare import BUDGETS, ArmOutputs, compare_arms, thresholds_for

VOCAB, POSITIONS, STEPS = 512, 4, 3
FP32 = thresholds_for("float32")


def _logits(seed: int, *shape: int) -> torch.Tensor:
    """Near-uniform logits with cpu-mini's spread (standard deviation 0.65)."""
    return 0.65 * torch.randn(*shape, VOCAB, generator=torch.Generator().manual_seed(seed))


def _arm(prefill: torch.Tensor, decode: torch.Tensor) -> ArmOutputs:
    """An arm whose tokens are the argmax of its own logits at each step, as a model's are."""
    steps = torch.cat([prefill[:, -1:, :], decode], dim=1)
    return ArmOutputs(prefill=prefill, decode=decode, tokens=steps.argmax(dim=-1))


def _two_leaders(row: torch.Tensor, lead_in_budgets: float) -> tuple[int, int, float]:
    """Make ``row``'s top token lead the runner-up by ``lead_in_budgets`` x budget x the row's largest
    logit; (top, runner-up, the row's largest logit)."""
    top, runner_up = (int(i) for i in row.topk(2).indices)
    largest = float(row.abs().max())
    row[runner_up] = row[top] - lead_in_budgets * BUDGETS["float32"] * largest
    return top, runner_up, largest


def _swapped(original: ArmOutputs, prompt: int, lead: float, shift: float) -> tuple[ArmOutputs, ArmOutputs]:
    """The original with one prompt's last prefill row given a lead of ``lead`` budgets, and a patched
    copy whose two leaders each moved ``shift`` budgets towards the other (enough to swap them)."""
    prefill = original.prefill.clone()
    top, runner_up, largest = _two_leaders(prefill[prompt, -1], lead)
    patched_prefill = prefill.clone()
    patched_prefill[prompt, -1, top] -= shift * BUDGETS["float32"] * largest
    patched_prefill[prompt, -1, runner_up] += shift * BUDGETS["float32"] * largest
    before, after = _arm(prefill, original.decode), _arm(patched_prefill, original.decode)
    assert int(before.tokens[prompt, 0]) == top and int(after.tokens[prompt, 0]) == runner_up
    return before, after


def test_identical_arms_pass_with_every_token_compared():
    arm = _arm(_logits(1, 2, POSITIONS), _logits(2, 2, STEPS))
    result = compare_arms(arm, arm, FP32)
    assert result.passed and result.logits.relative == 0.0 and result.logits.kl_max == 0.0
    assert (result.tokens.compared, result.tokens.agreed, result.logits.positions) == (2 * (STEPS + 1),) * 2 + (2 * (POSITIONS + STEPS),)


def test_logits_off_by_more_than_the_budget_fail_and_say_where():
    original = _arm(_logits(1, 2, POSITIONS), _logits(2, 2, STEPS))
    noisy = original.decode.clone()
    noisy[1, 0] *= 1 + 3 * BUDGETS["float32"]  # scaled: the order of the logits, and so every token, is kept
    result = compare_arms(original, _arm(original.prefill, noisy), FP32)
    assert not result.passed and result.tokens.flip is None
    assert result.reason.startswith("logits off by 0.0003 relative (float32's threshold 0.0001) at prompt 1, decode step 0")


def test_a_flip_at_a_clear_lead_fails_though_the_logit_figures_allow_its_errors():
    """Two logits each moved by 1.6 budgets (under max_abs's 2) overturn a lead of 3 budgets (over the
    tie margin's 2): errors lined up against the original's choice, which the averaged figures miss."""
    original, patched = _swapped(_arm(_logits(3, 2, POSITIONS), _logits(4, 2, STEPS)), prompt=1, lead=3.0, shift=1.6)
    result = compare_arms(original, patched, FP32)
    logits = result.logits
    assert logits.relative <= FP32.relative and logits.max_abs_ratio <= FP32.max_abs and logits.kl_max <= FP32.kl
    assert not result.passed and result.reason.startswith("greedy token 0 of prompt 1 differs: the original chose")
    assert result.tokens.compared == (STEPS + 1) + 1 and result.tokens.agreed == STEPS + 1


def test_a_flip_at_a_near_tie_passes_and_ends_that_prompts_comparison():
    original, patched = _swapped(_arm(_logits(5, 2, POSITIONS), _logits(6, 2, STEPS)), prompt=0, lead=1.5, shift=1.0)
    result = compare_arms(original, patched, FP32)
    assert result.passed and result.tokens.near_ties == 1 and result.tokens.flip is None
    assert result.tokens.compared == 1 + (STEPS + 1)  # prompt 0 ends at its first token
    assert result.logits.positions == 2 * POSITIONS + STEPS  # prompt 0's decode steps saw other inputs: not compared
    assert "1 prompt(s) parting at a near-tie" in result.reason


def test_thresholds_derive_from_one_budget_per_dtype():
    bf16 = thresholds_for("bfloat16")
    assert (bf16.relative, bf16.max_abs, bf16.tie) == (0.06, 0.12, 0.12) and bf16.kl == pytest.approx(0.0162)
    assert thresholds_for("float16").relative < bf16.relative and FP32.relative < thresholds_for("float16").relative
    with pytest.raises(ApexUserError, match="no thresholds for float64 models; it knows float32, bfloat16, float16"):
        thresholds_for("float64")


def test_prompt_positions_are_all_of_a_short_prompt_and_a_spread_of_a_long_one():
    assert prefill_positions(16) == list(range(16))
    spread = prefill_positions(512)
    assert len(spread) == MAX_PREFILL_POSITIONS and spread[0] == 0 and spread[-1] == 511 and spread == sorted(set(spread))


def _outputs(**changes: object) -> dict[str, object]:
    arm = _arm(_logits(7, 2, POSITIONS), _logits(8, 2, STEPS))
    return {"prefill": arm.prefill, "decode": arm.decode, "tokens": arm.tokens, **changes}


def test_the_childs_file_is_taken_only_with_the_shapes_asked_finite_logits_and_tokens_that_are_their_argmax():
    assert checked_outputs("patched", _outputs(), 2, STEPS, POSITIONS).tokens.shape == (2, STEPS + 1)
    good = _outputs()
    wrong_token = good["tokens"].clone()
    wrong_token[0, 2] = (wrong_token[0, 2] + 1) % VOCAB
    nan = good["decode"].clone()
    nan[1, 2, 5] = float("nan")
    refused = {
        "outputs are not the prefill, decode and tokens tensors": {"prefill": good["prefill"], "decode": good["decode"]},
        "decode is (2, 3, 512) torch.float64, not (2, 3, 512) torch.float32": _outputs(decode=good["decode"].double()),
        "prefill is (2, 3, 512) torch.float32, not (2, 4, 512)": _outputs(prefill=good["prefill"][:, 1:]),
        "tokens is list": _outputs(tokens=good["tokens"].tolist()),
        "decode logits are not finite (NaN or infinity), first at prompt 1, step 2": _outputs(decode=nan),
        "greedy tokens are not the largest of its own logits": _outputs(tokens=wrong_token),
        "greedy tokens lie outside its vocabulary of 512": _outputs(tokens=good["tokens"] + VOCAB),
    }
    for said, data in refused.items():
        with pytest.raises(ArmFailed, match="^" + re.escape(f"the patched model's {said}")):
            checked_outputs("patched", data, 2, STEPS, POSITIONS)

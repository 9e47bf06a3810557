"""The token audit (``apex_core.workloads.audit``): a workload's own greedy tokens are within a
near-tie of its model at every position, in every family; a sequence that flipped at a near-tie and
went on honestly passes everywhere the common prefix would have stopped looking; tokens the model
never computed (drawn at random, or replayed from another request) fail; rows of another shape or
outside the vocabulary cannot pass."""

from __future__ import annotations

import math
import random

import pytest
import torch

from apex_core.patcher.accuracy_compare import thresholds_for
from apex_core.workloads.audit import token_leads, within_ties
from apex_core.workloads.embedded import EmbeddedWorkload
from apex_core.workloads.spec import WorkloadSpec

pytestmark = pytest.mark.site_packages  # builds transformers models, whose modules the group's tests patch

TIE = thresholds_for("float32").tie
FAMILIES = ["llama", "qwen3.5", "gpt-oss", "deepseek-v3"]


def _workload(model) -> EmbeddedWorkload:
    spec = WorkloadSpec(id="tiny", model="llama-3-1-8b-instruct", batch=2, prompt_tokens=12, decode_tokens=6,
                        device="cpu", dtype="float32").resolved()
    return EmbeddedWorkload(spec, model, [])


def _own_tokens(workload: EmbeddedWorkload, seed: int) -> list[list[int]]:
    workload.step(seed=seed)
    return workload.last_tokens.tolist()


@pytest.mark.parametrize("family", FAMILIES)
def test_a_workloads_own_tokens_lead_by_nothing_at_every_position(family, tiny_model):
    workload = _workload(tiny_model(family))
    leads = token_leads(workload, 5, _own_tokens(workload, 5))
    assert [len(row) for row in leads] == [7, 7]  # the prefill's token and six decoded ones, per sequence
    # Static-cache decode against one uncached forward: the summation orders differ, by float32 rounding.
    assert max(max(row) for row in leads) < TIE / 10, leads
    assert within_ties(leads, TIE) == 1.0


def test_a_flip_at_a_near_tie_passes_and_every_token_after_it_is_still_checked(tiny_model):
    workload = _workload(tiny_model("llama"))
    rows = _own_tokens(workload, 5)
    prompt = workload.prompt(5)
    # The first sequence takes the model's second choice for its first token, then decodes honestly from there.
    with torch.inference_mode():
        first = workload.teacher_forced_logits(prompt[:1], 1)[0, -1]
        second_choice = int(first.topk(2).indices[1])
        flipped_lead = float((first.max() - first[second_choice]) / first.abs().max())
        sequence = [second_choice]
        while len(sequence) < len(rows[0]):
            inputs = torch.cat([prompt[:1], torch.tensor([sequence])], dim=1)
            sequence.append(int(workload.teacher_forced_logits(inputs, 1)[0, -1].argmax()))
    assert sequence != rows[0]  # the common prefix with the greedy sequence is empty
    leads = token_leads(workload, 5, [sequence, rows[1]])
    assert leads[0][0] == pytest.approx(flipped_lead, rel=1e-3)
    assert max(leads[0][1:]) < TIE / 10  # after the flip, each token is the model's at its own context
    assert within_ties(leads, flipped_lead * 1.01) == 1.0  # the flip is a near-tie at this margin
    assert within_ties(leads, flipped_lead * 0.99) == pytest.approx(13 / 14)  # and only the flip is beyond a smaller one


def test_tokens_the_model_never_computed_fail(tiny_model):
    workload = _workload(tiny_model("llama"))
    drawn = random.Random(0)
    made_up = [[drawn.randrange(workload.vocab_size) for _ in range(7)] for _ in range(2)]
    assert within_ties(token_leads(workload, 5, made_up), TIE) < 0.2
    replayed = _own_tokens(workload, 6)  # a worker answering another request's tokens
    assert within_ties(token_leads(workload, 5, replayed), TIE) < 0.5


def test_tokens_outside_the_vocabulary_lead_by_infinity_and_rows_of_another_shape_are_refused(tiny_model):
    workload = _workload(tiny_model("llama"))
    rows = _own_tokens(workload, 5)
    rows[1][3] = workload.vocab_size + 7
    leads = token_leads(workload, 5, rows)
    assert math.isinf(leads[1][3])
    # The token after it was decoded from the real token, not from the one the audit fed in its place.
    assert leads[1][4] > TIE and within_ties(leads, TIE) == pytest.approx(12 / 14)
    with pytest.raises(ValueError, match="2 rows of 7 tokens"):
        token_leads(workload, 5, [row[:-1] for row in rows])


def test_the_fraction_within_ties_counts_a_nan_as_beyond_and_nothing_as_unmeasured():
    assert within_ties([[0.0, float("nan")], [TIE, TIE * 2]], TIE) == 0.5
    assert within_ties([], TIE) is None and within_ties([[]], TIE) is None

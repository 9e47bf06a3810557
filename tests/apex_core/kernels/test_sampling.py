"""The sampler kind: its reference against vLLM's way of writing the filters, inputs whose every
decision is clear of a near-tie, and one task per vocabulary. (The baselines and our solution under
the interpreter are tests/apex_core/suite/test_interpreter_check.py's.)"""

import pytest
import torch

from apex_core.grader.compare import compare_all
from apex_core.kernels import sampling
from apex_core.models import MODELS
from apex_core.tasks import all_tasks, get_task

LLAMA = "llama-3-1-8b-instruct__top_k_top_p_sampling"
GEMMA = "gemma-2-9b-it__top_k_top_p_sampling"
SAMPLING_TASKS = sorted(t.id for t in all_tasks().values() if t.kernel == "top_k_top_p_sampling")


def _vllm_style(logits, temperature, top_k, top_p, exponential, softcap):
    """The same filters the way vLLM's apply_top_k_top_p writes them (an ascending sort, top-k by
    the k-th value, top-p by cumsum <= 1 - p keeping the largest), then softmax and the race."""
    z = logits.double()
    if softcap > 0:
        z = softcap * torch.tanh(z / softcap)
    z = z / temperature.double()[:, None]
    ordered, order = z.sort(dim=-1)
    kth = ordered.gather(1, (z.shape[-1] - top_k.long())[:, None])
    ordered = ordered.masked_fill(ordered < kth, float("-inf"))
    cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
    drop = cumulative <= 1 - top_p.double()[:, None]
    drop[:, -1] = False
    ordered = ordered.masked_fill(drop & (top_p.double()[:, None] < 1), float("-inf"))
    probs = torch.empty_like(z).scatter_(1, order, ordered).softmax(dim=-1)
    return probs.float(), (probs / exponential.double()).argmax(dim=-1)


@pytest.mark.parametrize("softcap", [0.0, 30.0])
@pytest.mark.parametrize("shape", [{"batch": 8, "vocab": 1000}, {"batch": 5, "vocab": 32064}])
def test_the_reference_is_vllms_sampler_in_float64(shape, softcap):
    args = sampling.make_inputs_torch(shape, "float32", 3, "cpu", {"softcap": softcap})
    probs, token = sampling.reference_torch(*args)
    expected_probs, expected_token = _vllm_style(*args)
    assert probs.dtype == torch.float32 and token.dtype == torch.int64 and probs.shape == (shape["batch"], shape["vocab"])
    torch.testing.assert_close(probs, expected_probs, atol=1e-7, rtol=1e-6)
    assert torch.equal(token, expected_token)
    assert torch.allclose(probs.double().sum(dim=-1), torch.ones(shape["batch"], dtype=torch.float64))


def test_top_k_then_top_p_on_a_row_worked_by_hand():
    # z = (3, 2, 1, 0, -1): top_k 4 drops -1; top-p 0.8 over the softmax of the four keeps 3 and 2
    # (exclusive masses 0 and 0.644 are below 0.8, 0.881 is not).
    logits = torch.tensor([[1.0, 3.0, -1.0, 2.0, 0.0]])
    args = (logits, torch.tensor([1.0]), torch.tensor([4], dtype=torch.int32), torch.tensor([0.8]), torch.ones(1, 5))
    probs, token = sampling.reference_torch(*args, 0.0)
    e = torch.tensor([3.0, 2.0]).exp()
    torch.testing.assert_close(probs, torch.tensor([[0.0, e[0] / e.sum(), 0.0, e[1] / e.sum(), 0.0]]))
    assert int(token) == 1
    # top_p = 1.0 and top_k = vocab filter nothing; a greedy row keeps the largest alone
    everything = sampling.reference_torch(logits, torch.tensor([1.0]), torch.tensor([5], dtype=torch.int32),
                                          torch.tensor([1.0]), torch.ones(1, 5), 0.0)[0]
    torch.testing.assert_close(everything, logits.softmax(dim=-1))
    greedy = sampling.reference_torch(logits, torch.tensor([1.0]), torch.tensor([1], dtype=torch.int32),
                                      torch.tensor([0.9]), torch.ones(1, 5), 0.0)[0]
    assert greedy.tolist() == [[0.0, 1.0, 0.0, 0.0, 0.0]]


def test_the_inputs_cover_every_request_kind_and_keep_every_decision_clear():
    shape = {"batch": 16, "vocab": 5000}
    logits, temperature, top_k, top_p, exponential, softcap = sampling.make_inputs_torch(shape, "float32", 7, "cpu", {})
    assert softcap == 0.0 and logits.dtype == exponential.dtype == torch.float32 and top_k.dtype == torch.int32
    assert bool(((temperature >= 0.5) & (temperature <= 1.5)).all()) and bool((exponential > 0).all())
    assert {1, 5000} <= set(top_k.tolist()) and max(k for k in top_k.tolist() if k < 5000) <= sampling.TOP_K_MAX
    assert 1.0 in top_p.tolist() and bool(((top_p > 0) & (top_p <= 1)).all())
    z = sampling._scaled(logits, temperature, softcap)
    ordered = z.sort(dim=-1, descending=True).values
    for row, k in enumerate(top_k.tolist()):
        if k < 5000:
            assert ordered[row, k - 1] - ordered[row, k] >= sampling.LOGIT_GAP
    masses = sampling._top_k_probs(z, top_k).sort(dim=-1, descending=True).values
    before = masses.cumsum(dim=-1) - masses
    for row, p in enumerate(top_p.tolist()):
        if p < 1:
            assert float((before[row] - p).abs().min()) >= sampling.MASS_GAP * 0.99
    probs, token = sampling.reference_torch(logits, temperature, top_k, top_p, exponential, softcap)
    race = (probs.double() / exponential.double()).topk(2, dim=-1).values
    assert bool((race[:, 0] >= (1 + sampling.RACE_MARGIN * 0.99) * race[:, 1]).all())


@pytest.mark.parametrize("ignored", ["temperature", "top_k", "top_p"])
def test_a_kernel_that_ignores_a_parameter_fails_the_interpreter_check(ignored):
    """At the cpu shapes, as the CI check draws them (seed 1 + the shape's index): a batch of four
    has every kind of request, so a kernel without one of the filters fails there."""
    task = get_task(LLAMA)
    verdicts = []
    for index, shape in enumerate(task.cpu_shapes):
        args = list(sampling.make_inputs_torch(shape, task.dtype, 1 + index, "cpu", task.params))
        expected = list(sampling.reference_torch(*args))
        batch, vocab = shape["batch"], shape["vocab"]
        position = {"temperature": 1, "top_k": 2, "top_p": 3}[ignored]
        args[position] = {"temperature": torch.ones(batch), "top_k": torch.full((batch,), vocab, dtype=torch.int32),
                          "top_p": torch.ones(batch)}[ignored]
        verdicts.append(compare_all(list(sampling.reference_torch(*args)), expected, task).passed)
    assert not verdicts[0], ignored  # the batch of four


def test_the_soft_cap_matters_for_gemma_and_is_its_final_logit_softcapping():
    task = get_task(GEMMA)
    assert task.params["softcap"] == task.architecture.extra["final_logit_softcapping"] == 30.0
    assert "gemma-2-27b-it" in task.also_models
    uncapped = []
    for index, shape in enumerate(task.cpu_shapes):
        args = list(sampling.make_inputs_torch(shape, task.dtype, 1 + index, "cpu", task.params))
        expected = list(sampling.reference_torch(*args))
        uncapped.append(compare_all(list(sampling.reference_torch(*args[:5], 0.0)), expected, task).passed)
    assert not uncapped[0]  # the batch of four (a row that keeps one token is the same capped or not)


def test_one_task_per_vocabulary_and_soft_cap_and_every_model_served_once():
    served = [m for t in SAMPLING_TASKS for m in get_task(t).models]
    assert sorted(served) == sorted(slug for slug, m in MODELS.items() if not m.synthetic)
    behaviours = {(get_task(t).architecture.vocab_size, get_task(t).params.get("softcap", 0.0)) for t in SAMPLING_TASKS}
    assert len(behaviours) == len(SAMPLING_TASKS) == 12
    for task_id in SAMPLING_TASKS:
        task = get_task(task_id)
        for model in task.models:
            assert MODELS[model].vocab_size == task.architecture.vocab_size
            assert float(MODELS[model].extra.get("final_logit_softcapping") or 0.0) == task.params.get("softcap", 0.0)
        assert all(s["vocab"] == task.architecture.vocab_size for s in task.test_shapes + task.benchmark_shapes)
        assert sorted(s["batch"] for s in task.test_shapes) == [1, 8, 64, 256]


def test_the_roofline_reads_logits_and_noise_and_writes_probs():
    model = sampling.roofline({"batch": 256, "vocab": 256000}, "float32", {})
    assert model.bytes_moved == 3 * 4 * 256 * 256000 + 256 * 20
    assert model.flops == sampling.FLOPS_PER_ELEMENT * 256 * 256000

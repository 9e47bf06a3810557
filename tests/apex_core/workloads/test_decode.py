"""Decode paths on the CPU: the static cache against the dynamic one, request seeds, token digests,
the eager option, the graph fallback's record, and --layers full."""

from __future__ import annotations

import hashlib
import struct

import pytest
import torch

from apex_core.errors import ApexUserError
from apex_core.workloads import benchmark, customize, get_workload, load
from apex_core.workloads import cpu_mini
from apex_core.workloads.embedded import EmbeddedWorkload
from apex_core.workloads.graphs import GraphCaptureError, capture, relative_error, root_cause
from apex_core.workloads.hf import hf_config
from apex_core.workloads.requests import combined_digest, prompt_ids, token_digest
from apex_core.workloads.results import StepTiming, merge_steps
from apex_core.workloads.spec import DEFAULT_LAYERS, WorkloadSpec

pytestmark = pytest.mark.site_packages  # runs cpu-mini from transformers, which the group's tests patch


def _logits_per_call(workload) -> list[torch.Tensor]:
    """Every output of the model's LM head (the prefill's, then one per decode step), recorded by a
    forward hook on the real module."""
    seen: list[torch.Tensor] = []
    workload.model.get_output_embeddings().register_forward_hook(lambda _m, _i, out: seen.append(out[:, -1, :].clone()))
    return seen


def _assert_same_decode(static, dynamic, seeds=(3, 11)) -> None:
    """Both paths give the same greedy tokens and, call by call, the same logits (float32)."""
    static_logits, dynamic_logits = _logits_per_call(static), _logits_per_call(dynamic)
    for seed in seeds:
        a, b = static.step(seed=seed), dynamic.step(seed=seed)
        assert a.token_digest == b.token_digest and a.token_count == b.token_count
        assert torch.equal(static.last_tokens, dynamic.last_tokens)
    assert len(static_logits) == len(dynamic_logits) == len(seeds) * (1 + static.spec.decode_tokens)
    for got, want in zip(static_logits, dynamic_logits):
        torch.testing.assert_close(got, want, atol=2e-4, rtol=1e-4)
    assert (static.decode_mode, dynamic.decode_mode) == ("eager_static", "eager_dynamic")


def test_cpu_minis_static_cache_decode_matches_the_dynamic_cache_path():
    static = load(get_workload("cpu-mini"))
    dynamic = load(customize(get_workload("cpu-mini"), kv_cache="dynamic"))
    try:
        _assert_same_decode(static, dynamic)
    finally:
        static.close()
        dynamic.close()


@pytest.mark.parametrize("family", ["llama", "qwen3.5", "gpt-oss", "deepseek-v3"])
def test_a_tiny_models_static_cache_decode_matches_the_dynamic_cache_path(family, tiny_model):
    """Llama; Qwen3.5, whose static cache keeps the linear-attention layers' recurrent state; GPT-OSS
    with a prompt longer than its sliding window; DeepSeek-V3's latent attention."""
    specs = [WorkloadSpec(id=f"tiny-{family}", model="llama-3-1-8b-instruct", batch=2, prompt_tokens=12, decode_tokens=6,
                          device="cpu", dtype="float32", kv_cache=kv).resolved() for kv in ("static", "dynamic")]
    static, dynamic = EmbeddedWorkload(specs[0], tiny_model(family), []), EmbeddedWorkload(specs[1], tiny_model(family), [])
    _assert_same_decode(static, dynamic)


def test_a_request_seed_changes_the_prompts_and_never_the_shapes():
    first, second = prompt_ids(512, 2, 16, 1), prompt_ids(512, 2, 16, 2)
    assert first.shape == second.shape == (2, 16) and first.dtype == torch.int64
    assert not torch.equal(first, second) and torch.equal(first, prompt_ids(512, 2, 16, 1))
    assert int(first.min()) >= 0 and int(first.max()) < 512
    shapes: list[list[tuple[int, ...]]] = []
    loaded = load(get_workload("cpu-mini"))
    try:
        digests = []
        for seed in (1, 2):
            seen: list[tuple[int, ...]] = []

            def spy(x, weight, eps, seen=seen):
                seen.append(x.shape)
                return cpu_mini.baseline_rms_norm()(x, weight, eps)

            with cpu_mini.use_rms_norm(spy):
                step = loaded.step(seed=seed)
            shapes.append(seen)
            digests.append(step.token_digest)
            assert step.request_seed == seed and step.token_count == 2 * (8 + 1)
        assert shapes[0] == shapes[1] and len(shapes[0]) > 0  # the same norm calls at the same sizes
        assert digests[0] != digests[1]
    finally:
        loaded.close()


def test_equal_seeds_give_equal_digests_across_loads_and_the_default_seed_is_the_specs():
    one, two = load(get_workload("cpu-mini")), load(get_workload("cpu-mini"))
    try:
        a, b = one.step(seed=7), two.step(seed=7)
        assert a.token_digest == b.token_digest and len(a.token_digest) == 64
        default = one.step()
        assert default.request_seed == one.spec.seed and default.token_digest == two.step(seed=one.spec.seed).token_digest
        assert token_digest(one.last_tokens) == default.token_digest
    finally:
        one.close()
        two.close()


def test_the_token_digest_is_sha256_of_little_endian_int64_rows():
    tokens = [[1, 2, 3], [4, 5, 70000]]
    expected = hashlib.sha256(b"".join(struct.pack("<q", t) for row in tokens for t in row)).hexdigest()
    assert token_digest(tokens) == expected == token_digest(torch.tensor(tokens))
    assert token_digest([[1, 2], [3, 4]]) != token_digest([[1, 3], [2, 4]])
    with pytest.raises(ValueError):
        token_digest([1, 2, 3])
    assert combined_digest(["a" * 64]) == "a" * 64 and combined_digest(["a" * 64, None]) is None
    assert combined_digest(["a" * 64, "b" * 64]) != combined_digest(["b" * 64, "a" * 64])


def test_merged_steps_keep_one_digest_of_their_mixes_in_order():
    def step(digest: str, seed: int) -> StepTiming:
        return StepTiming(prefill_s=0.1, decode_step_s=[0.01], batch=2, prompt_tokens=4, decode_tokens=1,
                          token_digest=digest, token_count=4, request_seed=seed, decode_mode="graph")

    merged = merge_steps([step("a" * 64, 1), step("b" * 64, 1)])
    assert merged.token_digest == combined_digest(["a" * 64, "b" * 64]) and merged.token_count == 8
    assert merged.request_seed == 1 and merged.decode_mode == "graph"
    assert merge_steps([step("a" * 64, 1), step("b" * 64, 2)]).request_seed is None


def test_eager_decode_is_an_option_that_enters_the_specs_key():
    graphs, eager = (customize(get_workload("llama-3-1-8b-instruct"), graphs=g, device="cpu").resolved() for g in (True, False))
    assert graphs.key() != eager.key()
    assert get_workload("cpu-mini").resolved().graphs is False  # the CPU has no graphs
    assert customize(get_workload("cpu-mini"), kv_cache="dynamic").resolved().graphs is False
    with pytest.raises(ApexUserError, match="--graphs needs the static KV cache"):
        customize(get_workload("cpu-mini"), kv_cache="dynamic", graphs=True)
    with pytest.raises(ApexUserError, match="--kv-cache applies to the transformers stack"):
        customize(get_workload("llama-3-1-8b-instruct-vllm"), kv_cache="static")
    loaded = load(customize(get_workload("cpu-mini"), graphs=False))
    try:
        assert loaded.decode_mode == "eager_static" and loaded.graph_fallback is None
        assert any("decode: eager over a static KV cache of 24 positions" in note for note in loaded.notes)
    finally:
        loaded.close()


def test_graphs_asked_for_on_the_cpu_fall_back_to_eager_and_the_result_records_why(tmp_path):
    """The CPU has no graphs: the capture refuses, honestly, and the workload runs the same decode eagerly."""
    spec = customize(get_workload("cpu-mini"), graphs=True)
    result = benchmark(spec, runs=2, warmup=1, results_dir=tmp_path)
    assert result.workload.graphs is True and result.decode_mode == "eager_static"
    assert result.graph_fallback == "CUDA/HIP graphs need a GPU and this workload runs on the CPU"
    assert any(result.graph_fallback in note and "fell back to eager" in note for note in result.notes)
    assert result.runs[0].token_digest == result.runs[1].token_digest is not None
    assert result.runs[0].token_count == 2 * (8 + 1)


def test_capture_refuses_the_cpu_and_comparisons_catch_what_a_replay_gets_wrong():
    with pytest.raises(GraphCaptureError, match="need a GPU"):
        capture(lambda: torch.ones(2), "cpu", lambda: None)
    reference = torch.tensor([[3.0, -1.0, 0.5]])
    assert relative_error(reference, reference.clone()) == 0.0
    assert relative_error(reference, reference * 1.001) < 1e-2 < relative_error(reference, reference.roll(1, dims=-1))
    assert relative_error(reference, torch.tensor([[3.0, float("nan"), 0.5]])) == float("inf")
    assert relative_error(reference, reference[:, :2]) == float("inf")
    try:
        try:
            raise ValueError("operation not permitted when stream is capturing")
        except ValueError:
            raise RuntimeError("capture invalidated") from None
    except RuntimeError as error:
        assert isinstance(root_cause(error), RuntimeError)  # 'from None' cuts the chain
    try:
        try:
            raise ValueError("operation not permitted when stream is capturing")
        except ValueError:
            raise RuntimeError("capture invalidated")  # noqa: B904  (the chain capture_end leaves)
    except RuntimeError as error:
        assert str(root_cause(error)) == "operation not permitted when stream is capturing"


def test_layers_full_resolves_to_the_models_real_depth():
    spec = customize(get_workload("llama-3-1-8b-instruct"), layers="full", device="cpu")
    assert spec.layers == "full" and spec.resolved().layers == 32
    assert hf_config(spec).num_hidden_layers == 32
    assert customize(get_workload("qwen3-5-27b"), layers="FULL").resolved().layers == 64
    assert customize(get_workload("llama-3-1-8b-instruct"), layers="3").resolved().layers == 3
    assert get_workload("llama-3-1-8b-instruct").resolved().layers == DEFAULT_LAYERS["llama-3-1-8b-instruct"]
    for bad in ("0", "-2", "all", "2.5"):
        with pytest.raises(ApexUserError, match="whole number of 1 or more, or 'full'"):
            customize(get_workload("cpu-mini"), layers=bad)
    assert WorkloadSpec.model_validate_json(spec.model_dump_json()).layers == "full"


def _one_line_error(done) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("apex: error: "), done.stderr
    return lines[0]


def test_the_benchmark_commands_decode_options(apex_cli, tmp_path):
    import json

    done = apex_cli("benchmark", "--workload", "cpu-mini", "--eager", "--layers", "full", "--runs", "1", "--warmup", "0",
                    "--json", "--results-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["workload"]["graphs"] is False and result["workload"]["layers"] == 1  # cpu-mini's registry depth
    assert result["decode_mode"] == "eager_static" and result["graph_fallback"] is None
    assert len(result["runs"][0]["token_digest"]) == 64 and result["runs"][0]["token_count"] == 2 * (8 + 1)
    # --layers takes a word now; the other options' errors are customize's, tested above in-process.
    assert "'full'" in _one_line_error(apex_cli("benchmark", "--workload", "cpu-mini", "--layers", "all"))

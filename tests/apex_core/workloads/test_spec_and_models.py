"""The workload catalogue, user errors, and the models built from the registry."""

from __future__ import annotations

import time

import numpy as np
import pytest

from apex_core.errors import ApexUserError, UnknownNameError
from apex_core.models import MODELS, get_model
from apex_core.workloads import customize, get_workload, list_workloads
from apex_core.workloads.hf import build_model, hf_config
from apex_core.workloads.rope import rope_parameters
from apex_core.workloads.spec import DEFAULT_LAYERS, WorkloadSpec

pytestmark = pytest.mark.site_packages  # runs cpu-mini from transformers, which the group's tests patch


def test_every_registry_model_has_a_workload_per_stack_and_the_catalogue_is_stable():
    ids = [s.id for s in list_workloads()]
    assert ids[0] == "cpu-mini" and len(ids) == len(set(ids))
    for slug in MODELS:
        if slug != "cpu-mini":
            assert {slug, f"{slug}-vllm", f"{slug}-sglang"} <= set(ids)
    assert get_workload("cpu-mini").device == "cpu" and get_workload("cpu-mini").dtype == "float32"


def test_an_unknown_workload_names_every_valid_one():
    with pytest.raises(UnknownNameError) as caught:
        get_workload("cpu-mni")
    message = str(caught.value)
    assert "did you mean 'cpu-mini'" in message and len(message.splitlines()) == 1
    assert all(spec.id in message for spec in list_workloads() if spec.stack == "transformers")
    assert "<id>-vllm and <id>-sglang" in message


def test_a_gpu_workload_on_the_cpu_says_so_before_it_loads_and_cpu_mini_does_not():
    on_cpu = customize(get_workload("llama-3-1-8b-instruct"), device="cpu").resolved().loading_message()
    assert on_cpu.startswith("llama-3-1-8b-instruct is a GPU workload running on this machine's CPU: slow")
    assert "figures say nothing about a GPU" in on_cpu and on_cpu.endswith("float32 on cpu)")
    assert get_workload("cpu-mini").resolved().loading_message().startswith("loading cpu-mini (transformers, 2 layers")


def test_customize_checks_the_users_values():
    spec = get_workload("cpu-mini")
    assert customize(spec, layers=1, kernels="liger").kernels == ("liger",)
    for bad in ({"layers": 0}, {"batch": 0}, {"decode_tokens": -1}, {"dtype": "fp8"}, {"kernels": "tensorrt"},
                {"device": "tpu"}, {"docker_image": "rocm/vllm:latest"}):
        with pytest.raises(ApexUserError):
            customize(spec, **bad)


def test_resolution_fixes_layers_dtype_and_device_and_the_key_follows_what_is_measured():
    spec = get_workload("qwen3-5-27b").model_copy(update={"device": "cpu"}).resolved()
    assert (spec.layers, spec.dtype, spec.device) == (DEFAULT_LAYERS["qwen3-5-27b"], "float32", "cpu")
    assert spec.key() == spec.model_copy(update={"description": "other words"}).key()
    assert spec.key() != spec.model_copy(update={"batch": 1}).key()


def test_rope_parameters_come_from_the_registry_text():
    assert rope_parameters(get_model("llama-3-1-8b-instruct")) == {
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}
    yarn = rope_parameters(get_model("deepseek-r1"))
    assert yarn["rope_type"] == "yarn" and yarn["factor"] == 40.0 and yarn["original_max_position_embeddings"] == 4096
    qwen = rope_parameters(get_model("qwen3-5-27b"))
    assert qwen == {"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25}


def test_every_registry_model_has_a_default_depth_and_nothing_else_does():
    assert set(DEFAULT_LAYERS) == set(MODELS)


@pytest.mark.parametrize("slug", sorted(s for s, m in MODELS.items() if not m.synthetic))
def test_each_embedded_default_builds_from_its_registry_config_with_real_widths(slug):
    """Built on the meta device: the structure and every width, without allocating weights; each
    family keeps the layer kinds, experts and attention that make its kernels what they are."""
    model_config = get_model(slug)
    spec = get_workload(slug).model_copy(update={"device": "cpu"}).resolved()
    config = hf_config(spec)
    assert config.num_hidden_layers == DEFAULT_LAYERS[slug]
    assert (config.hidden_size, config.vocab_size, config.num_attention_heads) == (
        model_config.hidden_size, model_config.vocab_size, model_config.num_attention_heads)
    model = build_model(spec, device="meta")
    embed = model.get_input_embeddings().weight
    assert tuple(embed.shape) == (model_config.vocab_size, model_config.hidden_size)
    names = {type(m).__name__ for m in model.modules()}
    family = model_config.family
    if family.startswith("qwen3.5"):
        assert config.layer_types == ["linear_attention"] * 3 + ["full_attention"]
        assert any(name.endswith("GatedDeltaNet") for name in names)
        if family == "qwen3.5-moe":
            assert (config.num_experts, config.num_experts_per_tok, config.shared_expert_intermediate_size) == (256, 8, 512)
    if family == "gpt-oss":
        assert (config.num_local_experts, config.num_experts_per_tok) == (model_config.num_experts, 4)
        assert config.layer_types == ["sliding_attention", "full_attention"]
    if family == "deepseek-v3":
        assert config.n_routed_experts == model_config.num_experts and config.first_k_dense_replace == 1  # one dense, one MoE
        assert any("MoE" in name for name in names)
    if family == "mixtral":
        assert (config.num_local_experts, config.num_experts_per_tok) == (8, 2)
    if family == "gemma2":
        assert config.layer_types == ["sliding_attention", "full_attention"] * 4
        assert (config.attn_logit_softcapping, config.final_logit_softcapping, config.sliding_window) == (50.0, 30.0, 4096)
    if family == "falcon":  # multi-query: one key and one value head beside the 71 query heads
        fused = model.transformer.h[0].self_attention.query_key_value
        assert fused.out_features == (model_config.num_attention_heads + 2) * model_config.head_dim
    if family == "phi3" and model_config.rope_scaling.startswith("longrope"):
        assert config.rope_parameters["rope_type"] == "longrope" and len(config.rope_parameters["long_factor"]) == 48


def test_cpu_mini_is_a_small_llama_whose_norms_call_the_task_entry_point():
    from apex_core.tasks import get_task
    from apex_core.workloads import cpu_mini, load

    task = get_task("cpu-mini__rms_norm")
    assert cpu_mini.baseline_rms_norm().__code__.co_filename == str(task.baseline_path)
    seen: list[tuple[tuple[int, ...], str, bool, float]] = []

    def spy(x, weight, eps):
        seen.append((x.shape, str(x.dtype), bool(x.flags["C_CONTIGUOUS"]), eps))
        inv = 1.0 / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + eps)
        return (x * inv * weight).astype(np.float32)

    loaded = load(get_workload("cpu-mini"))
    try:
        params = sum(p.numel() for p in loaded.model.parameters())
        assert params * 4 < 20 * 2**20  # a few MB of float32
        norms = [m for m in loaded.model.modules() if isinstance(m, cpu_mini.task_norm_class())]
        assert len(norms) == 2 * loaded.spec.layers + 1
        with cpu_mini.use_rms_norm(spy):
            step = loaded.step()
        spec = loaded.spec
        hidden = get_model("cpu-mini").hidden_size
        prefill_rows, decode_rows = spec.batch * spec.prompt_tokens, spec.batch
        assert seen[0] == ((prefill_rows, hidden), "float32", True, get_model("cpu-mini").rms_norm_eps)
        assert seen[-1][0] == (decode_rows, hidden)
        assert len(seen) == len(norms) * (1 + spec.decode_tokens)
        assert len(step.decode_step_s) == spec.decode_tokens and step.prefill_s > 0
    finally:
        loaded.close()
    assert cpu_mini.rms_norm_implementation() is cpu_mini.baseline_rms_norm()


def test_cpu_mini_runs_the_same_with_the_baseline_and_a_vectorized_norm():
    import torch

    from apex_core.kernels.rms_norm import reference_numpy
    from apex_core.workloads import cpu_mini
    from apex_core.workloads.hf import build_model

    spec = get_workload("cpu-mini").resolved()
    model = build_model(spec)
    ids = torch.arange(6).reshape(1, 6)
    with torch.inference_mode():
        baseline = model(input_ids=ids).logits
        with cpu_mini.use_rms_norm(reference_numpy):
            vectorized = model(input_ids=ids).logits
    torch.testing.assert_close(baseline, vectorized, atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_llama_with_one_layer_builds_and_steps_on_the_cpu_in_float32():
    """The real 8B widths (128k vocabulary) with one layer: about 1.3 B float32 parameters."""
    from apex_core.workloads import load

    spec = customize(get_workload("llama-3-1-8b-instruct"), layers=1, batch=1, prompt_tokens=4, decode_tokens=1,
                     device="cpu")
    started = time.perf_counter()
    loaded = load(spec)
    try:
        assert loaded.spec.dtype == "float32" and loaded.model.config.num_hidden_layers == 1
        assert loaded.model.config.hidden_size == 4096 and loaded.model.config.vocab_size == 128256
        step = loaded.step()
        assert step.prompt_token_count == 4 and len(step.decode_step_s) == 1
    finally:
        loaded.close()
    assert time.perf_counter() - started < 120


def test_a_workload_spec_refuses_unknown_fields_and_kernel_stacks():
    with pytest.raises(ValueError):
        WorkloadSpec(id="x", model="cpu-mini", kernels=("tensorrt",))
    with pytest.raises(ValueError):
        WorkloadSpec(id="x", model="cpu-mini", threads=3)  # type: ignore[call-arg]

"""The catalogue holds the reference system's 24 models, each with its published numbers, and
every entry builds: on the meta device at its full depth, transformers gives the parameter count
the model card states, which a wrong width, head count, expert count or vocabulary would break."""

from __future__ import annotations

import pytest

from apex_core.models import MODELS, get_model
from apex_core.workloads.families import FAMILIES
from apex_core.workloads.hf import build_model, config_class
from apex_core.workloads.spec import WorkloadSpec

REFERENCE_REGISTRY = (
    "meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct",
    "meta-llama/Llama-3.3-70B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3", "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "mistralai/Mixtral-8x22B-Instruct-v0.1", "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-32B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct", "Qwen/Qwen2.5-Coder-32B-Instruct", "google/gemma-2-9b-it", "google/gemma-2-27b-it",
    "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
    "moonshotai/Kimi-K2-Thinking", "microsoft/Phi-3.5-mini-instruct", "microsoft/phi-4", "tiiuae/falcon-7b-instruct",
    "openai/gpt-oss-120b", "openai/gpt-oss-20b", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-35B-A3B",
)
"""The reference system's registry (../shared/research/apex_inventory.md, section 4)."""

REAL = sorted(slug for slug, model in MODELS.items() if not model.synthetic)
PARAMETER_TOLERANCE = 0.025
"""Cards round their counts (8.03B, 671B); DeepSeek's cards count 671B without the
multi-token-prediction layer transformers does not build either."""


def test_the_catalogue_holds_every_model_of_the_reference_registry_once():
    assert sorted(m.hf_id for m in MODELS.values() if not m.synthetic) == sorted(REFERENCE_REGISTRY)


@pytest.mark.parametrize("slug", REAL)
def test_each_model_cites_its_config_and_two_copies_and_its_family_builds_it(slug):
    model = get_model(slug)
    assert model.source.startswith(f"https://huggingface.co/{model.hf_id}/")
    assert len(model.verified_against) >= 2, "each number confirmed in two copies"
    assert model.family in FAMILIES
    config_class(model)  # the pinned transformers has the class


@pytest.mark.parametrize("slug", [s for s in REAL if get_model(s).parameters_b])
def test_at_full_depth_transformers_builds_the_parameter_count_the_card_states(slug):
    model = get_model(slug)
    built = build_model(WorkloadSpec(id=slug, model=slug, layers="full", dtype="bfloat16", device="cpu"), device="meta")
    count = sum(p.numel() for p in built.parameters()) / 1e9
    assert count == pytest.approx(model.parameters_b, rel=PARAMETER_TOLERANCE), f"{slug}: built {count:.2f}B"


def test_every_parameter_count_is_stated_except_where_the_entry_says_why():
    missing = [slug for slug in REAL if not get_model(slug).parameters_b]
    assert missing == [], f"no card count for {missing}"


DEFAULT_DEPTH_WEIGHTS_GIB = 48.0
"""Weights of a default-depth workload in bfloat16 stay under this, so every one fits the smallest
GPU we are lent (an H100's 78 GiB, with the KV cache and activations beside them)."""


@pytest.mark.parametrize("slug", REAL)
def test_every_default_depth_workload_fits_one_gpu_in_bfloat16(slug):
    from apex_core.workloads import get_workload
    from apex_core.workloads.embedded import weight_bytes

    spec = get_workload(slug).model_copy(update={"device": "cpu", "dtype": "bfloat16"}).resolved()
    assert weight_bytes(spec) / 2**30 < DEFAULT_DEPTH_WEIGHTS_GIB

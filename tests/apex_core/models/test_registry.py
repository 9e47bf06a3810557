import pytest
from pydantic import ValidationError

from apex_core.errors import UnknownNameError
from apex_core.models import MODELS, ModelConfig, get_model, model_slug


def test_the_four_target_models_are_registered_with_sources():
    for slug in ("llama-3-1-8b-instruct", "qwen3-5-27b", "gpt-oss-20b", "deepseek-r1"):
        model = MODELS[slug]
        assert model.source.startswith("https://huggingface.co/")
        assert model.verified_against


def test_published_numbers():
    llama = get_model("meta-llama/Llama-3.1-8B-Instruct")
    assert (llama.hidden_size, llama.num_attention_heads, llama.num_key_value_heads, llama.head_dim) == (4096, 32, 8, 128)
    oss = get_model("gpt-oss-20b")
    assert (oss.num_experts, oss.experts_per_token, oss.hidden_size) == (32, 4, 2880)
    r1 = get_model("deepseek-r1")
    assert (r1.num_experts, r1.experts_per_token, r1.extra["kv_lora_rank"]) == (256, 8, 512)
    qwen = get_model("Qwen/Qwen3.5-27B")
    assert (qwen.hidden_size, qwen.head_dim, qwen.num_experts) == (5120, 256, 0)


def test_slugs_follow_the_task_id_convention():
    assert model_slug("meta-llama/Llama-3.1-8B-Instruct") == "llama-3-1-8b-instruct"
    assert model_slug("Qwen/Qwen3.5-27B") == "qwen3-5-27b"


def test_a_moe_model_without_experts_is_refused():
    data = MODELS["gpt-oss-20b"].model_dump()
    data["num_experts"] = 0
    with pytest.raises(ValidationError):
        ModelConfig(**data)


def test_an_unknown_model_suggests_a_registered_one():
    with pytest.raises(UnknownNameError, match="llama-3-1-8b-instruct"):
        get_model("llama-3.1-8b")

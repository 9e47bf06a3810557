"""`apex tasks new` for qk_norm: only models whose attention normalizes each q and k head get it."""

import pytest

from apex_core.errors import ApexUserError
from apex_core.models import MODELS
from apex_core.tasks import catalog
from apex_core.tasks.scaffold import scaffold_task


@pytest.mark.parametrize("model", ["gemma-2-9b-it", "llama-3-1-8b-instruct", "deepseek-r1"])
def test_a_model_without_per_head_q_and_k_norms_is_refused_in_one_line(model, tmp_path):
    # Gemma 2's norms are zero-centered like Qwen3.5's, but its attention has no q_norm or k_norm.
    with pytest.raises(ApexUserError, match=f"^{model} normalizes no query or key heads") as refused:
        scaffold_task(model, "qk_norm", tmp_path)
    assert "\n" not in str(refused.value) and list(tmp_path.iterdir()) == []


def test_only_the_qwen3_5_models_carry_the_qk_norm_flag():
    assert sorted(slug for slug, model in MODELS.items() if model.extra.get("qk_norm")) == ["qwen3-5-27b", "qwen3-5-35b-a3b"]


def test_the_moe_models_task_is_copied_from_the_27b_one_and_is_its_own(definitions_without):
    made = scaffold_task("qwen3-5-35b-a3b", "qk_norm", definitions_without("qwen3-5-35b-a3b__qk_norm"))
    task = catalog.get_task("qwen3-5-35b-a3b__qk_norm")
    assert made.copied_from == "qwen3-5-27b__qk_norm" and made.solution is not None
    assert (task.params["num_heads"], task.params["num_kv_heads"], task.params["head_dim"]) == (16, 2, 256)
    # Other head counts than the 27B's (24, 4): not the same task, so no "runs exactly" TODO.
    assert "runs exactly" not in made.path.read_text()

"""`apex tasks new` for fused_moe_shared: only models with shared experts get it, with their
routed scaling factor and, for Qwen's sigmoid-gated shared expert, the gate."""

import pytest

from apex_core.errors import ApexUserError
from apex_core.models import MODELS
from apex_core.tasks import catalog
from apex_core.tasks.scaffold import scaffold_task


@pytest.mark.parametrize("model", ["mixtral-8x7b-instruct-v0-1", "gpt-oss-20b", "llama-3-1-8b-instruct"])
def test_a_model_without_shared_experts_is_refused_in_one_line(model, tmp_path):
    with pytest.raises(ApexUserError, match=f"^{model} has no shared experts") as refused:
        scaffold_task(model, "fused_moe_shared", tmp_path)
    assert "\n" not in str(refused.value) and list(tmp_path.iterdir()) == []


def test_every_model_with_shared_experts_has_its_task_or_is_listed_in_one():
    served = {model for task in catalog.all_tasks().values() if task.kernel == "fused_moe_shared" for model in task.models}
    assert served == {slug for slug, model in MODELS.items() if model.num_shared_experts > 0}


def test_kimi_k2_is_copied_from_deepseek_with_its_own_scaling_factor(definitions_without):
    made = scaffold_task("kimi-k2-thinking", "fused_moe_shared", definitions_without("kimi-k2-thinking__fused_moe_shared"))
    task = catalog.get_task("kimi-k2-thinking__fused_moe_shared")
    assert made.copied_from == "deepseek-r1__fused_moe_shared"
    assert task.params["routed_scaling_factor"] == 2.827 and task.params["shared_gate"] is False


def test_qwen_gets_the_gate_and_no_scaling_whatever_it_is_copied_from(definitions_without):
    made = scaffold_task("qwen3-5-35b-a3b", "fused_moe_shared", definitions_without("qwen3-5-35b-a3b__fused_moe_shared"))
    task = catalog.get_task("qwen3-5-35b-a3b__fused_moe_shared")
    assert made.copied_from is not None
    assert task.params["routed_scaling_factor"] == 1.0 and task.params["shared_gate"] is True

"""`apex tasks new` for gemm_mxfp4: only models whose checkpoint stores its experts in MXFP4 get it,
and a kernel's first task scaffolds with placeholder shapes instead of failing to load."""

import pytest

from apex_core.errors import ApexUserError
from apex_core.models import MODELS
from apex_core.tasks import catalog
from apex_core.tasks.scaffold import scaffold_task


@pytest.mark.parametrize("model", ["llama-3-1-8b-instruct", "deepseek-r1", "kimi-k2-thinking", "mixtral-8x7b-instruct-v0-1"])
def test_a_model_without_mxfp4_experts_is_refused_in_one_line(model, tmp_path):
    with pytest.raises(ApexUserError, match=f"^{model}'s checkpoint stores no experts in mxfp4") as refused:
        scaffold_task(model, "gemm_mxfp4", tmp_path)
    assert "\n" not in str(refused.value) and list(tmp_path.iterdir()) == []


def test_only_the_gpt_oss_models_store_their_experts_in_mxfp4():
    assert sorted(slug for slug, m in MODELS.items() if m.extra.get("expert_quantization") == "mxfp4") == [
        "gpt-oss-120b", "gpt-oss-20b"]


def test_the_120b_is_refused_because_the_20b_task_stands_for_it(tmp_path):
    with pytest.raises(ApexUserError, match="^gpt-oss-20b__gemm_mxfp4 already stands for gpt-oss-120b"):
        scaffold_task("gpt-oss-120b", "gemm_mxfp4", tmp_path)


def test_a_kernels_first_task_loads_with_its_cpu_shapes_as_placeholders(definitions_without):
    made = scaffold_task("gpt-oss-20b", "gemm_mxfp4", definitions_without("*__gemm_mxfp4"))
    task = catalog.get_task("gpt-oss-20b__gemm_mxfp4")
    assert made.copied_from is None and made.solution is not None
    assert task.test_shapes == task.cpu_shapes
    assert "placeholders" in made.path.read_text()

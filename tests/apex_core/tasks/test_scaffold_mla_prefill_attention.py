"""`apex tasks new` for mla_prefill_attention: only models with multi-head latent attention get it,
each with its own heads and YaRN factor from the registry, and such a model asking for the plain
GQA prefill_attention (which would load, with the wrong value width and scale) is sent to it."""

import pytest

from apex_core.errors import ApexUserError
from apex_core.models import MODELS
from apex_core.tasks import catalog
from apex_core.tasks.scaffold import scaffold_task


@pytest.mark.parametrize("model", ["llama-3-1-8b-instruct", "gpt-oss-20b", "qwen3-5-27b"])
def test_a_model_without_mla_is_refused_in_one_line(model, tmp_path):
    with pytest.raises(ApexUserError, match=f"^{model} attends with .* not multi-head latent attention") as refused:
        scaffold_task(model, "mla_prefill_attention", tmp_path)
    assert "\n" not in str(refused.value) and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("model", ["deepseek-r1", "kimi-k2-thinking"])
def test_an_mla_model_asking_for_the_gqa_prefill_is_sent_to_the_mla_variant(model, tmp_path):
    with pytest.raises(ApexUserError, match="value heads 128, .*: its prefill_attention is mla_prefill_attention$"):
        scaffold_task(model, "prefill_attention", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_every_mla_model_has_its_task_or_is_listed_in_one():
    served = {model for task in catalog.all_tasks().values() if task.kernel == "mla_prefill_attention" for model in task.models}
    assert served == {slug for slug, model in MODELS.items() if model.attention == "mla"}


def test_the_first_task_of_the_kernel_takes_every_number_from_the_model(definitions_without):
    made = scaffold_task("deepseek-r1", "mla_prefill_attention", definitions_without("*__mla_prefill_attention"))
    task = catalog.get_task("deepseek-r1__mla_prefill_attention")
    assert made.copied_from is None and "TODO" in made.path.read_text()
    assert {s["heads"] for s in task.test_shapes} == {128} and "factor 40" in str(task.params["rope_scaling"])


def test_kimi_k2_is_copied_from_deepseek_with_its_own_heads_and_yarn_factor(definitions_without):
    made = scaffold_task("kimi-k2-thinking", "mla_prefill_attention", definitions_without("kimi-k2-thinking__mla_prefill_attention"))
    task = catalog.get_task("kimi-k2-thinking__mla_prefill_attention")
    assert made.copied_from == "deepseek-r1__mla_prefill_attention"
    assert {s["heads"] for s in task.test_shapes} == {64} and "factor 64" in str(task.params["rope_scaling"])
    assert made.solution is not None and made.solution.name == "solution.py"

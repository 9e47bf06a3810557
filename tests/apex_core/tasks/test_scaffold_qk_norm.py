"""`apex tasks new` for qk_norm: only models whose attention normalizes each q and k head get it."""

import shutil

import pytest

from apex_core.errors import ApexUserError
from apex_core.models import MODELS
from apex_core.tasks import catalog
from apex_core.tasks.catalog import DEFINITIONS_DIR, TASK_DIRS_ENV
from apex_core.tasks.scaffold import scaffold_task


@pytest.mark.parametrize("model", ["gemma-2-9b-it", "llama-3-1-8b-instruct", "deepseek-r1"])
def test_a_model_without_per_head_q_and_k_norms_is_refused_in_one_line(model, tmp_path):
    # Gemma 2's norms are zero-centered like Qwen3.5's, but its attention has no q_norm or k_norm.
    with pytest.raises(ApexUserError, match=f"^{model} normalizes no query or key heads") as refused:
        scaffold_task(model, "qk_norm", tmp_path)
    assert "\n" not in str(refused.value) and list(tmp_path.iterdir()) == []


def test_only_the_qwen3_5_models_carry_the_qk_norm_flag():
    assert sorted(slug for slug, model in MODELS.items() if model.extra.get("qk_norm")) == ["qwen3-5-27b", "qwen3-5-35b-a3b"]


@pytest.fixture
def without_the_moe_task(tmp_path, monkeypatch):
    """The shipped definitions without Qwen3.5-35B-A3B's qk_norm task, and a folder for the new one."""
    shipped = tmp_path / "shipped"
    shutil.copytree(DEFINITIONS_DIR, shipped, ignore=shutil.ignore_patterns("qwen3-5-35b-a3b__qk_norm.toml"))
    monkeypatch.setattr(catalog, "DEFINITIONS_DIR", shipped)
    new = tmp_path / "new"
    new.mkdir()
    monkeypatch.setenv(TASK_DIRS_ENV, str(new))
    catalog.clear_cache()
    yield new
    catalog.clear_cache()


def test_the_moe_models_task_is_copied_from_the_27b_one_and_is_its_own(without_the_moe_task):
    made = scaffold_task("qwen3-5-35b-a3b", "qk_norm", without_the_moe_task)
    task = catalog.get_task("qwen3-5-35b-a3b__qk_norm")
    assert made.copied_from == "qwen3-5-27b__qk_norm" and made.solution is not None
    assert (task.params["num_heads"], task.params["num_kv_heads"], task.params["head_dim"]) == (16, 2, 256)
    # Other head counts than the 27B's (24, 4): not the same task, so no "runs exactly" TODO.
    assert "runs exactly" not in made.path.read_text()

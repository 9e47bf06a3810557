"""`apex tasks new`: a scaffolded task loads through the catalogue; each refusal is one line, exit 2."""

import pytest

from apex_core.errors import ApexUserError
from apex_core.tasks import catalog
from apex_core.tasks.catalog import DEFINITIONS_DIR, TASK_DIRS_ENV
from apex_core.tasks.scaffold import scaffold_task


def _one_line_error(done) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_a_scaffolded_task_loads_through_the_catalogue(apex_cli, tmp_path):
    done = apex_cli("tasks", "new", "--model", "deepseek-r1", "--kernel", "reshape_and_cache", "--dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    path = tmp_path / "deepseek-r1__reshape_and_cache.toml"
    assert f"wrote {path}" in done.stdout and "apex tasks verify --task deepseek-r1__reshape_and_cache" in done.stdout
    text = path.read_text()
    assert text.count("TODO") >= 2 and "kernel = \"reshape_and_cache\"" in text
    assert "baseline" not in text  # the kernel's defaults are not written again
    listed = apex_cli("tasks", "show", "deepseek-r1__reshape_and_cache", "--json", env={TASK_DIRS_ENV: str(tmp_path)})
    assert listed.returncode == 0, listed.stderr
    assert '"family": "reshape_and_cache"' in listed.stdout and '"num_kv_heads": 128' in listed.stdout


def test_the_scaffold_copies_what_the_kernels_tasks_do_not_share(tmp_path, monkeypatch):
    monkeypatch.setenv(TASK_DIRS_ENV, str(tmp_path))
    catalog.clear_cache()
    try:
        made = scaffold_task("gpt-oss-20b", "gemm_fp8", tmp_path)
        task = catalog.get_task("gpt-oss-20b__gemm_fp8")
    finally:
        catalog.clear_cache()
    assert made.copied_from == "llama-3-1-8b-instruct__gemm_fp8"  # fewer own keys than DeepSeek's block-scaled task
    assert task.baseline == "gemm_fp8/baseline_per_token_triton.py" and task.test_shapes and task.hidden_shapes
    assert made.solution is not None and made.solution.name == "solution.py"


@pytest.mark.parametrize(
    ("model", "kernel", "copied_from"),
    [
        ("gemma-2-9b-it", "rms_norm", "qwen3-5-27b__rms_norm"),  # zero-centered (1 + w), as Qwen3.5's
        ("llama-3-1-70b-instruct", "rms_norm", "llama-3-1-8b-instruct__rms_norm"),
        ("kimi-k2-thinking", "moe_router", "deepseek-r1__moe_router"),  # DeepSeek-V3's sigmoid, grouped routing
    ],
)
def test_a_new_models_task_is_copied_from_the_task_of_the_most_alike_model(tmp_path, monkeypatch, model, kernel, copied_from):
    monkeypatch.setenv(TASK_DIRS_ENV, str(tmp_path))
    catalog.clear_cache()
    try:
        made = scaffold_task(model, kernel, tmp_path)
        task = catalog.get_task(f"{model}__{kernel}")
    finally:
        catalog.clear_cache()
    assert made.copied_from == copied_from
    if model.startswith("gemma"):
        assert task.params["zero_centered"] is True and task.reference.endswith("reference_torch_zero_centered")


@pytest.mark.parametrize(("model", "kernel", "standing_for_it"), [
    ("mistral-7b-instruct-v0-3", "rms_norm", "llama-3-1-8b-instruct__rms_norm"),  # as wide, the same eps
    ("gpt-oss-120b", "swiglu_clamped", "gpt-oss-20b__swiglu_clamped"),  # the same experts' width
])
def test_a_model_that_runs_an_existing_task_exactly_is_pointed_to_its_also_models(tmp_path, model, kernel, standing_for_it):
    with pytest.raises(ApexUserError) as caught:
        scaffold_task(model, kernel, tmp_path)
    assert str(caught.value).startswith(f"{standing_for_it} already is {kernel} at {model}'s shapes and constants: "
                                        f'add "{model}" to its also_models')
    assert list(tmp_path.iterdir()) == []


def test_a_shared_solution_with_constants_asks_for_the_models_table(tmp_path):
    made = scaffold_task("qwen3-5-27b", "fused_moe", tmp_path)
    assert any("[qwen3-5-27b] table to reference_solutions/fused_moe/constants.toml" in step for step in made.to_do)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--model", "llama-4", "--kernel", "rms_norm"], "unknown model 'llama-4'; known models: cpu-mini, deepseek-r1"),
        (["--model", "deepseek-r1", "--kernel", "rmsnorm"], "unknown kernel 'rmsnorm'; known kernels: causal_conv1d"),
        (["--model", "llama-3-1-8b-instruct", "--kernel", "mla_decode"], "'@kv_lora_rank' names no field of model"),
    ],
)
def test_an_unknown_name_or_a_model_the_kernel_cannot_take_is_one_line(apex_cli, tmp_path, args, expected):
    line = _one_line_error(apex_cli("tasks", "new", *args, "--dir", str(tmp_path)))
    assert expected in line
    assert list(tmp_path.iterdir()) == []


def test_an_existing_task_is_refused_unless_forced(apex_cli, tmp_path):
    args = ["tasks", "new", "--model", "deepseek-r1", "--kernel", "reshape_and_cache", "--dir", str(tmp_path)]
    assert apex_cli(*args).returncode == 0
    line = _one_line_error(apex_cli(*args))
    assert "already exists" in line and "--force" in line
    assert apex_cli(*args, "--force").returncode == 0
    shipped = _one_line_error(apex_cli("tasks", "new", "--model", "llama-3-1-8b-instruct", "--kernel", "rms_norm"))
    assert "already exists" in shipped and str(DEFINITIONS_DIR) in shipped


def test_a_shipped_task_defined_elsewhere_is_not_defined_twice(tmp_path):
    with pytest.raises(ApexUserError, match="already defined in .*llama-3-1-8b-instruct__rms_norm.toml; edit that file"):
        scaffold_task("llama-3-1-8b-instruct", "rms_norm", tmp_path, force=True)


def test_no_shipped_definition_still_has_a_scaffolds_todo():
    assert [p.name for p in DEFINITIONS_DIR.glob("*.toml") if "TODO" in p.read_text()] == []

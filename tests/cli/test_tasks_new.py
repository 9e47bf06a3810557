"""`apex tasks new`: a scaffolded task loads through the catalogue; each refusal is one line, exit 2."""

import shutil
from pathlib import Path

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
    # a per-token task (gpt-oss's router and MoE are like Mixtral's), not DeepSeek's block-scaled one
    assert made.copied_from != "deepseek-r1__gemm_fp8" and made.copied_from.endswith("__gemm_fp8")
    assert task.baseline == "gemm_fp8/baseline_per_token_triton.py" and task.test_shapes and task.hidden_shapes
    assert made.solution is not None and made.solution.name == "solution.py"


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """Make the shipped definitions a copy to edit (``shipped(edit)``), with a folder for new tasks."""
    def copy(drop: tuple[str, ...] = (), unlist: str | None = None) -> Path:
        """The copy without the ``drop`` task ids, and with ``unlist``'s also_models line taken out."""
        definitions = tmp_path / "shipped"
        shutil.copytree(DEFINITIONS_DIR, definitions, ignore=shutil.ignore_patterns(*(f"{t}.toml" for t in drop)))
        if unlist:
            path = definitions / f"{unlist}.toml"
            path.write_text("".join(line for line in path.read_text().splitlines(keepends=True) if not line.startswith("also_models")))
        monkeypatch.setattr(catalog, "DEFINITIONS_DIR", definitions)
        new = tmp_path / "new"
        new.mkdir()
        monkeypatch.setenv(TASK_DIRS_ENV, str(new))
        catalog.clear_cache()
        return new

    yield copy
    catalog.clear_cache()


@pytest.mark.parametrize(
    ("model", "kernel", "copied_from", "drop"),
    [
        # zero-centered (1 + w), as Qwen3.5's, though Qwen2.5's plain norm shares its attention kind
        ("gemma-2-9b-it", "rms_norm", "qwen3-5-27b__rms_norm", ("gemma-2-9b-it__rms_norm", "gemma-2-27b-it__rms_norm")),
        ("llama-3-1-70b-instruct", "rms_norm", "llama-3-1-8b-instruct__rms_norm", ("llama-3-1-70b-instruct__rms_norm",)),
        # DeepSeek-V3's sigmoid, grouped routing
        ("kimi-k2-thinking", "moe_router", "deepseek-r1__moe_router", ("kimi-k2-thinking__moe_router",)),
    ],
)
def test_a_new_models_task_is_copied_from_the_task_of_the_most_alike_model(shipped, model, kernel, copied_from, drop):
    new = shipped(drop)
    made = scaffold_task(model, kernel, new)
    task = catalog.get_task(f"{model}__{kernel}")
    assert made.copied_from == copied_from
    if model.startswith("gemma"):
        assert task.params["zero_centered"] is True and task.reference.endswith("reference_torch_zero_centered")


@pytest.mark.parametrize(("model", "kernel", "same_as"), [
    ("mistral-7b-instruct-v0-3", "rms_norm", "llama-3-1-8b-instruct__rms_norm"),  # as wide, the same eps
    ("gpt-oss-120b", "swiglu_clamped", "gpt-oss-20b__swiglu_clamped"),  # the same experts' width
])
def test_a_scaffold_that_runs_an_existing_task_exactly_says_so_in_a_todo(shipped, model, kernel, same_as):
    new = shipped(unlist=same_as)
    made = scaffold_task(model, kernel, new)
    text = made.path.read_text()
    assert f"# TODO: as copied, this runs exactly {same_as}" in text and f'add "{model}" to that task\'s also_models' in text
    assert made.to_do[0].startswith(f"as copied it runs exactly {same_as}: if {model}'s numbers are the same")


def test_a_model_a_task_already_stands_for_or_a_kernel_it_does_not_run_is_refused(tmp_path):
    with pytest.raises(ApexUserError, match=r"^llama-3-1-8b-instruct__rms_norm already stands for mistral-7b-instruct-v0-3 \(its also_models\)"):
        scaffold_task("mistral-7b-instruct-v0-3", "rms_norm", tmp_path)
    with pytest.raises(ApexUserError, match="falcon-7b-instruct normalizes with 'layer' norm, not RMSNorm"):
        scaffold_task("falcon-7b-instruct", "fused_add_rms_norm", tmp_path)
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

import shutil
from pathlib import Path

import pytest

from apex_core.errors import TaskDefinitionError, UnknownNameError
from apex_core.models import MODELS
from apex_core.tasks import all_tasks, find_tasks, get_task
from apex_core.tasks.catalog import DEFINITIONS_DIR, TASK_DIRS_ENV, load_task_file


def test_both_foundation_tasks_are_shipped():
    assert {"cpu-mini__rms_norm", "llama-3-1-8b-instruct__rms_norm"} <= set(all_tasks())


def test_model_references_are_resolved_from_the_registry():
    task = get_task("llama-3-1-8b-instruct__rms_norm")
    assert all(shape["hidden"] == 4096 for shape in task.test_shapes)
    assert task.params["eps"] == 1e-5
    assert task.architecture.hf_id == "meta-llama/Llama-3.1-8B-Instruct"


def test_the_cpu_task_is_python_over_numpy_and_the_llama_task_is_triton_in_bf16():
    cpu = get_task("cpu-mini__rms_norm")
    assert (cpu.language, cpu.array_library, cpu.dtype, cpu.entry_point) == ("python", "numpy", "float32", "rms_norm")
    llama = get_task("llama-3-1-8b-instruct__rms_norm")
    assert (llama.language, llama.array_library, llama.dtype) == ("triton", "torch", "bfloat16")
    assert llama.solution_filename == "solution.py"
    assert (llama.library.module, llama.library.function) == ("aiter.ops.triton.normalization.rmsnorm", "rms_norm")


def test_filters_by_model_and_kernel():
    llama = find_tasks(model="meta-llama/Llama-3.1-8B-Instruct")
    assert llama and all(t.model == "llama-3-1-8b-instruct" for t in llama)
    assert [t.id for t in find_tasks(model="llama-3-1-8b-instruct", kernel="rms_norm")] == ["llama-3-1-8b-instruct__rms_norm"]
    assert len(find_tasks(kernel="rms_norm")) >= 2
    with pytest.raises(UnknownNameError):
        find_tasks(kernel="rmsnorm")


def test_an_unknown_task_id_suggests_the_nearest():
    with pytest.raises(UnknownNameError, match="cpu-mini__rms_norm"):
        get_task("cpu-mini__rmsnorm")


def test_the_content_hash_changes_with_the_definition():
    task = get_task("cpu-mini__rms_norm")
    changed = task.model_copy(update={"difficulty": 2})
    assert task.content_hash() != changed.content_hash()


def test_the_behaviour_hash_ignores_the_name_and_prose_but_not_what_is_checked():
    task = get_task("llama-3-1-8b-instruct__rms_norm")
    renamed = task.model_copy(update={"id": "other__rms_norm", "model": "other", "description": "x", "contract": "y"})
    assert renamed.behaviour_hash() == task.behaviour_hash() and renamed.content_hash() != task.content_hash()
    other_eps = task.model_copy(update={"params": {**task.params, "eps": 1e-6}})
    assert other_eps.behaviour_hash() != task.behaviour_hash()
    other_shapes = get_task("qwen3-5-27b__rms_norm")
    assert other_shapes.behaviour_hash() != task.behaviour_hash()


def test_the_cpu_check_hash_ignores_what_only_a_gpu_grading_uses_but_not_the_small_shapes():
    task = get_task("llama-3-1-8b-instruct__gemm_bf16")
    other_model = get_task("qwen2-5-7b-instruct__gemm_bf16")  # other GPU shapes, the same small ones
    assert other_model.behaviour_hash() != task.behaviour_hash()
    assert other_model.cpu_check_hash() == task.cpu_check_hash()
    other_small = task.model_copy(update={"cpu_shapes": task.cpu_shapes[:1]})
    assert other_small.cpu_check_hash() != task.cpu_check_hash()
    other_tolerance = task.model_copy(update={"tolerances": {}})
    assert other_tolerance.cpu_check_hash() != task.cpu_check_hash()


def _copy_definition(tmp_path: Path, name: str = "cpu-mini__rms_norm") -> Path:
    target = tmp_path / f"{name}.toml"
    shutil.copyfile(DEFINITIONS_DIR / "cpu-mini__rms_norm.toml", target)
    return target


@pytest.mark.parametrize(
    ("edit", "complaint"),
    [
        (lambda s: "difficulty = 7\n" + s, "difficulty"),
        (lambda s: s.replace('language = "python"', 'language = "cobol"'), "language"),
        (lambda s: s.replace('model = "cpu-mini"', 'model = "no-such-model"'), "unknown model"),
        (lambda s: s.replace('hidden = "@hidden_size"', 'hidden = "@hidden_sise"'), "names no field"),
        (lambda s: s.replace('reference_numpy', 'reference_missing'), "no function"),
        (lambda s: s.replace('"__init__.py:make_inputs_numpy"', '"inputs.py:make_inputs_numpy"'), "no file 'inputs.py'"),
        (lambda s: s.replace('baseline_python.py', 'nowhere.py'), "not found"),
        (lambda s: s.replace('[tolerances]\nfloat32', '[tolerances]\nfloat64'), "no tolerance"),
        (lambda s: "unexpected_key = 1\n" + s, "unexpected_key"),
        (lambda s: s + "\nbatch = 2\n", "expected ['hidden', 'rows']"),
        (lambda s: 'id = "cpu-mini-rms_norm"\n' + s, "'<model-slug>__<kernel>'"),
        (lambda s: 'id = "cpu-mini__rms_norm_hip"\n' + s, "must be 'cpu-mini__rms_norm'"),
        (lambda s: s.replace('"__init__.py:reference_numpy"', '"apex_core.kernels.rms_norm:reference_numpy"'),
         "must be '<file>.py:<function>', a path relative to apex_core/kernels/rms_norm/"),
        (lambda s: s.replace('"baseline_python.py"', '"../gemm_bf16/baseline_triton.py"'), "leaves apex_core/kernels/rms_norm/"),
        (lambda s: s.replace('"baseline_python.py"', '"baseline_python"'), "must be '<file>'"),
        (lambda s: s.replace('kernel = "rms_norm"', 'kernel = "rms_nrm"'), "unknown kernel 'rms_nrm'"),
        (lambda s: 'family = "rms_norm"\n' + s, "'family' is not stated in a task"),
        (lambda s: s.replace('drop_defaults = [', 'drop_defaults = ["speedup_ceiling", '), "does not set"),
        (lambda s: s.replace('drop_defaults = [', 'drop_defaults = ["language", '), "which the task also states"),
        (lambda s: s.replace('[tolerances]', '[tolerances'), "not valid TOML"),
    ],
)
def test_a_malformed_definition_is_one_clear_error_naming_the_file(tmp_path, edit, complaint):
    path = _copy_definition(tmp_path)
    path.write_text(edit(path.read_text()))
    with pytest.raises(TaskDefinitionError) as caught:
        load_task_file(path)
    message = str(caught.value)
    assert complaint in message and str(path) in message and "\n" not in message


def test_loading_every_task_imports_no_kernel_module_so_listing_tasks_does_not_pull_in_pytorch():
    import subprocess
    import sys

    script = "import sys; from apex_core.tasks import all_tasks; all_tasks(); print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('apex_core.kernels.')))"
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[3], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_definition_whose_file_name_differs_from_its_id_is_refused(tmp_path):
    path = _copy_definition(tmp_path, "other__rms_norm")
    with pytest.raises(TaskDefinitionError, match="file name must be 'cpu-mini__rms_norm.toml'"):
        load_task_file(path)


def test_user_task_directories_join_the_catalogue_and_duplicates_are_refused(tmp_path, monkeypatch):
    _copy_definition(tmp_path)
    monkeypatch.setenv(TASK_DIRS_ENV, str(tmp_path))
    with pytest.raises(TaskDefinitionError, match="defined twice"):
        all_tasks()


def test_a_missing_user_task_directory_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv(TASK_DIRS_ENV, str(tmp_path / "absent"))
    with pytest.raises(TaskDefinitionError, match="does not exist"):
        all_tasks()


def test_the_suite_has_at_least_forty_tasks_across_the_four_first_models_and_every_task_has_a_registry_model():
    real = [t for t in all_tasks().values() if not t.architecture.synthetic]
    first = {"llama-3-1-8b-instruct", "qwen3-5-27b", "gpt-oss-20b", "deepseek-r1"}
    assert len([t for t in real if t.model in first]) >= 40
    assert first | {"gemma-2-9b-it", "gemma-2-27b-it"} <= {t.model for t in real} <= set(MODELS)


def test_an_in_place_output_cannot_also_be_a_row_strided_input():
    task = get_task("llama-3-1-8b-instruct__reshape_and_cache")
    with pytest.raises(ValueError, match="strided_args cannot name in-place outputs"):
        type(task).model_validate({**task.model_dump(), "strided_args": [task.output_args[0]]})


def test_a_boolean_parameter_from_the_registry_stays_a_boolean():
    params = get_task("qwen3-5-27b__rms_norm").params
    assert params["zero_centered"] is True and isinstance(params["eps"], float)


def _llama_rms_norm_listing(tmp_path: Path, also: str) -> Path:
    target = tmp_path / "llama-3-1-8b-instruct__rms_norm.toml"
    text = "".join(line for line in (DEFINITIONS_DIR / target.name).read_text().splitlines(keepends=True)
                   if not line.startswith("also_models"))
    target.write_text(text.replace('kernel = "rms_norm"', f'kernel = "rms_norm"\nalso_models = [{also}]', 1))
    return target


def test_a_task_can_stand_for_another_model_that_runs_the_kernel_at_the_same_shapes(tmp_path):
    task = load_task_file(_llama_rms_norm_listing(tmp_path, '"mistral-7b-instruct-v0-3"'))
    assert task.models == ("llama-3-1-8b-instruct", "mistral-7b-instruct-v0-3")
    assert task.behaviour_hash() == get_task("llama-3-1-8b-instruct__rms_norm").behaviour_hash()


@pytest.mark.parametrize(("also", "complaint"), [
    ('"qwen2-5-7b-instruct"', "'qwen2-5-7b-instruct' runs this kernel differently (benchmark_shapes, cpu_shapes, "
                              "hidden_shapes, params, test_shapes differ), so it needs a task of its own: apex tasks new "
                              "--model qwen2-5-7b-instruct --kernel rms_norm"),
    ('"mistral-7b"', "unknown model"),
    ('"llama-3-1-8b-instruct"', "not the task's own model"),
])
def test_a_model_listed_that_runs_the_kernel_otherwise_is_refused_with_what_differs(tmp_path, also, complaint):
    with pytest.raises(TaskDefinitionError) as caught:
        load_task_file(_llama_rms_norm_listing(tmp_path, also))
    assert complaint in str(caught.value) and "\n" not in str(caught.value)


def test_no_two_tasks_run_the_same_kernel_at_the_same_shapes():
    """A model that runs a task's kernel exactly as the task states it is in its also_models, not a copy."""
    by_behaviour: dict[str, list[str]] = {}
    for task in all_tasks().values():
        by_behaviour.setdefault(task.behaviour_hash(), []).append(task.id)
    assert [ids for ids in by_behaviour.values() if len(ids) > 1] == []


def test_a_model_is_served_by_at_most_one_task_of_each_kernel():
    served: dict[tuple[str, str], list[str]] = {}
    for task in all_tasks().values():
        for model in task.models:
            served.setdefault((model, task.kernel), []).append(task.id)
    assert {pair: ids for pair, ids in served.items() if len(ids) > 1} == {}

"""Patch points of the real stacks, on the CPU: our reference Triton solutions (Triton's
interpreter) patched into transformers' Llama, GPT-OSS and Qwen3.5 modules pass the in-model
check, and tiny models of each then compute what they computed before, through the solutions.
Points are preferred by the workload's kernel stack, and a compiled library is refused as a
target."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from apex_core.errors import ApexUserError
from apex_core.patcher import restore
from apex_core.patcher.apply import apply_solutions
from apex_core.patcher.points import POINTS, PatchPoint, get_point, point_for
from apex_core.tasks import get_task
from apex_core.tasks.reference_solutions import reference_solution_path

from .conftest import escape_targets, native_escapes, native_escapes_work_unconfined, nothing_escaped

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[3]
PROBE = Path(__file__).with_name("tiny_model_probe.py")
LLAMA = "llama-3-1-8b-instruct"


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def _probe(model: str, out: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, str(PROBE), model, str(out)], capture_output=True, text=True, timeout=600, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.fixture
def interpreted(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the in-model check's child runs the Triton solutions on the CPU


@pytest.fixture
def restored_transformers():
    folder = get_point("transformers.llama.rope").target_file().parents[2]  # transformers/models
    before = _tree(folder)
    yield
    restore()
    assert _tree(folder) == before


def _same_model_through_the_patched_solutions(model: str, tasks: list[str], points: list[str], tmp_path: Path) -> tuple[dict, dict]:
    """Apply our solutions of ``tasks``, each at its point of ``points``, and run the tiny ``model``
    before and after; its outputs before and after, once each solution was seen to run in it."""
    assert _probe(model, tmp_path / "before.pt") == "called=0"
    applied = apply_solutions([(t, reference_solution_path(get_task(t))) for t in tasks], tmp_path / "results")
    assert [(a.point, a.applied) for a in applied] == [(point, True) for point in points], [a.reason for a in applied]
    assert all(a.check.shapes_checked == len(get_task(a.task_id).cpu_shapes) for a in applied)
    names = " ".join(task.split("__")[1] for task in tasks)
    assert _probe(model, tmp_path / "after.pt") == f"{names} called={len(tasks)}"  # each solution ran in the model
    before, after = torch.load(tmp_path / "before.pt"), torch.load(tmp_path / "after.pt")
    for name in ("prefill", "decode"):  # a few bf16 roundings apart at most, layer after layer
        torch.testing.assert_close(after[name], before[name], atol=0.1, rtol=0.05)
    return before, after


@pytest.mark.slow
def test_a_tiny_llama_computes_the_same_logits_through_the_patched_rms_norm_rope_and_silu_and_mul(
        interpreted, restored_transformers, tmp_path):
    _same_model_through_the_patched_solutions(
        "llama", [f"{LLAMA}__rms_norm", f"{LLAMA}__rope", f"{LLAMA}__silu_and_mul"],
        ["transformers.llama.rms_norm", "transformers.llama.rope", "transformers.llama.silu_and_mul"], tmp_path)


@pytest.mark.slow
def test_a_tiny_gpt_oss_computes_the_same_logits_and_routes_through_the_patched_rms_norm_router_and_clamped_swiglu(
        interpreted, restored_transformers, tmp_path):
    before, after = _same_model_through_the_patched_solutions(
        "gpt-oss", ["gpt-oss-20b__rms_norm", "gpt-oss-20b__moe_router", "gpt-oss-20b__swiglu_clamped"],
        ["transformers.gpt_oss.rms_norm", "transformers.gpt_oss.moe_router", "transformers.gpt_oss.swiglu_clamped"], tmp_path)
    assert before["ties"] == 0, "a tie at the k-th router logit: either expert is right; the probe needs another seed"
    assert after["routes"] == before["routes"]  # every token went to the same four experts


@pytest.mark.slow
def test_a_tiny_qwen3_5_computes_the_same_logits_through_the_patched_rms_norm_silu_and_mul_and_gated_delta_rule(
        interpreted, restored_transformers, tmp_path):
    _same_model_through_the_patched_solutions(
        "qwen3.5", ["qwen3-5-27b__rms_norm", "qwen3-5-27b__silu_and_mul", "qwen3-5-27b__gated_delta_rule"],
        ["transformers.qwen3_5.rms_norm", "transformers.qwen3_5.silu_and_mul", "transformers.qwen3_5.gated_delta_rule"],
        tmp_path)


@pytest.mark.slow
def test_a_tiny_gemma2_computes_the_same_logits_through_the_patched_gelu_tanh_and_mul(
        interpreted, restored_transformers, tmp_path):
    _same_model_through_the_patched_solutions(
        "gemma2", ["gemma-2-9b-it__gelu_tanh_and_mul"], ["transformers.gemma2.gelu_tanh_and_mul"], tmp_path)


@pytest.fixture
def made_up_packages(tmp_path, monkeypatch):
    """A folder on sys.path for packages a test writes; their modules leave sys.modules with it (a
    stray ``liger_kernel`` there tells later importers, trl among them, that Liger is installed)."""
    before = set(sys.modules)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in set(sys.modules) - before:
        if Path(getattr(sys.modules[name], "__file__", None) or "/").is_relative_to(tmp_path):
            del sys.modules[name]


def test_the_workloads_kernel_stack_picks_its_points_where_they_are_installed(made_up_packages):
    tmp_path = made_up_packages
    rope = get_task(f"{LLAMA}__rope")
    assert point_for(rope).id == "transformers.llama.rope"
    assert point_for(rope, kernel_stacks=("liger",)).id == "transformers.llama.rope"  # Liger is not installed here
    package = tmp_path / "liger_kernel" / "transformers"
    package.mkdir(parents=True)
    for init in (package.parent / "__init__.py", package / "__init__.py"):
        init.write_text("")
    (package / "rope.py").write_text("def liger_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):\n    pass\n")
    assert point_for(rope, kernel_stacks=("liger",)).id == "liger.llama.rope"
    assert point_for(rope).id == "transformers.llama.rope"  # a plain workload keeps transformers' modules


def test_a_compiled_library_is_refused_as_a_target(made_up_packages):
    package = made_up_packages / "stack_with_c"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_C.abi3.so").write_bytes(b"\x7fELF")
    point = PatchPoint(id="x", stack="x", kernels=("rms_norm",), models=(LLAMA,), module="stack_with_c._C", description="",
                       body=get_point("transformers.llama.rms_norm").body, model_path=get_point("transformers.llama.rms_norm").model_path)
    with pytest.raises(ApexUserError, match="compiled library .* cannot be replaced kernel by kernel"):
        point.target_file()


def test_every_point_has_a_distinct_id_and_valid_adapters_for_python_and_library_solutions():
    assert len({p.id for p in POINTS}) == len(POINTS)
    for point in POINTS:
        compile(point.adapter("p1-ab12", Path("/site/_apex_patch_p1_ab12.py"), "entry", "t"), point.id, "exec")
        compile(point.adapter("p1-ab12", Path("/site/_apex_patch_p1_ab12.so"), "entry", "t", library_module="apex_solution_ab"),
                point.id, "exec")


@pytest.mark.slow
def test_a_native_solution_is_built_confined_into_a_library_the_model_loads_and_one_that_does_not_compile_is_rolled_back_alone(
        restored_transformers, tmp_path, listener):
    """The kept library also tries three escapes from a static constructor, which runs wherever it
    is loaded (the build's import, the in-model check): none of them gets out (issue 28, class 1)."""
    task = "llama-3-1-8b-instruct__rms_norm_hip"
    assert native_escapes_work_unconfined(tmp_path, listener), "the probe itself must work"
    marker = tmp_path.name
    good_code = (Path(__file__).with_name("data") / "rms_norm_cpu.cpp").read_text()
    good = tmp_path / "escaping.cpp"
    good.write_text(native_escapes(tmp_path, listener.getsockname()[1], marker) + good_code)
    broken = tmp_path / "broken.cpp"
    broken.write_text(good_code.replace("float sum = 0.f;", "float sum = 0.f undeclared_name;"))
    try:
        failed, kept = apply_solutions([(task, broken), (task, good)], tmp_path / "results")
        assert not failed.applied and failed.check.stage == "build" and "broken.cpp" in failed.reason, failed.reason
        assert kept.applied and kept.point == "transformers.llama.rms_norm", kept.reason
        assert kept.check.shapes_checked == len(get_task(task).test_shapes)
        library = Path(kept.target).with_name(f"_apex_patch_{kept.patch_id.replace('-', '_')}.so")
        assert library.read_bytes()[:4] == b"\x7fELF"
        nothing_escaped(marker, tmp_path, listener, "the native build and its in-model check")
    finally:
        escape_targets(tmp_path, marker)[0].unlink(missing_ok=True)


def test_a_patched_module_finds_its_solution_copy_beside_itself_wherever_it_is_mounted(tmp_path):
    point = get_point("cpu-mini.rms_norm")
    moved = tmp_path / "mounted" / "elsewhere"
    moved.mkdir(parents=True)
    copy = Path("/site/that/no/longer/exists/_apex_patch_p1_ab12.py")  # where it was when patched
    (moved / "target_module.py").write_text("VALUE = 1\n" + point.adapter("p1-ab12", copy, "rms_norm", "cpu-mini__rms_norm"))
    (moved / copy.name).write_text("def rms_norm(x, weight, eps):\n    return x\n")
    probe = ("import target_module; from apex_core.workloads import cpu_mini; "
             "print(cpu_mini.label(cpu_mini.rms_norm_implementation()))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(moved), str(REPO_ROOT)])})
    assert done.stdout.strip() == "apex_patch_p1_ab12.rms_norm", done.stderr[-800:]

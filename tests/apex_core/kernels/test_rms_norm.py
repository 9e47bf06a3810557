import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from apex_core.kernels import rms_norm
from apex_core.kernels.roofline import dtype_bytes
from apex_core.tasks import get_task

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_numpy_and_torch_references_agree():
    x, w, eps = rms_norm.make_inputs_numpy({"rows": 5, "hidden": 96}, "float32", seed=3, device="cpu", params={"eps": 1e-6})
    expected = rms_norm.reference_numpy(x, w, eps)
    got = rms_norm.reference_torch(torch.from_numpy(x), torch.from_numpy(w), eps).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_inputs_are_reproducible_from_the_seed_and_differ_across_seeds():
    first = rms_norm.make_inputs_torch({"tokens": 3, "hidden": 64}, "bfloat16", 7, "cpu", {"eps": 1e-5})
    again = rms_norm.make_inputs_torch({"tokens": 3, "hidden": 64}, "bfloat16", 7, "cpu", {"eps": 1e-5})
    other = rms_norm.make_inputs_torch({"tokens": 3, "hidden": 64}, "bfloat16", 8, "cpu", {"eps": 1e-5})
    assert torch.equal(first[0], again[0]) and not torch.equal(first[0], other[0])
    assert first[0].dtype == torch.bfloat16 and first[1].shape == (64,)


def test_the_python_baseline_matches_the_reference():
    task = get_task("cpu-mini__rms_norm")
    namespace: dict = {}
    exec(compile(task.baseline_source, str(task.baseline_path), "exec"), namespace)
    x, w, eps = rms_norm.make_inputs_numpy({"rows": 3, "hidden": 100}, "float32", 1, "cpu", {"eps": 1e-6})
    np.testing.assert_allclose(namespace["rms_norm"](x, w, eps), rms_norm.reference_numpy(x, w, eps), rtol=1e-5, atol=1e-5)


def test_the_roofline_counts_one_read_and_one_write_of_the_rows():
    model = rms_norm.roofline({"tokens": 8192, "hidden": 4096}, "bfloat16", {})
    assert model.bytes_moved == (2 * 8192 * 4096 + 4096) * dtype_bytes("bfloat16")
    assert model.flops == 4 * 8192 * 4096


def _python_path() -> str:
    return os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)


_TRITON_CHECK = textwrap.dedent(
    """
    import importlib.util, sys, torch
    from apex_core.kernels import rms_norm
    spec = importlib.util.spec_from_file_location("baseline", sys.argv[1])
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
    worst = 0.0
    for tokens, hidden in [(1, 4096), (3, 4096), (5, 1000), (2, 7)]:
        x, w, eps = rms_norm.make_inputs_torch({"tokens": tokens, "hidden": hidden}, "bfloat16", tokens, "cpu", {"eps": 1e-5})
        got = module.rms_norm(x, w, eps)
        ref = rms_norm.reference_torch(x, w, eps)
        assert got.dtype == torch.bfloat16 and got.shape == x.shape
        torch.testing.assert_close(got, ref, atol=1e-2, rtol=1.6e-2)
        worst = max(worst, (got.float() - ref.float()).abs().max().item())
    print("max error", worst)
    """
)


def test_the_triton_baseline_is_correct_under_the_cpu_interpreter():
    task = get_task("llama-3-1-8b-instruct__rms_norm")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": _python_path()}
    done = subprocess.run(
        [sys.executable, "-c", _TRITON_CHECK, str(task.baseline_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "max error" in done.stdout


@pytest.mark.gpu
def test_the_triton_baseline_is_correct_on_the_gpu():
    task = get_task("llama-3-1-8b-instruct__rms_norm")
    env = {**os.environ, "PYTHONPATH": _python_path()}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run(
        [sys.executable, "-c", _TRITON_CHECK.replace('"cpu"', '"cuda"'), str(task.baseline_path)],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def _float64_rms_norm(x: torch.Tensor, scale: torch.Tensor, eps: float) -> torch.Tensor:
    x64 = x.double()
    return x64 / torch.sqrt((x64 * x64).mean(dim=-1, keepdim=True) + eps) * scale.double()


def test_the_zero_centered_reference_scales_by_one_plus_the_stored_weight():
    x, w, eps = rms_norm.make_inputs_torch({"tokens": 4, "hidden": 96}, "bfloat16", 5, "cpu", {"eps": 1e-6, "zero_centered": 1.0})
    expected = _float64_rms_norm(x, 1.0 + w.double(), eps)
    got = rms_norm.reference_torch_zero_centered(x, w, eps)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.double(), expected, atol=1e-2, rtol=1e-2)


def test_the_zero_centered_scale_is_formed_in_fp32_not_in_bf16():
    # A stored offset too small for bf16 to add to 1 still changes the fp32 scale.
    x = torch.ones(1, 4, dtype=torch.bfloat16) * 3
    w = torch.full((4,), 2.0**-9, dtype=torch.bfloat16)
    assert torch.equal(1 + w, torch.ones(4, dtype=torch.bfloat16))  # lost in bf16
    exact = rms_norm.reference_torch_zero_centered(x.float(), w.float(), 0.0)
    assert torch.all(exact > 1.0)


def test_zero_centered_inputs_draw_the_weight_around_zero_and_keep_the_same_rows():
    plain = rms_norm.make_inputs_torch({"tokens": 2, "hidden": 4096}, "float32", 3, "cpu", {"eps": 1e-6})
    centered = rms_norm.make_inputs_torch({"tokens": 2, "hidden": 4096}, "float32", 3, "cpu", {"eps": 1e-6, "zero_centered": 1.0})
    assert torch.equal(plain[0], centered[0])
    assert abs(plain[1].mean().item() - 1.0) < 0.05 and abs(centered[1].mean().item()) < 0.05
    torch.testing.assert_close(plain[1], centered[1] + 1.0)


def test_each_model_task_uses_the_norm_its_model_config_declares():
    for task_id in ("llama-3-1-8b-instruct__rms_norm", "qwen3-5-27b__rms_norm", "gpt-oss-20b__rms_norm", "deepseek-r1__rms_norm"):
        task = get_task(task_id)
        zero_centered = bool(task.architecture.extra.get("rms_norm_zero_centered", False))
        assert bool(task.params.get("zero_centered", False)) == zero_centered, task_id
        assert task.reference.endswith("reference_torch_zero_centered") == zero_centered, task_id
        assert ("zero_centered" in task.baseline) == zero_centered, task_id
        assert all(s["hidden"] == task.architecture.hidden_size for s in task.test_shapes + task.benchmark_shapes)


CUDA_ONLY = ("cuda", "<<<", "_sync(", "__nv_", "cub::", "cooperative_groups")


def test_the_hip_task_is_the_llama_rms_norm_in_hip_with_portable_sources():
    from apex_core.grader.isolation.native import kernel_names
    from apex_core.tasks.reference_solutions import reference_solution_path

    hip, triton_task = get_task("llama-3-1-8b-instruct__rms_norm_hip"), get_task("llama-3-1-8b-instruct__rms_norm")
    assert (hip.language, hip.solution_filename, hip.cpu_shapes) == ("hip", "solution.hip", [])
    assert (hip.reference, hip.inputs, hip.params) == (triton_task.reference, triton_task.inputs, triton_task.params)
    assert hip.test_shapes == triton_task.test_shapes and hip.benchmark_shapes == triton_task.benchmark_shapes
    for source in (hip.baseline_source, reference_solution_path(hip).read_text()):
        assert 'm.def("rms_norm", &rms_norm)' in source and "warpSize" in source
        assert not [word for word in CUDA_ONLY if word in source]
        assert kernel_names(source)

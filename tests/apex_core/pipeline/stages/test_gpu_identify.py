"""On a GPU, through the installed command as a user runs it: a workload with a kernel stack
profiled, and its hot kernels identified: the stack's Triton kernels traced to their
``@triton.jit`` source in site-packages and patchable, the vendor GEMMs named and refused with a
reason."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
REPO_ROOT = Path(__file__).resolve().parents[4]


def _apex(*args: str) -> dict:
    script = shutil.which("apex")
    command = [script] if script else [sys.executable, "-m", "apex_core.cli.main"]
    done = subprocess.run([*command, *args, "--json"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


CASES = [
    pytest.param("llama-3-1-8b-instruct", "liger", "liger_kernel", "rms_norm",
                 marks=pytest.mark.skipif(not _installed("liger_kernel"), reason="liger-kernel is not installed")),
    pytest.param("qwen3-5-27b", "fla", "fla", "gated_delta_rule",
                 marks=pytest.mark.skipif(not _installed("fla"), reason="flash-linear-attention is not installed")),
]


@pytest.mark.parametrize(("workload", "stack", "package", "kind"), CASES)
def test_a_stacks_triton_kernels_are_traced_to_their_source_and_gemms_are_refused_with_a_reason(workload, stack, package, kind, tmp_path):
    profile = _apex("profile", "--workload", workload, "--kernels", stack, "--calls", "2",
                    "--device", "cuda:0", "--results-dir", str(tmp_path))
    assert profile["device"] == "cuda" and profile["kernel_count"] > 0
    kernels = _apex("identify", "--results", profile["results_dir"], "--top-k", "60")
    triton = [k for k in kernels if k["kernel_type"] == "triton"]
    assert triton, [k["name"] for k in kernels]
    for kernel in triton:
        assert kernel["package"] == package and kernel["package_version"], kernel
        path, _, line = kernel["source"].rpartition(":")
        assert Path(path).is_file() and int(line) > 0
        assert "@triton.jit" in "".join(Path(path).read_text().splitlines(keepends=True)[max(0, int(line) - 4):int(line)])
        assert kernel["patchable"]
    hot = next(k for k in triton if k["kind"] == kind)
    assert hot["task_id"] == f"{workload}__{kind}" and hot["shapes"], hot
    gemm = next(k for k in kernels if k["kind"] == "gemm_bf16")
    assert not gemm["patchable"] and gemm["patchable_reason"]

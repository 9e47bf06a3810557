"""The embedded defaults on a GPU: bf16, synchronized timing, Liger and flash-linear-attention.

Each case runs in a fresh interpreter, because Liger's patches and transformers' choice of the
gated-delta-rule implementation are process-wide.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
REPO_ROOT = Path(__file__).resolve().parents[3]

CASE = r"""
import json, sys
from apex_core.workloads import benchmark, customize, get_workload, load
from apex_core.workloads import stacks
workload, kernels, results = sys.argv[1], sys.argv[2], sys.argv[3]
spec = customize(get_workload(workload), batch=2, prompt_tokens=128, decode_tokens=8, kernels=kernels)
result = benchmark(spec, runs=2, warmup=1, results_dir=results)
loaded = load(spec)
modules = sorted({type(m).__name__ for m in loaded.model.modules()})
module = sys.modules.get(stacks.QWEN3_5_MODELING)
fla = stacks.fla_active(module) if module is not None else None
dtype = str(next(loaded.model.parameters()).dtype)
loaded.close()
print(json.dumps({"result": result.model_dump(mode="json"), "modules": modules, "fla": fla, "dtype": dtype}))
"""


def _case(workload: str, kernels: str, tmp_path: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CASE, workload, kernels, str(tmp_path)], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=600, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


@pytest.mark.parametrize("workload", ["llama-3-1-8b-instruct", "qwen3-5-27b", "gpt-oss-20b", "deepseek-r1"])
def test_each_embedded_default_runs_in_bf16_with_synchronized_timing(workload, tmp_path):
    case = _case(workload, "", tmp_path)
    result = case["result"]
    assert case["dtype"] == "torch.bfloat16" and result["workload"]["device"] == "cuda"
    assert result["tokens_per_s"] > 0 and len(result["runs"]) == 2 and "synchronize" in result["timing_method"]
    if workload == "qwen3-5-27b":
        assert case["fla"] is False  # transformers' PyTorch gated delta rule without --kernels fla


@pytest.mark.skipif(not _installed("liger_kernel"), reason="liger-kernel is not installed")
def test_liger_replaces_llamas_norms_and_its_kernels_run(tmp_path):
    case = _case("llama-3-1-8b-instruct", "liger", tmp_path)
    assert "LigerRMSNorm" in case["modules"]
    assert any("apply_liger_kernel_to_llama" in note for note in case["result"]["notes"])


@pytest.mark.skipif(not _installed("fla"), reason="flash-linear-attention is not installed")
def test_fla_runs_qwen35s_gated_delta_rule(tmp_path):
    case = _case("qwen3-5-27b", "fla", tmp_path)
    assert case["fla"] is True and case["result"]["tokens_per_s"] > 0

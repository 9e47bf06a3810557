"""The embedded defaults on a GPU: bf16, synchronized timing, Liger and flash-linear-attention, and
decode replayed from a captured graph: its tokens against eager decode's, and its fallback when a
kernel cannot be captured or replayed.

Each case runs in a fresh interpreter, because Liger's patches, the patched classes of the fallback
tests and transformers' choice of the gated-delta-rule implementation are process-wide.
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


def _run(script: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", script, *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=600, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _case(workload: str, kernels: str, tmp_path: Path) -> dict:
    return _run(CASE, workload, kernels, str(tmp_path))


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


@pytest.mark.parametrize("workload", ["llama-3-1-8b-instruct", "qwen3-5-27b", "gpt-oss-20b", "deepseek-r1"])
def test_each_embedded_default_runs_in_bf16_with_synchronized_timing(workload, tmp_path):
    case = _case(workload, "", tmp_path)
    result = case["result"]
    assert case["dtype"] == "torch.bfloat16" and result["workload"]["device"] == "cuda"
    assert result["tokens_per_s"] > 0 and len(result["runs"]) == 2 and "synchronize" in result["timing_method"]
    assert result["workload"]["graphs"] is True
    # Graphs, or eager with the reason recorded (a MoE whose routing synchronizes with the host).
    assert result["decode_mode"] == "graph" or (result["decode_mode"] == "eager_static" and result["graph_fallback"])
    assert result["runs"][0]["token_digest"] == result["runs"][1]["token_digest"] is not None
    if workload == "llama-3-1-8b-instruct":
        assert result["decode_mode"] == "graph", result["graph_fallback"]
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


TOKENS = r"""
import json, sys
import torch
from apex_core.workloads import customize, get_workload, load
layers, dtype = sys.argv[1], sys.argv[2]
spec = customize(get_workload("llama-3-1-8b-instruct"), layers=layers, dtype=dtype, batch=2, prompt_tokens=64, decode_tokens=12)
out = {}
for graphs in (True, False):
    loaded = load(customize(spec, graphs=graphs))
    steps = [loaded.step(seed=seed) for seed in (1, 1, 2)]
    out[str(graphs)] = {"mode": loaded.decode_mode, "fallback": loaded.graph_fallback, "layers": loaded.model.config.num_hidden_layers,
                        "digests": [s.token_digest for s in steps], "counts": [s.token_count for s in steps],
                        "decode_s": [sum(s.decode_step_s) for s in steps], "notes": loaded.notes}
    loaded.close()
print(json.dumps(out))
"""


def test_graph_decode_gives_eager_decodes_greedy_tokens():
    """float32, so that the two paths' rounding cannot flip a greedy choice."""
    out = _run(TOKENS, "2", "float32")
    graph, eager = out["True"], out["False"]
    assert graph["mode"] == "graph" and graph["fallback"] is None, graph["notes"]
    assert eager["mode"] == "eager_static"
    assert graph["digests"] == eager["digests"] and graph["digests"][0] == graph["digests"][1] != graph["digests"][2]
    assert graph["counts"] == [2 * 13] * 3


def test_layers_full_builds_llama_at_its_real_depth_and_decodes_under_graphs():
    out = _run(TOKENS, "full", "bfloat16")
    assert out["True"]["layers"] == 32 and out["True"]["mode"] == "graph", out["True"]["notes"]
    assert out["True"]["digests"][0] == out["True"]["digests"][1]


PATCHED = r"""
import json, sys
import torch
from transformers.models.llama import modeling_llama
from apex_core.workloads import customize, get_workload, load
kind = sys.argv[1]
original = modeling_llama.LlamaRMSNorm.forward
calls = [0]

def synchronizing(self, hidden_states):
    if float(hidden_states.abs().amax()) < 0:  # reads a device value on the host: cannot be captured
        raise AssertionError("unreachable")
    return original(self, hidden_states)

def host_state(self, hidden_states):
    calls[0] += 1  # a Python counter: frozen into the graph at capture, live when eager
    return original(self, hidden_states) * (1.0 + 0.25 * (calls[0] % 3))

modeling_llama.LlamaRMSNorm.forward = synchronizing if kind == "sync" else host_state
spec = customize(get_workload("llama-3-1-8b-instruct"), batch=2, prompt_tokens=64, decode_tokens=8)
loaded = load(spec)
step = loaded.step(seed=3)
loaded.close()
try:  # the next model's weights are random draws on the same device
    torch.randn(8, device="cuda")
    draw = "ok"
except RuntimeError as error:
    draw = str(error)
print(json.dumps({"mode": loaded.decode_mode, "fallback": loaded.graph_fallback, "notes": loaded.notes,
                  "digest": step.token_digest, "step_mode": step.decode_mode, "draw_after": draw}))
"""


def test_a_patched_kernel_that_synchronizes_with_the_host_falls_back_to_eager_with_the_reason():
    out = _run(PATCHED, "sync")
    assert out["mode"] == out["step_mode"] == "eager_static" and out["digest"]
    assert out["fallback"].startswith("CUDA graph capture failed") or out["fallback"].startswith("HIP graph capture failed")
    assert any("fell back to eager" in note for note in out["notes"])
    assert out["draw_after"] == "ok", "the failed capture left the device's generator unusable: " + out["draw_after"]


def test_a_patched_kernel_whose_host_state_freezes_in_the_graph_is_caught_by_the_replay_check():
    out = _run(PATCHED, "host_state")
    assert out["mode"] == "eager_static"
    assert "away from eager decode" in out["fallback"], out["fallback"]

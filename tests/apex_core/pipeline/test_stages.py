"""The identify stage's choice: the top kernels of the requested languages that a winner could be
integrated for, in device-time order, and every kernel it passed over named once with why."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import apex_core.analysis  # noqa: F401 - loads the modules patched below

from apex_core.identify.result import IdentifiedKernel
from apex_core.pipeline.stages import identify
from apex_core.pipeline.stages.identify import IdentifyReport
from apex_core.pipeline.stages.common import Skip
from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.state import new_run


def _kernel(rank: int, task_id: str | None, share: float, patchable: bool = True) -> IdentifiedKernel:
    return IdentifiedKernel(rank=rank, name=f"kernel_{rank}", kind=task_id.split("__")[1] if task_id else "other",
                            kind_evidence="module", kernel_type="aten", device="cuda", calls=10, total_time_us=share * 1e4,
                            device_time_share=share, patchable=patchable,
                            patchable_reason="" if patchable else "compiled CUDA/HIP code in a binary extension", task_id=task_id)


@pytest.fixture
def gpt_oss_profile(monkeypatch, tmp_path):
    """What identify reports for GPT-OSS-20B on an H200 (benchmarks/results/workloads-h200-2026-12-01):
    the experts' grouped GEMMs first, then cuBLAS GEMMs, then the small kernels."""
    kernels = [_kernel(1, "gpt-oss-20b__fused_moe", 0.324), _kernel(2, "gpt-oss-20b__gemm_bf16", 0.164, patchable=False),
               _kernel(3, None, 0.033), _kernel(4, "gpt-oss-20b__fused_moe", 0.031), _kernel(5, "gpt-oss-20b__swiglu_clamped", 0.03),
               _kernel(6, "gpt-oss-20b__moe_router", 0.012), _kernel(7, "gpt-oss-20b__prefill_attention", 0.011),
               _kernel(8, "gpt-oss-20b__rms_norm", 0.01)]
    report = IdentifyReport(results_dir=str(tmp_path), workload="gpt-oss-20b", model="openai/gpt-oss-20b", dtype="bfloat16",
                            device="cuda", top_k=None, recorded_sites=4, kernels=kernels)
    # apex_core.analysis re-exports profile_workload under its module's name: patch the module itself.
    monkeypatch.setattr(sys.modules["apex_core.analysis.profile_run"], "profile_workload",
                        lambda spec, root, progress=None: (None, tmp_path))
    monkeypatch.setattr(identify, "identify_run", lambda run_dir, top_k=None, progress=None: report)


def test_identify_picks_the_top_kernels_that_could_be_integrated_and_names_the_rest_once(gpt_oss_profile, tmp_path):
    state = new_run(RunConfig(workload="gpt-oss-20b", languages=("triton",), top_k=3), tmp_path / "results")
    summary = identify.run(state, None)
    assert [k.task_id for k in state.kernels] == ["gpt-oss-20b__swiglu_clamped", "gpt-oss-20b__moe_router",
                                                 "gpt-oss-20b__rms_norm"]
    assert [k.rank for k in state.kernels] == [5, 6, 8]
    assert summary.count("gpt-oss-20b__fused_moe (no patch point in the stacks installed here") == 1
    assert "gpt-oss-20b__gemm_bf16 (not patchable" in summary
    assert "gpt-oss-20b__prefill_attention (no patch point" in summary


def test_kernels_of_other_languages_are_left_out_before_any_patch_point_is_looked_for(gpt_oss_profile, tmp_path):
    state = new_run(RunConfig(workload="gpt-oss-20b", languages=("hip",), top_k=3), tmp_path / "results")
    with pytest.raises(Skip, match=r"none of the 8 profiled kernels .*gpt-oss-20b__rms_norm \(triton\)"):
        identify.run(state, None)
    assert Path(state.identify_file).name == "identify.json"


def test_every_stage_is_a_module_of_the_stages_package_and_every_module_a_stage():
    from apex_core.pipeline.stages import STAGES, stage_function

    folder = Path(__file__).resolve().parents[3] / "apex_core" / "pipeline" / "stages"
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__", "common"}
    assert modules == {name.replace("-", "_") for name in STAGES}
    assert all(callable(stage_function(name)) for name in STAGES)
    with pytest.raises(KeyError):
        stage_function("polish")

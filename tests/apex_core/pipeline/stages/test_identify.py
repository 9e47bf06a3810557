"""A workload profiled and identified end to end on the CPU: cpu-mini's RMSNorm is found, mapped to
its task, its source named, and the shapes the model passes it recorded (analysis/)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from apex_core.analysis import profile_workload
from apex_core.pipeline.stages.identify import IDENTIFY_FILE, SHAPES_FILE, identify_run, latest_run, profiled_shares
from apex_core.errors import ApexUserError
from apex_core.workloads import get_workload

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("results")
    _, run_dir = profile_workload(get_workload("cpu-mini"), root, calls=1, warmup=1)
    return run_dir


def test_a_profiled_run_keeps_its_profile_trace_and_workload(profiled):
    assert {"profile.json", "trace.json", "workload.json"} <= {p.name for p in profiled.iterdir()}
    assert json.loads((profiled / "trace.json").read_text())["traceEvents"]


def test_cpu_minis_rms_norm_is_identified_as_its_task_with_source_and_recorded_shapes(profiled):
    report = identify_run(profiled, top_k=None)
    norm = next(k for k in report.kernels if k.kind == "rms_norm")
    assert norm.task_id == "cpu-mini__rms_norm" and norm.patchable
    assert norm.source and norm.source.split(":")[0].endswith(".py")
    assert norm.shapes_from == "recorded" and norm.shapes[0].args[0].tensor.shape[-1] == 1024
    assert (profiled / IDENTIFY_FILE).is_file() and (profiled / SHAPES_FILE).is_file()
    assert [k.rank for k in report.kernels] == sorted(k.rank for k in report.kernels)


def test_the_shares_that_bound_a_credit_count_every_kernel_not_only_the_top_k(profiled):
    """A kernel below the top k (Liger's rope at 8 layers of Llama) still has its Amdahl bound."""
    everything = identify_run(profiled, top_k=None, record_shapes=False)
    hottest = identify_run(profiled, top_k=1, record_shapes=False)
    assert len(hottest.kernels) == 1 and hottest.task_shares == everything.task_shares
    assert {"cpu-mini__rms_norm", "cpu-mini__silu_and_mul"} <= set(hottest.task_shares)
    spec = get_workload("cpu-mini").resolved()
    assert profiled_shares(spec, profiled.parent) == pytest.approx(everything.task_shares)


def test_the_newest_profiled_run_is_found_and_an_empty_folder_is_a_one_line_error(profiled, tmp_path):
    assert latest_run(profiled.parent) == profiled
    with pytest.raises(ApexUserError, match="no profiled run"):
        latest_run(tmp_path)
    with pytest.raises(ApexUserError, match="not a folder"):
        identify_run(tmp_path / "missing")


@pytest.mark.slow
def test_profile_then_identify_through_the_command_line(tmp_path):
    def apex(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "apex_core.cli.main", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=600, check=False)

    profiled = apex("profile", "--workload", "cpu-mini", "--calls", "1", "--json")
    assert profiled.returncode == 0, profiled.stderr
    summary = json.loads(profiled.stdout)
    assert summary["workload"] == "cpu-mini" and summary["kernels"] and Path(summary["trace"]).is_file()
    identified = apex("identify", "--top-k", "5", "--json")  # the newest run under ./results
    assert identified.returncode == 0, identified.stderr
    kernels = json.loads(identified.stdout)
    assert 0 < len(kernels) <= 5
    for kernel in kernels:
        assert {"name", "kind", "device_time_share", "source", "patchable", "task_id", "shapes"} <= set(kernel)
    assert any(k["task_id"] == "cpu-mini__rms_norm" for k in kernels)
    wrong = apex("identify", "--top-k", "0")
    assert wrong.returncode == 2 and wrong.stderr.startswith("apex: error: ") and "Traceback" not in wrong.stderr


def test_the_profile_table_never_says_it_shows_more_kernels_than_there_are(profiled):
    from apex_core.analysis.profile_run import ProfileSummary
    from apex_core.profiling import load_profile

    result = load_profile(profiled)
    summary = ProfileSummary.of(result, profiled, "cpu-mini", top=len(result.kernels) + 10)
    assert f": top {len(result.kernels)} of {len(result.kernels)} (" in summary.title()

"""`apex benchmark` and `apex workloads` as a user runs them, bad input included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.site_packages  # runs cpu-mini from transformers, which the group's tests patch

REPO_ROOT = Path(__file__).resolve().parents[2]


def _one_line_error(done) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("apex: error: ") and "Traceback" not in done.stderr
    return lines[0]


def _apex_script() -> list[str]:
    """The installed console script beside this interpreter (.venv/bin/apex), else the module."""
    script = Path(sys.executable).parent / "apex"
    return [str(script)] if script.exists() else [sys.executable, "-m", "apex_core.cli.main"]


def test_cpu_mini_benchmark_end_to_end_through_the_installed_command(tmp_path):
    done = subprocess.run(
        [*_apex_script(), "benchmark", "--workload", "cpu-mini", "--runs", "2", "--min-run-s", "0.2", "--json",
         "--results-dir", str(tmp_path)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["workload"]["id"] == "cpu-mini" and len(result["runs"]) == 2 and result["tokens_per_s"] > 0
    assert "cv" in result and result["results_dir"].startswith(str(tmp_path))
    # --min-run-s reaches the benchmark, which repeats the request mix by it in every run (how many
    # mixes: test_benchmark.py; one mix already lasts 0.2 s on a busy shared core, so no count here).
    assert result["min_run_s"] == 0.2 and all(run["request_mixes"] == result["request_mixes_per_run"] for run in result["runs"])
    stored = json.loads((Path(result["results_dir"]) / "benchmark.json").read_text())
    assert stored["run_id"] == result["run_id"]
    assert "benchmark" in done.stderr  # progress on stderr, stdout plain JSON


def test_benchmark_table_cache_and_fail_on_cv(apex_cli, tmp_path):
    first = apex_cli("benchmark", "--workload", "cpu-mini", "--runs", "1", "--results-dir", str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert "tokens/s (median of 1)" in first.stdout and "cv: n/a (one run)" in first.stdout
    cached = apex_cli("benchmark", "--workload", "cpu-mini", "--runs", "1", "--results-dir", str(tmp_path),
                      "--cache-hours", "1", "--json")
    assert cached.returncode == 0 and json.loads(cached.stdout)["cached"] is True
    # A gate no run can pass: flagged on stderr, exit 1 with --fail-on-cv, the result still printed.
    strict = apex_cli("benchmark", "--workload", "cpu-mini", "--runs", "2", "--warmup", "0", "--results-dir", str(tmp_path),
                      "--max-cv", "1e-12", "--fail-on-cv", "--json")
    assert strict.returncode == 1, strict.stderr
    assert json.loads(strict.stdout)["cv_gate"]["exceeded"] is True and "exceeds --max-cv" in strict.stderr


def test_workload_lists(apex_cli):
    listed = json.loads(apex_cli("workloads", "list", "--json").stdout)
    assert listed[0]["id"] == "cpu-mini" and {"llama-3-1-8b-instruct", "qwen3-5-27b-vllm"} <= {w["id"] for w in listed}
    also = apex_cli("benchmark", "--list")
    assert also.returncode == 0 and "deepseek-r1-sglang" in also.stdout
    shown = json.loads(apex_cli("workloads", "show", "cpu-mini", "--json").stdout)
    assert shown["layers"] == 2 and shown["device"] == "cpu"


def test_user_errors_are_one_line(apex_cli):
    unknown = _one_line_error(apex_cli("benchmark", "--workload", "cpu-mni"))
    assert "did you mean 'cpu-mini'" in unknown and "llama-3-1-8b-instruct" in unknown and "<id>-vllm" in unknown
    assert "1 or more" in _one_line_error(apex_cli("benchmark", "--workload", "cpu-mini", "--runs", "0"))
    assert "600 seconds" in _one_line_error(apex_cli("benchmark", "--workload", "cpu-mini", "--min-run-s", "-1"))
    liger = _one_line_error(apex_cli("benchmark", "--workload", "cpu-mini", "--kernels", "liger"))
    assert "need a GPU" in liger
    assert "--workload" in _one_line_error(apex_cli("benchmark"))
    assert "unknown kernel stack" in _one_line_error(apex_cli("benchmark", "--workload", "cpu-mini", "--kernels", "xla"))
    assert "--layers 0" in _one_line_error(apex_cli("benchmark", "--workload", "cpu-mini", "--layers", "0"))
    assert "docker" in _one_line_error(apex_cli("benchmark", "--workload", "cpu-mini", "--docker-image", "rocm/vllm"))

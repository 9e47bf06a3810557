"""``apex export-rl`` turns pipeline runs into datasets that Hugging Face ``datasets`` loads: the
tasks as posed, every iteration with its code, verdict and reward, and SFT pairs whose responses
are the graded correct solutions, never the wrong ones."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.runner import run_pipeline

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
GOOD = (REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py").read_text()
WRONG = "import numpy as np\n\n\ndef rms_norm(x, weight, eps):\n    return np.asarray(x, dtype=np.float32) * 2\n"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("export")
    recorded = root / "recorded.json"
    recorded.write_text(json.dumps({"task_id": TASK, "iterations": [{"solution_code": WRONG}, {"solution_code": GOOD}]}))
    config = RunConfig(workload="cpu-mini", iterations=2, top_k=1, leaderboard=False, replay_from=str(recorded))
    run_pipeline(config, root, only=("identify", "optimize"))
    return root


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_the_export_loads_with_datasets_and_its_sft_pairs_are_the_correct_solutions(results, tmp_path, apex_cli, fmt):
    datasets = pytest.importorskip("datasets", reason="the rl extra (pip install 'apex-kernels[rl]') is not installed")
    done = apex_cli("export-rl", "--output", str(tmp_path), "--results-dir", str(results), "--sft", "--min-score", "0.5",
                    "--format", fmt, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["rows"] == {"tasks": 1, "steps": 2, "sft": 1}
    builder = "json" if fmt == "jsonl" else "parquet"
    loaded = {name: datasets.load_dataset(builder, data_files=path, split="train") for name, path in summary["files"].items()}
    steps = loaded["steps"]
    assert steps["outcome"] == ["wrong_answer", "ok"] and steps["solution_code"] == [WRONG, GOOD]
    assert steps["reward"][0] < 0 < steps["reward"][1] and steps["best"] == [False, True]
    (pair,) = loaded["sft"]
    assert pair["response"] == GOOD and pair["normalized_score"] >= 0.5 and "rms_norm" in pair["prompt"]
    (task,) = loaded["tasks"]
    assert task["task_id"] == TASK and task["reference_solution"] is None and "def rms_norm" in task["baseline"]
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    assert metadata["filters"]["min_score"] == 0.5 and metadata["apex_version"] and len(metadata["runs"]) == 1


def test_a_min_score_outside_zero_to_one_and_a_folder_without_runs_are_one_line_errors(apex_cli, tmp_path):
    bad = apex_cli("export-rl", "--output", str(tmp_path / "out"), "--results-dir", str(tmp_path), "--min-score", "300")
    assert bad.returncode == 2 and "between 0 and 1" in bad.stderr
    empty = apex_cli("export-rl", "--output", str(tmp_path / "out"), "--results-dir", str(tmp_path))
    assert empty.returncode == 2 and "no pipeline run" in empty.stderr and len(empty.stderr.strip().splitlines()) == 1


def test_a_link_planted_where_a_dataset_goes_is_replaced_never_written_through(results, tmp_path):
    from apex_core.pipeline.export_rl import export_rl

    victim = tmp_path / "victim.txt"
    victim.write_text("not the export's")
    output = tmp_path / "out"
    output.mkdir()
    os.symlink(victim, output / "steps.jsonl")
    summary = export_rl(results, output)
    assert victim.read_text() == "not the export's"
    assert not (output / "steps.jsonl").is_symlink() and summary.rows["steps"] == 2
    assert len((output / "steps.jsonl").read_text().splitlines()) == 2


def test_an_output_that_is_a_file_is_a_one_line_error(results, tmp_path):
    from apex_core.errors import ApexUserError
    from apex_core.pipeline.export_rl import export_rl

    (tmp_path / "taken").write_text("")
    with pytest.raises(ApexUserError, match="that is a file; give a folder"):
        export_rl(results, tmp_path / "taken")

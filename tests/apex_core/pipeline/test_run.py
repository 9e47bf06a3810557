"""``apex run`` on the cpu-mini workload, offline: every stage runs with the replay agent, the run
resumes where it stopped, the agent loop follows its feedback and stop rules, and the environment
is left as it was found."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.runner import run_pipeline
from apex_core.pipeline.state import STAGES, load_run
from apex_core.pipeline.trajectory import Trajectory
from apex_core.patcher.points import get_point

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
SILU = "cpu-mini__silu_and_mul"
GOOD = (REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py").read_text()
WRONG = "import numpy as np\n\n\ndef rms_norm(x, weight, eps):\n    return np.asarray(x, dtype=np.float32) * 2\n"
# Correct but twice the baseline's work: a speedup near 0.5, far below the threshold's 1.4x even when
# a loaded machine skews the timing (the baseline itself once measured 1.4x against itself under CI load).
SLOW = (REPO_ROOT / "apex_core" / "kernels" / "rms_norm" / "baseline_python.py").read_text().replace(
    "def rms_norm(", "def _rms_norm_once("
) + "\n\ndef rms_norm(x, weight, eps):\n    _rms_norm_once(x, weight, eps)\n    return _rms_norm_once(x, weight, eps)\n"


def _llama_tree() -> dict[str, str]:
    folder = get_point("cpu-mini.rms_norm").target_file().parent
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_apex_run_on_cpu_mini_runs_every_stage_and_leaves_the_environment_as_it_was(apex_cli, tmp_path):
    before = _llama_tree()
    done = apex_cli("run", "--workload", "cpu-mini", "--runs", "3", "--results-dir", str(tmp_path), "--json", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    state = json.loads(done.stdout)
    assert {name: record["status"] for name, record in state["stages"].items()} == {name: "done" for name in STAGES}
    kernels = {k["task_id"]: k for k in state["kernels"]}
    assert set(kernels) == {TASK, SILU}, "cpu-mini's two patchable kernels, the norm first"
    assert all(k["integrated"] and k["final"]["outcome"] == "ok" for k in kernels.values()), kernels
    assert state["accuracy"]["passed"] and not state["accuracy"]["culprits"]  # the canned solutions keep the model's outputs
    final = state["final"]
    # 3 benchmark runs, but 6 final rounds: the fewest whose interval can be a 95% one
    assert final["kernel_gain"]["significant"] and final["kernel_gain"]["median"] > 1.5 and final["credited"]
    assert len(final["tokens_per_s"]["original"]) == 6 and final["kernel_gain"]["interval_method"] == "order statistics"
    assert set(final["tokens_per_s"]) == {"original", "control", "candidate", f"without:{TASK}", f"without:{SILU}"}
    credits = {c["task_id"]: c for c in final["credits"]}
    assert credits[TASK]["gain"]["median"] > 1.5 and all(not c["implausible"] for c in credits.values())
    assert state["summary"]["model_reward"] > 0.7 and state["summary"]["throughput_credited"]
    folder = Path(state["results_dir"])
    trajectory = Trajectory.model_validate_json(next((folder / "trajectories").glob(f"{TASK}-*.json")).read_bytes())
    assert trajectory.iterations[0].solution_code == GOOD and trajectory.iterations[0].reward is not None
    board = json.loads(apex_cli("leaderboard", "--results-dir", str(tmp_path), "--json").stdout)
    assert sorted(e["task_id"] for e in board["entries"]) == [TASK, SILU] and board["standings"][0]["agent"] == "replay"
    assert all((folder / name).is_file() for name in ("report.md", "report.html", "results_summary.json"))
    learnt = json.loads(apex_cli("knowledge", "--json").stdout)  # the run's gradings are in the knowledge base
    assert any(t["task_id"] == TASK and t["correct"] >= 1 for t in learnt["tasks"])
    assert _llama_tree() == before, "site-packages must be byte-identical after a run"


def test_a_run_stopped_after_identify_resumes_from_optimize_without_measuring_again(tmp_path):
    config = RunConfig(workload="cpu-mini", runs=2, top_k=1, leaderboard=False)
    first = run_pipeline(config, tmp_path, only=("benchmark", "identify"))
    benchmarked_at = first.stages["benchmark"].finished_at
    assert [k.task_id for k in first.kernels] == [TASK]
    resumed = run_pipeline(None, tmp_path, resume=first.folder, only=("optimize", "grade"))
    assert resumed.stages["benchmark"].finished_at == benchmarked_at
    assert resumed.stages["optimize"].status == "done" and resumed.kernel(TASK).final.outcome == "ok"
    assert load_run(first.folder).stages["integrate"].status == "pending"


def test_a_run_stopped_in_benchmark_final_integrates_again_on_resume_and_measures(tmp_path):
    """Stopping restores the patches (a run never leaves one behind), so the resumed run must put
    them back before it measures, not skip benchmark-final for want of a patch."""
    from apex_core.patcher import restore, status

    config = RunConfig(workload="cpu-mini", runs=2, top_k=1, leaderboard=False)
    first = run_pipeline(config, tmp_path, only=("benchmark", "identify", "optimize", "grade", "integrate"))
    assert first.kernel(TASK).integrated
    restore()  # what the stopped run did on its way out
    first.stages["benchmark-final"].status, first.stages["benchmark-final"].error = "failed", "interrupted"
    first.save()
    resumed = run_pipeline(None, tmp_path, resume=first.folder)
    assert resumed.stages["integrate"].status == "done" and resumed.kernel(TASK).integrated
    assert resumed.stages["benchmark-final"].status == "done" and resumed.final.kernel_gain.median > 1
    assert [resumed.stages[n].status for n in STAGES] == ["done"] * len(STAGES)
    journal = status()
    assert journal is None or not journal.active()


def _trajectory_file(folder: Path, codes: list[str]) -> Path:
    steps = [{"solution_code": code} for code in codes]
    path = folder / "recorded.json"
    path.write_text(json.dumps({"task_id": TASK, "iterations": steps}))
    return path


def test_the_loop_feeds_the_graders_verdict_back_keeps_the_best_and_stops_at_the_threshold(tmp_path):
    recorded = _trajectory_file(tmp_path, [WRONG, SLOW, GOOD, WRONG])
    config = RunConfig(workload="cpu-mini", runs=2, iterations=4, top_k=1, leaderboard=False, replay_from=str(recorded))
    state = run_pipeline(config, tmp_path, only=("benchmark", "identify", "optimize"))
    record = state.kernel(TASK)
    outcomes = [i.grade.outcome for i in record.iterations]
    assert outcomes == ["wrong_answer", "ok", "ok"], outcomes  # the fourth never ran: the third passed the threshold
    assert "wrong on" in record.iterations[1].feedback and "max abs error" in record.iterations[1].feedback
    assert "Correct on every shape" in record.iterations[2].feedback and "baseline" in record.iterations[2].feedback
    assert record.best_iteration == 3 and Path(record.best_solution).read_text() == GOOD
    assert record.stop_reason.startswith("score threshold")


def test_the_same_failure_twice_stops_the_loop(tmp_path):
    recorded = _trajectory_file(tmp_path, [WRONG])
    config = RunConfig(workload="cpu-mini", runs=2, iterations=5, top_k=1, leaderboard=False, replay_from=str(recorded))
    state = run_pipeline(config, tmp_path, only=("benchmark", "identify", "optimize", "grade"))
    record = state.kernel(TASK)
    assert len(record.iterations) == 2 and record.stop_reason == "the same failure twice in a row (wrong_answer)"
    assert record.best_solution is None and state.stages["grade"].status == "skipped"


def test_bad_settings_and_unknown_runs_are_one_line_errors(apex_cli, tmp_path):
    wrong = apex_cli("run", "--workload", "cpu-mini", "--languages", "cobol", "--results-dir", str(tmp_path))
    assert wrong.returncode == 2 and "--languages: Input should be 'triton', 'hip', 'python' or 'all' (got 'cobol')" in wrong.stderr and len(wrong.stderr.strip().splitlines()) == 1
    unknown = apex_cli("run", "--workload", "no-such-model", "--results-dir", str(tmp_path))
    assert unknown.returncode == 2 and "no-such-model" in unknown.stderr and not (tmp_path / "runs").exists()
    nothing = apex_cli("run", "--resume", "latest", "--results-dir", str(tmp_path))
    assert nothing.returncode == 2 and "no pipeline run" in nothing.stderr
    stage = apex_cli("run", "--workload", "cpu-mini", "--stage", "polish", "--results-dir", str(tmp_path))
    assert stage.returncode == 2 and "stage 'polish'" in stage.stderr


def test_kernels_optimized_in_parallel_spread_their_gradings_over_the_gpus(monkeypatch):
    from apex_core.grader import devices
    from apex_core.pipeline.stages.common import grading_devices

    monkeypatch.setattr(devices, "gpu_count", lambda: 2)
    assert grading_devices(3) == ["cuda:0", "cuda:1", "cuda:0"]
    monkeypatch.setattr(devices, "gpu_count", lambda: 0)
    assert grading_devices(2) == [None, None]


def test_optimize_kernel_runs_the_agent_loop_on_one_task_without_a_workload(apex_cli, tmp_path):
    done = apex_cli("optimize-kernel", "--task", TASK, "--iterations", "2", "--results-dir", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    state = json.loads(done.stdout)
    status = {name: record["status"] for name, record in state["stages"].items()}
    assert status == {"benchmark": "skipped", "identify": "done", "optimize": "done", "grade": "done", "integrate": "skipped",
                      "benchmark-final": "skipped", "score": "done", "report": "done"}
    assert state["kernels"][0]["final"]["outcome"] == "ok" and (Path(state["results_dir"]) / "report.html").is_file()
    unknown = apex_cli("optimize-kernel", "--task", "nope__rms_norm", "--results-dir", str(tmp_path))
    assert unknown.returncode == 2 and "nope__rms_norm" in unknown.stderr


@pytest.mark.parametrize("landing", ["integrate: done", "benchmark-final: starting"])
def test_a_stop_between_two_stages_is_recorded_on_the_stage_about_to_run(tmp_path, monkeypatch, landing):
    """SIGTERM (SystemExit in the run) may land on a stage's progress line, outside the stage's own
    try: the run still reads as stopped, on the next stage, and nothing after it ran."""
    from apex_core.pipeline import runner

    ran: list[str] = []
    monkeypatch.setattr(runner, "stage_function", lambda name: lambda state, progress: ran.append(name) or f"{name} ok")

    def stop_there(fraction: float, message: str) -> None:
        if message.startswith(landing):
            raise SystemExit(143)

    with pytest.raises(SystemExit):
        run_pipeline(RunConfig(workload="cpu-mini", runs=2, leaderboard=False), tmp_path, progress=stop_there)
    (folder,) = (tmp_path / "runs").iterdir()
    stages = load_run(folder).stages
    assert ran == list(STAGES)[:list(STAGES).index("integrate") + 1]
    assert (stages["integrate"].status, stages["benchmark-final"].status, stages["benchmark-final"].error) == \
        ("done", "failed", "interrupted")
    assert [stages[name].status for name in list(STAGES)[list(STAGES).index("benchmark-final") + 1:]] == \
        ["pending"] * (len(STAGES) - list(STAGES).index("benchmark-final") - 1)

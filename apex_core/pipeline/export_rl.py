"""``apex export-rl``: what pipeline runs produced, as datasets an RL or SFT trainer loads directly
(Hugging Face ``datasets``: JSON lines or Parquet).

- ``tasks``: every task the runs optimized, posed as an agent saw it (system and task prompt,
  baseline, correctness reference, shapes, tolerances); never our reference solution.
- ``steps``: every iteration of every trajectory: prompt, feedback, the solution code the agent
  left, the grader's verdict and the RL reward.
- ``sft`` (``--sft``): prompt -> response pairs whose response is a solution the grader found
  correct, with a normalized kernel score of at least ``min_score``; one per distinct solution.
- ``metadata.json``: provenance (Apex version, git commit, runs, filters, counts, columns).

The reference system's export read a field the pipeline never wrote, so it emitted no workload
SFT pairs, and put a placeholder where the solution should be; here the rows are built from the
trajectories' own code and gradings, and a test loads them back with ``datasets``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, Literal

from pydantic import BaseModel

from apex_core.errors import ApexUserError
from apex_core.pipeline.leaderboard import apex_version
from apex_core.pipeline.state import RUNS_DIR, RunState, run_states
from apex_core.pipeline.trajectory import TRAJECTORIES_DIR, Trajectory
from apex_core.storage import replace_file

Format = Literal["jsonl", "parquet"]


class ExportSummary(BaseModel):
    output: str
    format: str
    files: dict[str, str]
    rows: dict[str, int]
    runs: list[str]


def _runs(results_root: Path) -> list[RunState]:
    states = run_states(results_root)
    if not states:
        raise ApexUserError(f"no pipeline run under {results_root / RUNS_DIR}: run 'apex run --workload ID' first, "
                            "or give --results-dir the folder that holds runs/")
    return states


def _trajectories(state: RunState) -> list[Trajectory]:
    return [Trajectory.model_validate_json(p.read_bytes()) for p in sorted((state.folder / TRAJECTORIES_DIR).glob("*.json"))]


def _step_rows(state: RunState, trajectory: Trajectory) -> list[dict[str, Any]]:
    return [{
        "run_id": state.run_id, "trajectory_id": trajectory.trajectory_id, "task_id": trajectory.task_id,
        "kernel": trajectory.kernel, "target": trajectory.target, "agent": trajectory.agent, "model": step.model,
        "iteration": step.iteration, "prompt": step.prompt, "feedback": step.feedback, "solution_code": step.solution_code,
        "outcome": step.grade.outcome, "correct": step.grade.correct, "speedup": step.grade.speedup,
        "score": step.grade.score, "normalized_score": step.grade.normalized_score, "reward": step.reward,
        "flags": list(step.grade.flags), "turns": step.agent.turns, "agent_seconds": step.agent.elapsed_s,
        "best": step.iteration == trajectory.best_iteration,
    } for step in trajectory.iterations]


def _sft_rows(steps: list[dict[str, Any]], systems: dict[str, str], min_score: float) -> list[dict[str, Any]]:
    rows, seen = [], set()
    for step in sorted(steps, key=lambda s: -s["normalized_score"]):
        if not step["correct"] or step["normalized_score"] < min_score or not step["solution_code"]:
            continue
        key = (step["task_id"], hashlib.sha256(step["solution_code"].encode()).hexdigest())
        if key in seen:
            continue
        seen.add(key)
        rows.append({"task_id": step["task_id"], "system": systems.get(step["task_id"], ""), "prompt": step["prompt"],
                     "response": step["solution_code"], "normalized_score": step["normalized_score"],
                     "speedup": step["speedup"], "reward": step["reward"], "agent": step["agent"], "model": step["model"],
                     "run_id": step["run_id"], "trajectory_id": step["trajectory_id"], "iteration": step["iteration"]})
    return rows


def _write(rows: list[dict[str, Any]], path: Path, fmt: Format) -> None:
    if fmt == "jsonl":
        _replace(path, lambda out: out.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()))
        return
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ApexUserError("--format parquet needs pyarrow (pip install 'apex-kernels[rl]'); or use --format jsonl") from None
    _replace(path, lambda out: pq.write_table(pa.Table.from_pylist(rows), out))


def _replace(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` through a new temporary file renamed over it: a link planted at ``path`` is
    replaced, never written through (the export's folder may be shared with an agent)."""
    replace_file(path, write, mode=0o644)


def _git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False,
                              cwd=Path(__file__).resolve().parent)
    except OSError:
        return None
    return done.stdout.strip() or None


def export_rl(results_root: Path, output: Path, *, sft: bool = False, min_score: float = 0.0, fmt: Format = "jsonl") -> ExportSummary:
    from apex_core.hardware.target import resolve_target
    from apex_core.suite.export import export_records
    from apex_core.tasks import get_task

    if not 0.0 <= min_score <= 1.0:
        raise ApexUserError(f"--min-score {min_score:g}: give a normalized kernel score between 0 and 1 (e.g. 0.5)")
    if fmt not in ("jsonl", "parquet"):
        raise ApexUserError(f"--format {fmt}: use jsonl or parquet")
    states = _runs(results_root)
    steps = [row for state in states for trajectory in _trajectories(state) for row in _step_rows(state, trajectory)]
    targets = {row["task_id"]: row["target"] for row in steps}
    tasks = []
    for task_id, arch in sorted(targets.items()):
        (record,) = export_records([get_task(task_id)], resolve_target(arch if arch != "cpu" else None))
        tasks.append(record.model_dump(mode="json"))
    systems = {t["task_id"]: t["system"] for t in tasks}
    tables = {"tasks": tasks, "steps": steps}
    if sft:
        tables["sft"] = _sft_rows(steps, systems, min_score)
    if output.exists() and not output.is_dir():
        raise ApexUserError(f"--output {output}: that is a file; give a folder to write the datasets into")
    output.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, rows in tables.items():
        path = output / f"{name}.{fmt}"
        _write(rows, path, fmt)
        files[name] = str(path)
    summary = ExportSummary(output=str(output), format=fmt, files=files, rows={k: len(v) for k, v in tables.items()},
                            runs=[s.run_id for s in states])
    metadata = {**summary.model_dump(), "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "apex_version": apex_version(), "git_commit": _git_commit(), "results_dir": str(results_root.resolve()),
                "filters": {"sft": sft, "min_score": min_score, "sft_needs": "correct, normalized score >= min_score"},
                "columns": {k: sorted(v[0]) if v else [] for k, v in tables.items()}}
    _replace(output / "metadata.json", lambda out: out.write((json.dumps(metadata, indent=2) + "\n").encode()))
    return summary

"""The leaderboard: one row per optimized kernel of every pipeline run under a results folder, in
SQLite (``<results>/leaderboard.sqlite``), so agents, models and versions can be compared.

Rows carry the agent, its model and version (the agent backend's and Apex's), the task and
target, the fresh grading's kernel score and speedup, the run's tokens/s before and after and
model reward, the iterations and agent turns spent, and the trajectory id. Averages are per
(agent, model, version): the reference system stamped every run with a new version, which made
its per-agent averages meaningless; here the version is the software's, not the run's.
"""

from __future__ import annotations

import importlib.metadata
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from apex_core.errors import ApexUserError
from apex_core.pipeline.figures import FinalFigures, ScoreSummary, TwoArmFinal
from apex_core.pipeline.state import RunState

LEADERBOARD_FILE = "leaderboard.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    run_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    workload TEXT NOT NULL,
    target TEXT NOT NULL,
    agent TEXT NOT NULL,
    model TEXT NOT NULL,
    version TEXT NOT NULL,
    outcome TEXT,
    kernel_score REAL,
    normalized_score REAL,
    speedup REAL,
    integrated INTEGER NOT NULL,
    baseline_tokens_per_s REAL,
    final_tokens_per_s REAL,
    tokens_per_s_ratio REAL,
    model_reward REAL,
    iterations INTEGER NOT NULL,
    turns INTEGER,
    trajectory_id TEXT,
    PRIMARY KEY (run_id, task_id)
);
"""


class Standing(BaseModel):
    agent: str
    model: str
    version: str
    kernels: int
    mean_normalized_score: float | None
    mean_speedup: float | None
    mean_model_reward: float | None
    runs: int


def apex_version() -> str:
    try:
        return importlib.metadata.version("apex-kernels")
    except importlib.metadata.PackageNotFoundError:
        return "dev"


class Leaderboard:
    def __init__(self, results_root: Path) -> None:
        self.path = Path(results_root) / LEADERBOARD_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with closing(sqlite3.connect(self.path, timeout=30)) as db, db:
                db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as error:  # not a database (overwritten, truncated), or not ours
            raise ApexUserError(f"{self.path}: not a leaderboard Apex can read ({error}); move it aside "
                                f"(mv {self.path} {self.path}.bad) and the next scored run starts a new one") from None

    def add_run(self, state: RunState) -> int:
        """Add (or replace, when a run is scored again) one row per kernel of ``state``."""
        from apex_core.hardware.target import resolve_target

        target = resolve_target(state.config.gpu).arch
        final = state.final
        summary = state.summary or ScoreSummary()
        patched = (final.tokens_per_s.get("candidate", []) if isinstance(final, FinalFigures)
                   else final.patched_tokens_per_s if isinstance(final, TwoArmFinal) else [])  # two arms before the control arm
        final_tps = sorted(patched)[len(patched) // 2] if patched else None
        rows = []
        for k in state.kernels:
            models = sorted({i.model for i in k.iterations if i.model}) or [state.config.agent_model or "-"]
            turns = [i.agent.turns for i in k.iterations if i.agent.turns is not None]
            rows.append((state.run_id, k.task_id, state.created_at, state.config.workload, target, state.config.agent,
                         ",".join(models), apex_version(), k.final.outcome if k.final else None,
                         k.final.score if k.final else None, k.final.normalized_score if k.final else None,
                         k.final.speedup if k.final else None, int(k.integrated), state.baseline.tokens_per_s if state.baseline else None,
                         final_tps, summary.final_ratio, summary.model_reward, len(k.iterations),
                         sum(turns) if turns else None, k.trajectory_id))
        with closing(sqlite3.connect(self.path, timeout=30)) as db, db:
            db.executemany(f"INSERT OR REPLACE INTO entries VALUES ({', '.join('?' * 20)})", rows)
        return len(rows)

    def entries(self, task: str | None = None, agent: str | None = None) -> list[dict[str, Any]]:
        query, args = "SELECT * FROM entries WHERE 1=1", []
        if task:
            query, args = query + " AND task_id = ?", [*args, task]
        if agent:
            query, args = query + " AND agent = ?", [*args, agent]
        with closing(sqlite3.connect(self.path, timeout=30)) as db:
            db.row_factory = sqlite3.Row
            return [dict(r) for r in db.execute(query + " ORDER BY normalized_score DESC, speedup DESC", args)]

    def standings(self) -> list[Standing]:
        with closing(sqlite3.connect(self.path, timeout=30)) as db:
            rows = db.execute("SELECT agent, model, version, COUNT(*), AVG(normalized_score), AVG(speedup), AVG(model_reward), "
                              "COUNT(DISTINCT run_id) FROM entries GROUP BY agent, model, version "
                              "ORDER BY AVG(normalized_score) DESC").fetchall()
        return [Standing(agent=a, model=m, version=v, kernels=n, mean_normalized_score=s, mean_speedup=x,
                         mean_model_reward=r, runs=runs) for a, m, v, n, s, x, r, runs in rows]

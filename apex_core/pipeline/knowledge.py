"""The knowledge base: what worked and what failed, per kernel family and GPU target, shared by
every kernel and every run on this machine (``<cache>/knowledge.sqlite``).

Each graded iteration adds one row: the task, its family, the target, the agent and model, the
strategies the solution's code shows, and the grader's verdict (never the agent's claims). Before
an iteration, the best successes and the latest failures of the same family and target, and the
best successes of other families in the same language, become short lines of the prompt.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

from apex_core.grader.cache import default_cache_dir

KNOWLEDGE_FILE = "knowledge.sqlite"

STRATEGIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("autotune", re.compile(r"@triton\.autotune|triton\.Config\(")),
    ("tensor-cores", re.compile(r"\btl\.dot\(|__builtin_amdgcn_mfma|\bwmma::|\bmfma\b")),
    ("persistent", re.compile(r"for\s+\w+\s+in\s+(tl\.range|range)\(\s*(tl\.)?program_id|tl\.num_programs\(")),
    ("vector-loads", re.compile(r"\b(float4|half8|bf16x8|__builtin_nontemporal_load)\b|tl\.max_contiguous|tl\.multiple_of")),
    ("shared-memory", re.compile(r"__shared__|extern\s+__shared__")),
    ("warp-shuffles", re.compile(r"__shfl(_xor|_down)?\s*\(")),
    ("cache-hints", re.compile(r"eviction_policy\s*=|cache_modifier\s*=")),
    ("fp32-accumulate", re.compile(r"\.to\(tl\.float32\)|tl\.float32|static_cast<float>")),
    ("many-warps", re.compile(r"num_warps\s*=\s*(8|16|32)")),
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outcomes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    run_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    kernel TEXT NOT NULL,
    language TEXT NOT NULL,
    target TEXT NOT NULL,
    agent TEXT NOT NULL,
    model TEXT,
    strategies TEXT NOT NULL,
    outcome TEXT NOT NULL,
    correct INTEGER NOT NULL,
    speedup REAL,
    score REAL NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS outcomes_kernel ON outcomes (kernel, target);
"""


def strategies_of(code: str) -> list[str]:
    return [name for name, pattern in STRATEGIES if pattern.search(code)]


class KnowledgeBase:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_cache_dir() / KNOWLEDGE_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as db, db:
            db.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")  # parallel kernels of one run write at once
        return db

    def record(self, *, created_at: str, run_id: str, task_id: str, kernel: str, language: str, target: str, agent: str,
               model: str | None, code: str, outcome: str, correct: bool, speedup: float | None, score: float,
               detail: str) -> None:
        with closing(self._connect()) as db, db:
            db.execute("INSERT INTO outcomes (created_at, run_id, task_id, kernel, language, target, agent, model, strategies, "
                       "outcome, correct, speedup, score, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (created_at, run_id, task_id, kernel, language, target, agent, model, ",".join(strategies_of(code)),
                        outcome, int(correct), speedup, score, detail[:300]))

    def insights(self, kernel: str, language: str, target: str, limit: int = 3) -> list[str]:
        """Short lines for the prompt: the best successes and latest failures of this family on this
        target, then the best successes of other families in the same language."""
        with closing(self._connect()) as db:
            worked = db.execute("SELECT task_id, speedup, strategies, agent, model FROM outcomes WHERE kernel = ? AND target = ? "
                                "AND correct = 1 AND speedup IS NOT NULL ORDER BY speedup DESC LIMIT ?",
                                (kernel, target, limit)).fetchall()
            failed = db.execute("SELECT task_id, outcome, strategies, detail FROM outcomes WHERE kernel = ? AND target = ? "
                                "AND outcome != 'ok' ORDER BY id DESC LIMIT ?", (kernel, target, limit)).fetchall()
            elsewhere = db.execute("SELECT kernel, MAX(speedup), strategies FROM outcomes WHERE kernel != ? AND language = ? "
                                   "AND target = ? AND correct = 1 AND speedup > 1.05 GROUP BY kernel ORDER BY MAX(speedup) DESC "
                                   "LIMIT ?", (kernel, language, target, limit)).fetchall()
        lines = [f"worked: {task} reached {speedup:.2f}x ({strategies or 'no named strategy'}; {agent}"
                 + (f" {model}" if model else "") + ")" for task, speedup, strategies, agent, model in worked]
        lines += [f"failed: {task} {outcome} ({strategies or 'no named strategy'}): {detail}"
                  for task, outcome, strategies, detail in failed]
        lines += [f"in {family} ({language}), {speedup:.2f}x came with: {strategies or 'no named strategy'}"
                  for family, speedup, strategies in elsewhere]
        return lines

    def rows(self) -> int:
        with closing(self._connect()) as db:
            return int(db.execute("SELECT COUNT(*) FROM outcomes").fetchone()[0])

    def families(self) -> list[dict[str, object]]:
        """Per kernel family and target: experiments, correct ones, the best speedup and its strategies."""
        with closing(self._connect()) as db:
            rows = db.execute(
                "SELECT kernel, target, COUNT(*), SUM(correct), MAX(CASE WHEN correct = 1 THEN speedup END) FROM outcomes "
                "GROUP BY kernel, target ORDER BY kernel, target").fetchall()
            best = {(k, t): s for k, t, s in db.execute(
                "SELECT kernel, target, strategies FROM outcomes o WHERE correct = 1 AND speedup = (SELECT MAX(speedup) FROM "
                "outcomes WHERE kernel = o.kernel AND target = o.target AND correct = 1)").fetchall()}
        return [{"kernel": k, "target": t, "experiments": n, "correct": int(c or 0), "best_speedup": b,
                 "best_strategies": best.get((k, t), "")} for k, t, n, c, b in rows]

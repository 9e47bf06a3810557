"""The knowledge base: what earlier gradings of a task measured, in one SQLite file shared by
every run on this machine (``<cache>/knowledge.sqlite``).

Each graded iteration adds one row of structured fields. The row names the task, its language
and target, and the agent and model the user chose. It holds the strategies Apex's own patterns
find in the code (names from ``STRATEGIES``) and the grading's facts (``grading_facts``: the
outcome, the error class, the failing shape, the speedup, the score, the median times and the
flags' names). It never holds free text from a candidate: no exception message, no grader
reason (that embeds the solution's output), nothing an agent wrote. A row's text would reach
every later prompt of the task, across runs, so a solution that raised "IGNORE PREVIOUS
INSTRUCTIONS ..." would steer agents for good.

Insights are scoped to one task in one language on one target. What a Triton kernel of one
model taught says little about another model's shapes or about a HIP kernel, and a narrow scope
also limits how far any one row travels. Rows are read back through the same validation they
were written with, so a row that is not plain data (an edited file) is skipped, never shown.

Databases of the first schema (table ``outcomes``, whose ``detail`` column held the grader's
reason) are migrated when first opened. Their structured columns move to the new table; the
error class is recovered from ``detail`` only when it is a class Apex knows; ``detail`` itself is
dropped with the old table. Rows that do not validate are left out.
"""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from apex_core.errors import ApexUserError
from apex_core.grader import GradeResult, Outcome, default_cache_dir
from apex_core.pipeline.grading_facts import ErrorClass, FlagName, Shape, error_class, facts_of
from apex_core.hardware.target import HardwareTarget
from apex_core.tasks.schema import Language, Task

KNOWLEDGE_FILE = "knowledge.sqlite"
SCHEMA_VERSION = 2
"""``PRAGMA user_version`` of a knowledge base with the ``gradings`` table (1 had ``outcomes``)."""

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
STRATEGY_NAMES = frozenset(name for name, _ in STRATEGIES)

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,127}$")]
"""Task ids, targets, run ids, agents and models: names, never sentences."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS gradings (
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
    error_class TEXT,
    failed_shape TEXT,
    failed_hidden INTEGER,
    max_abs_error REAL,
    speedup REAL,
    score REAL NOT NULL,
    baseline_median_ns REAL,
    solution_median_ns REAL,
    flags TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS gradings_task ON gradings (task_id, language, target);
"""
_COLUMNS = ("created_at", "run_id", "task_id", "kernel", "language", "target", "agent", "model", "strategies", "outcome",
            "correct", "error_class", "failed_shape", "failed_hidden", "max_abs_error", "speedup", "score",
            "baseline_median_ns", "solution_median_ns", "flags")
_INSERT = f"INSERT INTO gradings ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"


def strategies_of(code: str) -> list[str]:
    return [name for name, pattern in STRATEGIES if pattern.search(code)]


def _known_strategies(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in STRATEGY_NAMES]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not one of Apex's strategy names")
    return names


Strategies = Annotated[list[str], AfterValidator(_known_strategies)]
"""Names from ``STRATEGIES``, the only words about a solution's code that a row holds."""


class Experiment(BaseModel):
    """One row: a graded iteration as the knowledge base keeps it, structured fields only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    created_at: Annotated[str, StringConstraints(pattern=r"^\d{4}-\d\d-\d\dT[0-9:.+Z-]{1,40}$")]
    run_id: Name
    task_id: Name
    kernel: Name
    language: Language
    target: Name
    agent: Name
    model: Name | None
    strategies: Strategies
    outcome: Outcome
    correct: bool
    error_class: ErrorClass | None
    failed_shape: Shape | None = Field(description="the first failing case's sizes; None for none or a hidden shape")
    failed_hidden: bool | None = Field(description="whether the first failing case was a hidden shape; None: no case failed")
    max_abs_error: float | None
    speedup: float | None
    score: float
    baseline_median_ns: float | None
    solution_median_ns: float | None
    flags: list[FlagName]

    @classmethod
    def of(cls, result: GradeResult, *, created_at: str, run_id: str, task_id: str, kernel: str, language: str,
           target: str, agent: str, model: str | None, code: str) -> Experiment:
        """The row for ``result``: its facts (``grading_facts``), never its reason."""
        facts = facts_of(result)
        first = facts.failed_cases[0] if facts.failed_cases else None
        return cls(created_at=created_at, run_id=run_id, task_id=task_id, kernel=kernel, language=language, target=target,
                   agent=agent, model=model, strategies=strategies_of(code), outcome=facts.outcome, correct=facts.correct,
                   error_class=facts.error_class, failed_shape=first.shape if first else None,
                   failed_hidden=first.hidden if first else None, max_abs_error=first.max_abs_error if first else None,
                   speedup=facts.speedup, score=facts.score, baseline_median_ns=facts.baseline_median_ns,
                   solution_median_ns=facts.solution_median_ns, flags=facts.flags)

    def row(self) -> tuple[Any, ...]:
        values = self.model_dump()
        values["strategies"] = ",".join(self.strategies)
        values["outcome"] = self.outcome.value
        values["flags"] = ",".join(self.flags)
        values["failed_shape"] = json.dumps(self.failed_shape) if self.failed_shape is not None else None
        return tuple(values[c] for c in _COLUMNS)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Experiment:
        values = dict(row)
        values.pop("id", None)
        values["strategies"] = [s for s in (values["strategies"] or "").split(",") if s]
        values["flags"] = [f for f in (values["flags"] or "").split(",") if f]
        values["failed_shape"] = json.loads(values["failed_shape"]) if values["failed_shape"] else None
        return cls.model_validate(values)


class PastGrading(BaseModel):
    """One past grading of a task as its next prompt quotes it: figures and codes, no text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    graded_on: Annotated[str, StringConstraints(pattern=r"^\d{4}-\d\d-\d\d$")] = Field(description="the day of the grading (UTC)")
    outcome: Outcome
    error_class: ErrorClass | None
    failed_shape: Shape | None
    failed_on_hidden_shape: bool | None
    max_abs_error: float | None
    speedup: float | None
    score: float
    baseline_median_us: float | None
    solution_median_us: float | None
    strategies: Strategies
    flags: list[FlagName]

    @classmethod
    def of(cls, experiment: Experiment) -> PastGrading:
        def us(ns: float | None) -> float | None:
            return round(ns / 1e3, 3) if ns is not None else None

        return cls(graded_on=experiment.created_at[:10], outcome=experiment.outcome, error_class=experiment.error_class,
                   failed_shape=experiment.failed_shape, failed_on_hidden_shape=experiment.failed_hidden,
                   max_abs_error=experiment.max_abs_error,
                   speedup=round(experiment.speedup, 3) if experiment.speedup is not None else None,
                   score=round(experiment.score, 1), baseline_median_us=us(experiment.baseline_median_ns),
                   solution_median_us=us(experiment.solution_median_ns), strategies=experiment.strategies,
                   flags=experiment.flags)


class TaskRecord(BaseModel):
    """Per task, language and target: how many gradings, how many correct, the best speedup."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: Name
    language: Language
    target: Name
    experiments: int
    correct: int
    best_speedup: float | None
    best_strategies: Strategies


CPU = "cpu"
"""The target of a grading that ran on the CPU: a CPU task's, or a GPU task's in Triton's interpreter
on a machine without a GPU (correctness only). Never the arch the prompts aim at: no gfx950
measured it."""


def records_of(task: Task, gpu: str | None) -> str:
    """The target whose records a reader asks for: the arch named (``--gpu``), else what a grading
    of ``task`` here would be recorded under."""
    from apex_core.hardware.target import resolve_target

    return resolve_target(gpu).arch if gpu else graded_on(task, resolve_target(None))


def graded_on(task: Task, target: HardwareTarget) -> str:
    """What a grading of ``task`` on this machine measures: ``target``'s arch where a GPU grades it,
    else ``cpu``; gradings are recorded, and looked up, under it."""
    return target.arch if task.needs_gpu and target.detected.device_count > 0 else CPU


class KnowledgeBase:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_cache_dir() / KNOWLEDGE_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with closing(self._connect()) as db:
                _migrate(db)
        except sqlite3.OperationalError as error:  # locked, read-only, no room: the file itself may be fine
            raise ApexUserError(f"{self.path}: the knowledge base cannot be written now ({error}); check the file's "
                                "permissions and free space, or wait for the apex command that holds it") from None
        except sqlite3.DatabaseError as error:
            raise ApexUserError(f"{self.path}: not a knowledge base Apex can open ({error}); move the file away and "
                                "Apex starts a new one") from None

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")  # parallel kernels of one run write at once
        db.row_factory = sqlite3.Row
        return db

    def record(self, experiment: Experiment) -> None:
        with closing(self._connect()) as db:
            db.execute(_INSERT, experiment.row())

    def _experiments(self, db: sqlite3.Connection, query: str, args: tuple[Any, ...]) -> list[Experiment]:
        kept = []
        for row in db.execute(query, args):
            try:
                kept.append(Experiment.from_row(row))
            except (ValidationError, ValueError, TypeError):
                continue  # not plain data (an edited file): never shown
        return kept

    def insights(self, task_id: str, language: str, target: str, limit: int = 3) -> list[PastGrading]:
        """The past gradings a prompt of ``task_id`` in ``language`` on ``target`` quotes: the best
        correct ones (highest speedup first), then the latest failures. Nothing of other tasks,
        languages or targets."""
        scope = "task_id = ? AND language = ? AND target = ?"
        with closing(self._connect()) as db:
            best = self._experiments(db, f"SELECT * FROM gradings WHERE {scope} AND correct = 1 AND speedup IS NOT NULL "
                                         "ORDER BY speedup DESC, id DESC LIMIT ?", (task_id, language, target, limit))
            failed = self._experiments(db, f"SELECT * FROM gradings WHERE {scope} AND outcome != 'ok' ORDER BY id DESC "
                                           "LIMIT ?", (task_id, language, target, limit))
        return [PastGrading.of(e) for e in best + failed]

    def rows(self) -> int:
        with closing(self._connect()) as db:
            return int(db.execute("SELECT COUNT(*) FROM gradings").fetchone()[0])

    def overview(self) -> list[TaskRecord]:
        """Per task, language and target: gradings, correct ones, the best speedup and its strategies."""
        with closing(self._connect()) as db:
            rows = db.execute(
                "SELECT task_id, language, target, COUNT(*), SUM(correct), MAX(CASE WHEN correct = 1 THEN speedup END), "
                "(SELECT b.strategies FROM gradings b WHERE b.task_id = g.task_id AND b.language = g.language AND "
                "b.target = g.target AND b.correct = 1 AND b.speedup IS NOT NULL ORDER BY b.speedup DESC LIMIT 1) "
                "FROM gradings g GROUP BY task_id, language, target ORDER BY task_id, language, target").fetchall()
        kept = []
        for task_id, language, target, count, correct, best, strategies in rows:
            try:
                kept.append(TaskRecord(task_id=task_id, language=language, target=target, experiments=count,
                                       correct=int(correct or 0), best_speedup=best,
                                       best_strategies=[s for s in (strategies or "").split(",") if s]))
            except ValidationError:
                continue
        return kept


def _migrate(db: sqlite3.Connection) -> None:
    """Bring the file to SCHEMA_VERSION: create the table, and move a first-schema ``outcomes``
    table's rows over without their free text. One transaction, so two processes opening an old
    file at once migrate it once."""
    db.execute("PRAGMA secure_delete = ON")  # the dropped table's pages are zeroed, not left in the file
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA.strip().split(";"):
            if statement.strip():
                db.execute(statement)
        old = db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'outcomes'").fetchone()
        if old is not None:
            for row in db.execute("SELECT * FROM outcomes ORDER BY id").fetchall():
                experiment = _from_first_schema(row)
                if experiment is not None:
                    db.execute(_INSERT, experiment.row())
            db.execute("DROP TABLE outcomes")
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _from_first_schema(row: sqlite3.Row) -> Experiment | None:
    """A first-schema row's structured columns; its ``detail`` (the grader's reason, or a speedup)
    gives only an error class Apex knows. None when the row does not validate."""
    try:
        outcome = Outcome(row["outcome"])
        failing = outcome not in (Outcome.ok, Outcome.tampering, Outcome.infra_error)
        return Experiment(
            created_at=row["created_at"], run_id=row["run_id"], task_id=row["task_id"], kernel=row["kernel"],
            language=row["language"], target=row["target"], agent=row["agent"], model=row["model"],
            strategies=[s for s in (row["strategies"] or "").split(",") if s], outcome=outcome, correct=bool(row["correct"]),
            error_class=error_class(row["detail"] or "") if failing else None, failed_shape=None, failed_hidden=None,
            max_abs_error=None, speedup=row["speedup"], score=row["score"], baseline_median_ns=None,
            solution_median_ns=None, flags=[])
    except (ValidationError, ValueError, TypeError, IndexError, KeyError):
        return None

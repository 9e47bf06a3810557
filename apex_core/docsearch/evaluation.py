"""Measuring retrieval: questions with the chunk that answers them, recall@k and MRR.

An evaluation item names its answer by ``source`` and ``section`` (the Markdown heading path, the
Python qualified name, the GPU and field of a hardware fact, or a PDF's outline title) and, where a
section is long enough to be cut into several chunks, a ``contains`` phrase that the answering
chunk holds. A hit answers the item when all three agree. ``missing_answers`` checks the items
against the corpus itself (no index needed), so an edit that renames a heading or removes a fact
breaks a test instead of silently lowering the figures.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from apex_core.docsearch.models import Chunk
from apex_core.errors import ApexUserError


class EvalItem(BaseModel):
    """A question and where its answer is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question: str
    source: str
    section: str | None = None
    contains: str | None = None


class ItemResult(BaseModel):
    question: str
    rank: int | None
    """1-based place of the first hit that answers it, None when none of the results does."""
    latency_ms: float
    top: list[str]
    """The results as 'source > section', for reading the misses."""


class EvalReport(BaseModel):
    questions: int
    k: int
    recall_at_k: float
    mrr: float
    """Mean reciprocal rank over ``depth`` results (a miss counts 0)."""
    depth: int
    latency_p50_ms: float
    latency_p95_ms: float
    items: list[ItemResult]


def load_items(path: Path) -> list[EvalItem]:
    """The items of a JSON-lines file (blank lines and lines starting with // are skipped)."""
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            items.append(EvalItem.model_validate(json.loads(line)))
        except ValueError as error:
            raise ApexUserError(f"{path}:{number}: not an evaluation item ({error}); "
                                'expected {"question": ..., "source": ..., "section": ..., "contains": ...}') from None
    return items


def _squeeze(text: str) -> str:
    return " ".join(text.split()).lower()


def answers(chunk: Chunk, item: EvalItem) -> bool:
    """Whether ``chunk`` is the one ``item`` names (same source, same section, holds the phrase)."""
    if chunk.source != item.source or (item.section is not None and chunk.section != item.section):
        return False
    return item.contains is None or _squeeze(item.contains) in _squeeze(chunk.text)


def missing_answers(items: list[EvalItem], chunks: list[Chunk]) -> list[EvalItem]:
    """The items that no chunk of ``chunks`` answers (the evaluation set has rotted there)."""
    by_source: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_source.setdefault(chunk.source, []).append(chunk)
    return [item for item in items if not any(answers(c, item) for c in by_source.get(item.source, []))]


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile by linear interpolation between closest ranks (as numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def evaluate(items: list[EvalItem], *, k: int = 5, depth: int = 10, index_dir: Path | None = None) -> EvalReport:
    """Ask every question of ``items`` against the index and score where its answer came."""
    from apex_core.docsearch.search import search

    if not items:
        raise ApexUserError("the evaluation set is empty; give at least one question")
    results = []
    for item in items:
        started = time.perf_counter()
        hits = search(item.question, max(k, depth), index_dir=index_dir)
        latency = (time.perf_counter() - started) * 1000
        rank = next((place for place, hit in enumerate(hits, 1) if answers(hit, item)), None)
        results.append(ItemResult(question=item.question, rank=rank, latency_ms=round(latency, 3),
                                  top=[f"{h.source} > {h.section}" for h in hits[:k]]))
    latencies = [r.latency_ms for r in results]
    return EvalReport(
        questions=len(results),
        k=k,
        recall_at_k=sum(1 for r in results if r.rank is not None and r.rank <= k) / len(results),
        mrr=statistics.fmean(1 / r.rank if r.rank is not None and r.rank <= depth else 0.0 for r in results),
        depth=depth,
        latency_p50_ms=round(percentile(latencies, 0.5), 3),
        latency_p95_ms=round(percentile(latencies, 0.95), 3),
        items=results,
    )

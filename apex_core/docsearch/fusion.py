"""Reciprocal rank fusion: one ranking out of several, using ranks only.

A document's fused score is the sum over the rankings that contain it of ``1 / (k + rank)``, with
ranks counted from 1 (Cormack, Clarke and Büttcher, SIGIR 2009). Ranks, not scores, are fused
because the two legs' scores are not comparable (BM25 is unbounded, cosine is in [-1, 1]). The
constant ``k = 60`` is the paper's and the usual choice: large enough that the first few places of
one leg do not drown the other leg, small enough that a first place still counts for more than a
tenth. A document first in both legs scores 2/61, about 0.0328.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RRF_K = 60


@dataclass(frozen=True)
class Fused:
    """A document's fused score and its 1-based rank in each input ranking (None: absent there)."""

    id: str
    score: float
    ranks: tuple[int | None, ...]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[Fused]:
    """The documents of all ``rankings`` (best first, ids unique within each) ordered by fused
    score, best first; ties keep the order in which documents were first met, leg by leg."""
    if k < 0:
        raise ValueError(f"the fusion constant k must be 0 or more, not {k}")
    scores: dict[str, float] = {}
    ranks: dict[str, list[int | None]] = {}
    for leg, ranking in enumerate(rankings):
        for rank, doc_id in enumerate(ranking, start=1):
            if doc_id not in scores:
                scores[doc_id] = 0.0
                ranks[doc_id] = [None] * len(rankings)
            if ranks[doc_id][leg] is not None:
                continue  # a repeated id counts once, at its best place
            scores[doc_id] += 1.0 / (k + rank)
            ranks[doc_id][leg] = rank
    order = sorted(scores, key=lambda doc_id: -scores[doc_id])  # sorted() is stable: ties keep first-met order
    return [Fused(doc_id, scores[doc_id], tuple(ranks[doc_id])) for doc_id in order]

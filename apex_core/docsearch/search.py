"""Answering a query: the vector leg and the lexical leg, fused by reciprocal rank.

Each leg ranks up to ``depth`` chunks (at least 50); the vector leg embeds the query with its
tokens weighted by the corpus's inverse document frequency (``embedding.token_weights``); ``fusion.reciprocal_rank_fusion`` merges the
two rankings and the best ``k`` are returned with their text, source, section, page, lines, fused
score and place in each leg. An open index (chromadb collection, BM25 arrays) is kept per folder
for the life of the process and reopened when ``index`` has changed it, so a query after the
first costs an embedding, an HNSW look-up and a BM25 pass: milliseconds.

Searching where no index exists yet builds the default one first (about half a minute on a
2-core machine without PDFs) and says so through ``progress``: whoever asks a question wants an
answer, and the build needs nothing but what is installed. ``apex docs index`` refreshes it later.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from apex_core.docsearch.embedding import embedder
from apex_core.docsearch.fusion import RRF_K, reciprocal_rank_fusion
from apex_core.docsearch.lexical import LexicalIndex
from apex_core.docsearch.models import KINDS, DocHit
from apex_core.docsearch.store import (
    LEXICAL_DIR,
    MANIFEST,
    QUERY_WEIGHTS,
    chunk_from_stored,
    index,
    index_exists,
    open_for_search,
    resolve_index_dir,
)
from apex_core.errors import ApexUserError, UnknownNameError
from apex_core.progress import Progress

MAX_K = 50
MIN_DEPTH = 50


class _OpenIndex:
    """A folder's collection and BM25 index as loaded, with the manifest stamp they match."""

    def __init__(self, folder: Path) -> None:
        self.stamp = _stamp(folder)
        self.collection = open_for_search(folder)
        self.count = self.collection.count()
        self.lexical = LexicalIndex.load(folder / LEXICAL_DIR)
        weights = folder / QUERY_WEIGHTS
        self.weights = np.load(weights) if weights.is_file() else None


_open: dict[Path, _OpenIndex] = {}
_open_lock = threading.Lock()


def _stamp(folder: Path) -> tuple[int, int]:
    status = (folder / MANIFEST).stat()
    return status.st_mtime_ns, status.st_size


def _opened(folder: Path) -> _OpenIndex:
    with _open_lock:
        current = _open.get(folder)
        if current is None or current.stamp != _stamp(folder):
            current = _open[folder] = _OpenIndex(folder)
        return current


def check_query(query: str, k: int, kinds: list[str] | tuple[str, ...] | None) -> tuple[str, tuple[str, ...] | None]:
    """The query stripped and the kinds as a tuple, or a user error saying what would be right."""
    text = query.strip() if isinstance(query, str) else ""
    if not text:
        raise ApexUserError('the query is empty; give words to search for, e.g. "LDS size of the MI355X"')
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ApexUserError(f"k={k!r} is not a number of results from 1 to {MAX_K}; e.g. k=5 (the default)")
    if kinds is None or len(kinds) == 0:
        return text, None
    for kind in kinds:
        if kind not in KINDS:
            raise UnknownNameError("document kind", kind, KINDS)
    return text, tuple(dict.fromkeys(kinds))


def search(query: str, k: int = 5, *, index_dir: Path | None = None, kinds: list[str] | tuple[str, ...] | None = None,
           progress: Progress | None = None) -> list[DocHit]:
    """The ``k`` chunks that best answer ``query`` (of the given ``kinds`` only, if any), best first."""
    text, wanted = check_query(query, k, kinds)
    folder = resolve_index_dir(index_dir)
    if not index_exists(folder):
        if progress is not None:
            progress(0.0, f"no documentation index in {folder} yet: building the default one first (once)")
        index(None, index_dir=folder, progress=progress)
    opened = _opened(folder)
    if opened.count == 0:
        return []
    depth = min(max(MIN_DEPTH, 4 * k), opened.count)
    where = {"kind": {"$in": list(wanted)}} if wanted else None
    found = opened.collection.query(query_embeddings=embedder().embed_query(text, opened.weights), n_results=depth, where=where,
                                    include=["documents", "metadatas"])
    records = {chunk_id: (doc, meta) for chunk_id, doc, meta in zip(found["ids"][0], found["documents"][0], found["metadatas"][0])}
    vector_ranking = list(found["ids"][0])
    lexical_ranking = opened.lexical.ranking(text, depth, wanted) if opened.lexical is not None else []
    fused = reciprocal_rank_fusion([vector_ranking, lexical_ranking], RRF_K)[:k]
    missing = [item.id for item in fused if item.id not in records]
    if missing:
        extra = opened.collection.get(ids=missing, include=["documents", "metadatas"])
        records.update({chunk_id: (doc, meta) for chunk_id, doc, meta in zip(extra["ids"], extra["documents"], extra["metadatas"])})
    hits = []
    for item in fused:
        if item.id not in records:
            continue  # the index changed under us between the two reads: the chunk is gone
        document, metadata = records[item.id]
        chunk = chunk_from_stored(document, metadata)
        hits.append(DocHit(**chunk.model_dump(), score=item.score, vector_rank=item.ranks[0], lexical_rank=item.ranks[1]))
    return hits

"""The lexical leg: BM25 (bm25s) over the chunks' words, stored beside the vector index.

Kernel documentation is full of exact names a static embedding knows nothing about (``num_warps``,
``tl.dot``, ``gfx950``, ``MFMA``); BM25 finds them by the word. The tokenizer keeps such names
whole and also adds their parts, so ``lds_per_cu_kib`` matches "LDS", ``tl.dot`` matches "dot" and
``triton.testing.do_bench`` matches ``do_bench``;
it drops common English words and a plural ``s``, the only stemming done.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

_TOKEN = re.compile(r"[a-z0-9]+(?:[._][a-z0-9]+)*")
_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how i if in is it its of on or that the this to "
    "was what when where which who why will with you your we our not no into than then there these those".split()
)
IDS_FILE = "ids.json"


def tokenize(text: str) -> list[str]:
    """Lower-case words and names, compound names also split into their parts, stop words dropped."""
    tokens: list[str] = []
    for word in _TOKEN.findall(text.lower()):
        dotted = word.split(".")
        parts = re.split(r"[._]", word)
        if len(parts) > 1:
            tokens.append(word)  # a name is matched exactly, its parts loosely
        if len(dotted) > 1:
            tokens += [name for name in dotted if "_" in name]  # 'do_bench' of 'triton.testing.do_bench'
        tokens += [_singular(part) for part in parts if part and part not in _STOPWORDS]
    return tokens


def _singular(token: str) -> str:
    """'kernels' -> 'kernel', 'CUs' -> 'cu'; 'status', 'analysis', 'class' and '2s' stay as they are."""
    if not token.endswith("s") or len(token) < 3 or token[-2].isdigit() or token.endswith("ss"):
        return token
    if len(token) > 3 and token.endswith(("us", "is")):
        return token
    return token[:-1]


class LexicalIndex:
    """BM25 scores of all chunks for a query, with each chunk's id and kind in index order."""

    def __init__(self, retriever, ids: list[str], kinds: list[str]) -> None:
        self._retriever = retriever
        self.ids = ids
        self._kinds = np.array(kinds)

    @classmethod
    def build(cls, ids: list[str], kinds: list[str], texts: list[str]):
        import bm25s

        retriever = bm25s.BM25()
        retriever.index([tokenize(text) for text in texts], show_progress=False)
        return cls(retriever, ids, kinds)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._retriever.save(str(folder), show_progress=False)
        (folder / IDS_FILE).write_text(json.dumps({"ids": self.ids, "kinds": self._kinds.tolist()}), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> LexicalIndex | None:
        """The saved index, or None where there is none (an empty corpus)."""
        import bm25s

        if not (folder / IDS_FILE).is_file():
            return None
        stored = json.loads((folder / IDS_FILE).read_text(encoding="utf-8"))
        retriever = bm25s.BM25.load(str(folder), show_progress=False, mmap=False)
        return cls(retriever, stored["ids"], stored["kinds"])

    def ranking(self, query: str, depth: int, kinds: tuple[str, ...] | None = None) -> list[str]:
        """Ids of the ``depth`` best-scoring chunks with a score above 0 (of ``kinds`` if given)."""
        tokens = [t for t in tokenize(query) if t in self._retriever.vocab_dict]
        if not tokens or not self.ids:
            return []
        scores = np.asarray(self._retriever.get_scores(tokens), dtype=np.float64)
        if kinds is not None:
            scores = np.where(np.isin(self._kinds, kinds), scores, 0.0)
        candidates = np.flatnonzero(scores > 0)
        if candidates.size > depth:
            candidates = candidates[np.argpartition(-scores[candidates], depth - 1)[:depth]]
        best = candidates[np.argsort(-scores[candidates], kind="stable")]
        return [self.ids[i] for i in best]

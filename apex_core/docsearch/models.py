"""The records of the documentation search: a chunk as indexed, a hit as returned, a build's report."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Kind = Literal["skill", "doc", "hardware", "docstring", "pdf"]
KINDS: tuple[str, ...] = ("skill", "doc", "hardware", "docstring", "pdf")


class Chunk(BaseModel):
    """One passage of the corpus with where it came from, as stored in the index."""

    model_config = ConfigDict(frozen=True)

    text: str
    source: str
    """A path (relative to the project root when inside it) or ``package:module`` for docstrings."""
    kind: Kind
    section: str | None = None
    """The Markdown heading path, the Python qualified name, or the GPU and fact it states."""
    page: int | None = None
    """1-based page of a PDF."""
    line_start: int | None = None
    line_end: int | None = None

    def heading(self) -> str:
        """What the chunk is about in one line, put before its text for both retrieval legs."""
        where = self.section or (f"page {self.page}" if self.page is not None else "")
        return f"{self.source} > {where}" if where else self.source


class DocHit(Chunk):
    """A chunk found for a query, with its fused score and its rank in each leg (None: not there)."""

    score: float
    """Reciprocal rank fusion of the two legs' ranks: higher is better, at most 2 / (60 + 1)."""
    vector_rank: int | None = None
    lexical_rank: int | None = None


class IndexReport(BaseModel):
    """What one ``index`` call changed in the index."""

    index_dir: str
    added: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = Field(default_factory=list)
    chunks: int = 0
    """Chunks in the whole index after the call."""
    chunks_written: int = 0
    """Chunks embedded and written by this call (0 when nothing changed)."""
    seconds: float = 0.0
    skipped: list[str] = Field(default_factory=list)
    """Default-corpus parts that are absent here (a kernel package not installed, no PDFs yet), and
    files over the size caps, each with its reason."""
    failed: list[str] = Field(default_factory=list)
    """Files whose indexing failed, each with its reason: nothing of them is in the index."""
    orphans_removed: int = 0
    """Chunks of files the manifest does not list (an interrupted run's), deleted by this call."""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.orphans_removed)

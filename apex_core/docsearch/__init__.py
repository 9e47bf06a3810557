"""Documentation search (issue 16): the skills, our docs, the hardware model's facts, the kernel
packages' docstrings and AMD's PDFs, retrieved by a vector leg (a static sentence embedding that a
PyPI wheel ships, in chromadb) and a lexical leg (BM25) fused by reciprocal rank.

``search(query, k)`` returns ``DocHit`` records; ``index(paths)`` brings the index up to date
(incrementally, by content hash). See docs/docs_search.md.
"""

from apex_core.docsearch.models import KINDS, Chunk, DocHit, IndexReport
from apex_core.docsearch.search import search
from apex_core.docsearch.store import ENV_VAR, index, resolve_index_dir

__all__ = ["ENV_VAR", "KINDS", "Chunk", "DocHit", "IndexReport", "index", "resolve_index_dir", "search"]

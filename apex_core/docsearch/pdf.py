"""The text of a PDF as passages, one page (or part of a page) each, read with pypdf.

Each passage keeps its 1-based page number and, as its section, the title of the outline entry
(bookmark) the page falls under, where the PDF has an outline (AMD's ISA guides do), else the
page's printed label ("page 12", "page iv"). Line numbers are those of the page's extracted text.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from apex_core.docsearch.chunking import MAX_CHARS, split_lines
from apex_core.errors import ApexUserError


@dataclass(frozen=True)
class PagePassage:
    page: int
    section: str
    text: str
    line_start: int
    line_end: int


def pdf_passages(path: Path, max_chars: int = MAX_CHARS) -> list[PagePassage]:
    """Passages of the PDF at ``path``; a file pypdf cannot read is a user error naming it."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings on odd but readable files are noise here
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            reader.decrypt("")
        titles = _outline_titles(reader)
        passages: list[PagePassage] = []
        for index, page in enumerate(reader.pages):
            text = page.extract_text() or ""
            section = titles.get(index) or f"page {_label(reader, index)}"
            for piece in split_lines(text.splitlines(), 1, max_chars):
                passages.append(PagePassage(index + 1, section, piece.text, piece.line_start, piece.line_end))
    except (PdfReadError, OSError, ValueError, KeyError, TypeError) as error:
        raise ApexUserError(f"{path}: not a readable PDF ({type(error).__name__}: {error}); remove it or replace it") from None
    return passages


def _label(reader, index: int) -> str:
    try:
        return str(reader.page_labels[index])
    except Exception:  # a malformed label tree: the physical number still locates the page
        return str(index + 1)


def _outline_titles(reader) -> dict[int, str]:
    """Page index -> the title of the deepest outline entry that starts at or before it."""
    starts: list[tuple[int, str]] = []

    def walk(entries, parents: tuple[str, ...]) -> None:
        last: tuple[str, ...] = parents
        for entry in entries:
            if isinstance(entry, list):
                walk(entry, last)
                continue
            try:
                page = reader.get_destination_page_number(entry)
                title = str(entry.title).strip()
            except Exception:
                continue
            if page is None or page < 0 or not title:
                continue
            last = (*parents, title)
            starts.append((page, " > ".join(last[-2:])))

    try:
        walk(reader.outline, ())
    except Exception:  # no outline, or one pypdf cannot follow: page labels then
        return {}
    if not starts:
        return {}
    starts.sort(key=lambda item: item[0])
    titles: dict[int, str] = {}
    position = 0
    current: str | None = None
    for index in range(len(reader.pages)):
        while position < len(starts) and starts[position][0] <= index:
            current = starts[position][1]
            position += 1
        if current is not None:
            titles[index] = current
    return titles

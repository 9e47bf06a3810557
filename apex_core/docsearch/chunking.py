"""Cutting text into passages small enough to rank well and large enough to answer a question.

Markdown is cut at its headings, so a passage is one section and carries its heading path
("Grader > Timing > Cache flush"); a section longer than ``MAX_CHARS`` is cut again at blank lines
(then at line ends), and each piece repeats the end of the one before (``OVERLAP_CHARS``) so a
sentence that straddles the cut is whole in one of them. Every piece keeps its 1-based line range.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CHARS = 1500
"""About 300-400 tokens: one idea per passage; a static embedding averages its tokens, so a long
passage blurs into the mean of everything it says."""
OVERLAP_CHARS = 250

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Piece:
    """A passage of a text and the lines it spans (1-based, inclusive)."""

    text: str
    line_start: int
    line_end: int


@dataclass(frozen=True)
class Section:
    """A Markdown section: its heading path (None before the first heading) and its pieces."""

    heading: str | None
    pieces: list[Piece]


def split_lines(lines: list[str], first_line: int = 1, max_chars: int = MAX_CHARS,
                overlap_chars: int = OVERLAP_CHARS, markdown: bool = False) -> list[Piece]:
    """``lines`` (numbered from ``first_line``) as pieces of at most about ``max_chars``, cut at
    blank lines where possible, with the last paragraph of a piece repeated at the start of the next
    when it is shorter than ``overlap_chars``. Blank-only input gives no piece. With ``markdown``, a
    heading line stays with the paragraph after it (a piece of just "### LDS" answers nothing)."""
    pieces: list[Piece] = []
    current: list[Piece] = []
    size = 0
    for block in _blocks(lines, first_line, max_chars):
        only_headings = markdown and all(_HEADING.match(b.text) and "\n" not in b.text for b in current)
        if current and size + len(block.text) + 2 > max_chars and not only_headings:
            pieces.append(_join(current))
            tail = current[-1]
            current = [tail] if len(current) > 1 and len(tail.text) <= overlap_chars else []
            size = sum(len(p.text) + 2 for p in current)
        current.append(block)
        size += len(block.text) + 2
    if current:
        pieces.append(_join(current))
    return pieces


def _blocks(lines: list[str], first_line: int, max_chars: int) -> list[Piece]:
    """Paragraphs (runs of non-blank lines); one longer than ``max_chars`` becomes runs of lines,
    and a single line longer than that becomes slices of it."""
    blocks: list[Piece] = []
    run: list[tuple[int, str]] = []

    def flush() -> None:
        if not run:
            return
        text = "\n".join(line for _, line in run)
        if len(text) <= max_chars:
            blocks.append(Piece(text, run[0][0], run[-1][0]))
        else:
            group: list[tuple[int, str]] = []
            for number, line in run:
                if group and sum(len(l) + 1 for _, l in group) + len(line) > max_chars:
                    blocks.append(Piece("\n".join(l for _, l in group), group[0][0], group[-1][0]))
                    group = []
                if len(line) > max_chars:
                    blocks.extend(Piece(line[i:i + max_chars], number, number) for i in range(0, len(line), max_chars))
                else:
                    group.append((number, line))
            if group:
                blocks.append(Piece("\n".join(l for _, l in group), group[0][0], group[-1][0]))
        run.clear()

    for offset, line in enumerate(lines):
        if line.strip():
            run.append((first_line + offset, line.rstrip()))
        else:
            flush()
    flush()
    return blocks


def _join(blocks: list[Piece]) -> Piece:
    return Piece("\n\n".join(b.text for b in blocks), blocks[0].line_start, blocks[-1].line_end)


def markdown_sections(text: str, max_chars: int = MAX_CHARS, overlap_chars: int = OVERLAP_CHARS) -> list[Section]:
    """The sections of a Markdown text, each with its heading path ("A > B > C") and its pieces.

    Headings inside fenced code blocks are code, not headings. Text before the first heading (a
    skill's front matter, say) is a section of its own with no heading.
    """
    lines = text.splitlines()
    starts: list[tuple[int, str | None]] = [(0, None)]
    path: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            level = len(match.group(1))
            path = [(lv, title) for lv, title in path if lv < level] + [(level, match.group(2).strip())]
            starts.append((number, " > ".join(title for _, title in path)))
    sections: list[Section] = []
    for (begin, heading), (end, _) in zip(starts, [*starts[1:], (len(lines), None)]):
        body = lines[begin + 1:end] if heading is not None else lines[begin:end]
        if not any(line.strip() for line in body):
            continue  # a heading followed at once by a subheading: its subsections carry its title
        sections.append(Section(heading, split_lines(lines[begin:end], begin + 1, max_chars, overlap_chars, markdown=True)))
    return sections

"""What the documentation search reads: the default corpus and the files a user adds.

The unit of indexing is a ``Unit``: one file (a Markdown or text document, a Python module, a PDF)
or the hardware model. Each has a stable ``key``, a content hash (the file's bytes, or the text of
the hardware facts) and knows how to cut itself into chunks. The index compares hashes per key,
so a unit whose content is unchanged is never read twice.

The default corpus, in this order: the skills (``skills/**/*.md``), our documentation
(``docs/**/*.md`` and ``README.md``), the hardware model's facts with their sources, the
docstrings of the kernel packages that are installed (triton, liger_kernel, fla), and the PDFs in
``docs_index/pdfs/`` (AMD ISA guides and white papers; ``setup.sh`` fetches the public ones).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from apex_core.docsearch.chunking import markdown_sections, split_lines
from apex_core.docsearch.docstrings import docstring_passages
from apex_core.docsearch.models import Chunk, Kind
from apex_core.errors import ApexUserError
from apex_core.sources.packages import package_root

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DOCS_INDEX_DIR = PROJECT_ROOT / "docs_index"
PDF_DIR = DOCS_INDEX_DIR / "pdfs"
DOCSTRING_PACKAGES: tuple[str, ...] = ("triton", "liger_kernel", "fla")
"""Kernel packages whose docstrings are indexed where installed (a subset of the source index's stack)."""
HARDWARE_KEY = "hardware model"
SUFFIXES: dict[str, str] = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".py": "python", ".pdf": "pdf"}
_SKIPPED_DIRS = {"__pycache__", "node_modules", ".venv", "venv", ".git", "tests", "test"}


class Unit(BaseModel):
    """One indexable thing: a file or the hardware model."""

    model_config = ConfigDict(frozen=True)

    key: str
    kind: Kind
    source: str
    """What its chunks name as their source: a path, ``package:module`` or the specs file."""
    path: Path | None = None
    module: str | None = None
    """Dotted module name of a Python file, used in its passages' headers."""
    default: bool = False
    """Part of the default corpus (dropped from the index when it disappears from the corpus)."""

    def fingerprint(self) -> str:
        """The sha256 of the unit's content: the file's bytes, or the hardware facts' text."""
        digest = hashlib.sha256()
        if self.path is None:
            for chunk in self.chunks():
                digest.update(f"{chunk.section}\0{chunk.line_start}\0{chunk.text}\0".encode())
        else:
            try:
                digest.update(self.path.read_bytes())
            except OSError as error:
                raise ApexUserError(f"{self.path}: cannot be read ({error.strerror}); check its permissions") from None
        return digest.hexdigest()

    def chunks(self) -> list[Chunk]:
        """The unit cut into chunks, each with its source, kind, section, page and lines."""
        if self.path is None:
            from apex_core.docsearch.hardware_facts import hardware_facts

            return [Chunk(text=f.text, source=self.source, kind="hardware", section=f.section, line_start=f.line, line_end=f.line)
                    for f in hardware_facts()]
        form = SUFFIXES[self.path.suffix.lower()]
        if form == "pdf":
            from apex_core.docsearch.pdf import pdf_passages

            return [Chunk(text=p.text, source=self.source, kind=self.kind, section=p.section, page=p.page,
                          line_start=p.line_start, line_end=p.line_end) for p in pdf_passages(self.path)]
        text = self.path.read_text(encoding="utf-8", errors="replace")
        if form == "python":
            return [Chunk(text=p.text, source=self.source, kind=self.kind, section=p.qualname, line_start=p.line_start,
                          line_end=p.line_end) for p in docstring_passages(text, self.module or self.path.stem)]
        if form == "markdown":
            return [Chunk(text=piece.text, source=self.source, kind=self.kind, section=section.heading,
                          line_start=piece.line_start, line_end=piece.line_end)
                    for section in markdown_sections(text) for piece in section.pieces]
        return [Chunk(text=piece.text, source=self.source, kind=self.kind, line_start=piece.line_start, line_end=piece.line_end)
                for piece in split_lines(text.splitlines())]


def display_path(path: Path, root: Path = PROJECT_ROOT) -> str:
    """``path`` relative to the project root when inside it (stable across clones), else absolute."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(resolved)


def file_unit(path: Path, default: bool = False, root: Path = PROJECT_ROOT) -> Unit:
    """The unit of one supported file; its kind follows from its type and place (under the
    project's ``skills/``: a skill; other Markdown and text: a doc)."""
    resolved = path.resolve()
    form = SUFFIXES[resolved.suffix.lower()]
    source = display_path(resolved, root)
    if form == "pdf":
        kind: Kind = "pdf"
    elif form == "python":
        kind = "docstring"
    elif _inside(resolved, root / "skills"):
        kind = "skill"
    else:
        kind = "doc"
    module = None
    if form == "python":
        relative = Path(source)
        parts = relative.with_suffix("").parts if not relative.is_absolute() else (resolved.stem,)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)
    return Unit(key=source, kind=kind, source=source, path=resolved, module=module, default=default)


def default_units(root: Path = PROJECT_ROOT, packages: tuple[str, ...] = DOCSTRING_PACKAGES) -> tuple[list[Unit], list[str]]:
    """The default corpus as units, and the parts of it absent on this machine (said, not fatal).
    ``root`` is the project whose skills/, docs/, README.md and docs_index/pdfs/ are read."""
    units: list[Unit] = []
    skipped: list[str] = []
    for folder in ("skills", "docs"):
        units += [file_unit(p, default=True, root=root) for p in _files(root / folder, {".md"})]
    if (root / "README.md").is_file():
        units.append(file_unit(root / "README.md", default=True, root=root))
    units.append(Unit(key=HARDWARE_KEY, kind="hardware", source="apex_core/hardware/specs.py", default=True))
    for package in packages:
        found = package_units(package)
        if found is None:
            skipped.append(f"{package} docstrings (not installed)")
        else:
            units += found
    pdf_dir = root / PDF_DIR.relative_to(PROJECT_ROOT)
    pdfs = list(_files(pdf_dir, {".pdf"}))
    if not pdfs:
        skipped.append(f"PDFs (none in {display_path(pdf_dir, root)}/; setup.sh fetches the public AMD ones where a network exists)")
    units += [file_unit(p, default=True, root=root) for p in pdfs]
    return units, skipped


def package_units(package: str) -> list[Unit] | None:
    """One docstring unit per public module of an installed package, None when it is not installed."""
    root = package_root(package)
    if root is None:
        return None
    if root.is_file():  # a single-module distribution
        return [Unit(key=f"{package}:{package}", kind="docstring", source=f"{package}:{package}", path=root,
                     module=package, default=True)]
    units = []
    for path in _files(root, {".py"}):
        parts = path.relative_to(root).with_suffix("").parts
        if any(part.startswith("_") and part != "__init__" for part in parts):
            continue  # private modules (triton's ``_core``, ``_utils``) document internals, not the API
        module = ".".join((package, *parts[:-1])) if parts[-1] == "__init__" else ".".join((package, *parts))
        source = f"{package}:{module}"
        units.append(Unit(key=source, kind="docstring", source=source, path=path, module=module, default=True))
    return units


def units_for_paths(paths: list[Path], skip: Path | None = None) -> tuple[list[Unit], list[Path]]:
    """The units of the files and folders a user gave, and the folders among them (whose vanished
    files the index drops). Every path is checked before anything is indexed."""
    units: dict[str, Unit] = {}
    folders: list[Path] = []
    for path in paths:
        if not path.exists():
            raise ApexUserError(f"{path}: no such file or folder; give Markdown (.md), text (.txt), Python (.py) "
                                "or PDF (.pdf) files, or folders of them")
        if path.is_dir():
            found = [p for p in _files(path, set(SUFFIXES), skip) if p.suffix.lower() in SUFFIXES]
            if not found:
                raise ApexUserError(f"{path}: no .md, .markdown, .txt, .py or .pdf file in this folder; give a folder of documents")
            folders.append(path.resolve())
            for file in found:
                unit = file_unit(file)
                units[unit.key] = unit
            continue
        if path.suffix.lower() not in SUFFIXES:
            raise ApexUserError(f"{path}: unsupported file type '{path.suffix or '(none)'}'; "
                                "supported: .md, .markdown, .txt, .py, .pdf")
        unit = file_unit(path)
        units[unit.key] = unit
    return list(units.values()), folders


def _files(folder: Path, suffixes: set[str], skip: Path | None = None) -> Iterator[Path]:
    """Files under ``folder`` with one of ``suffixes``, sorted, outside hidden, cache and test folders."""
    if not folder.is_dir():
        return iter(())
    skip = skip.resolve() if skip is not None else None
    found = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder).parts[:-1]
        if any(part.startswith(".") or part in _SKIPPED_DIRS for part in relative):
            continue
        if skip is not None and _inside(path.resolve(), skip):
            continue
        if path.is_file() and path.suffix.lower() in suffixes:
            found.append(path)
    return iter(sorted(found))


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder.resolve())
        return True
    except ValueError:
        return False

"""``apex docs index`` and ``apex docs search``: the documentation search of issue 16.

``index`` brings the index up to date (the default corpus, or the files and folders given) and
prints what changed; ``search`` prints the best passages, or with --json a list of objects with
at least ``text``, ``source`` and ``score``. Progress goes to stderr, results to stdout.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from apex_core.cli.output import JsonOption, console, print_json, progress_reporter

if TYPE_CHECKING:
    from apex_core.docsearch import DocHit, IndexReport

app = typer.Typer(help="Search the skills, docs, hardware facts, kernel docstrings and AMD PDFs.", no_args_is_help=True,
                  rich_markup_mode=None)

IndexDirOption = Annotated[
    Optional[Path],
    typer.Option("--index-dir", help="Index folder (default: $APEX_DOCS_INDEX if set, else docs_index/index/)."),
]


def register(main_app: typer.Typer) -> None:
    """Add ``apex docs`` to the main command."""
    main_app.add_typer(app, name="docs")


@app.command("index")
def docs_index(
    paths: Annotated[Optional[list[Path]], typer.Argument(
        help="Markdown, text, Python or PDF files, or folders of them (default: the whole default corpus).",
        show_default=False)] = None,
    index_dir: IndexDirOption = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Start from an empty index: the default corpus and the files "
                                                            "added before (or just the paths given).")] = False,
    remove: Annotated[Optional[list[Path]], typer.Option("--remove", help="Take this file, or every indexed file under "
                                                                           "this folder, out of the index (repeatable).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Index the documentation incrementally: unchanged files are skipped, changed ones replaced. A file is indexed
    all or nothing; Markdown, text and Python files over 8 MiB and PDFs over 128 MiB are skipped with the reason.

    Examples: apex docs index;  apex docs index notes/ --json;  apex docs index --remove notes/old.md;  apex docs index --rebuild"""
    from apex_core.docsearch import index
    from apex_core.errors import ApexUserError

    if remove:
        if paths or rebuild:
            raise ApexUserError("--remove takes files out of the index on its own: give it without paths or --rebuild")
        from apex_core.docsearch.store import remove as remove_from_index

        report = remove_from_index(list(remove), index_dir=index_dir)
    else:
        with progress_reporter("docs index") as progress:
            report = index(list(paths) if paths else None, index_dir=index_dir, progress=progress, rebuild=rebuild)
    if as_json:
        print_json(report.model_dump(mode="json"))
        return
    _render_report(report)


@app.command("search")
def docs_search(
    query: Annotated[str, typer.Argument(help='What to look for, e.g. "LDS size of the MI355X".')],
    k: Annotated[int, typer.Option("--k", "-k", help="How many passages (1 to 50).")] = 5,
    kind: Annotated[Optional[list[str]], typer.Option(
        "--kind", help="Only passages of this kind (repeatable or comma-separated): skill, doc, hardware, docstring, pdf.")] = None,
    index_dir: IndexDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Find the passages that answer a question (vector and BM25 legs, reciprocal rank fusion)."""
    from apex_core.docsearch import resolve_index_dir, search
    from apex_core.docsearch.search import check_query
    from apex_core.docsearch.store import index_exists

    kinds = [part.strip() for value in kind or [] for part in value.split(",") if part.strip()]
    check_query(query, k, kinds)  # a bad argument is said before a first build could start
    building = not index_exists(resolve_index_dir(index_dir))
    reporter = progress_reporter("building the docs index") if building else contextlib.nullcontext(None)
    with reporter as progress:
        hits = search(query, k, index_dir=index_dir, kinds=kinds or None, progress=progress)
    if as_json:
        print_json([hit.model_dump(mode="json") for hit in hits])
        return
    _render_hits(query, hits)


def _render_report(report: IndexReport) -> None:
    lines = [
        (f"{report.index_dir}: {len(report.added)} added, {len(report.updated)} updated, {report.unchanged} unchanged, "
         f"{len(report.removed)} removed; {report.chunks} chunks in the index ({report.chunks_written} written) "
         f"in {report.seconds:.1f} s"),
    ]
    for label, names in (("added", report.added), ("updated", report.updated), ("removed", report.removed)):
        shown = names[:10]
        lines += [f"  {label}: {name}" for name in shown]
        if len(names) > len(shown):
            lines.append(f"  {label}: ... and {len(names) - len(shown)} more")
    lines += [f"  not indexed: {what}" for what in report.skipped]
    lines += [f"  failed, nothing of it kept: {what}" for what in report.failed]
    if report.orphans_removed:
        lines.append(f"  {report.orphans_removed} chunk(s) of an interrupted run deleted")
    for line in lines:
        console.print(line, soft_wrap=True, highlight=False)


def _location(hit: DocHit) -> str:
    where = hit.source
    if hit.page is not None:
        where += f", page {hit.page}"
    if hit.line_start is not None:
        where += f":{hit.line_start}" + (f"-{hit.line_end}" if hit.line_end not in (None, hit.line_start) else "")
    return where


def _render_hits(query: str, hits: list[DocHit]) -> None:
    if not hits:
        console.print(f"nothing found for {query!r}; try other words, or add documents with 'apex docs index PATH'",
                      soft_wrap=True, highlight=False)
        return
    for number, hit in enumerate(hits, 1):
        console.print(f"{number}. [{hit.kind}] {_location(hit)}  score {hit.score:.4f}", style="bold", soft_wrap=True,
                      highlight=False)
        if hit.section:
            console.print(f"   {hit.section}", style="cyan", soft_wrap=True, highlight=False)
        text = " ".join(hit.text.split())
        console.print(f"   {text[:400]}{' ...' if len(text) > 400 else ''}", soft_wrap=True, highlight=False)
        console.print("")

"""``apex source``: the source explorer over the one source index (docs/sources.md).

``find`` names where a kernel is defined (by the name a profiler shows), ``show`` prints numbered
source, ``callers`` / ``callees`` walk the code around a kernel, ``launches`` lists the calls that
launch it with their arguments, ``grep`` searches the indexed trees, ``index`` says what is indexed.
Every command prints JSON with --json; progress and errors go to stderr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from apex_core.cli.output import JsonOption, console, print_json
from apex_core.errors import NotFoundError
from apex_core.sources.grep import SEARCH_TIMEOUT_S

if TYPE_CHECKING:
    from apex_core.sources.explorer import CodeRef, SourceExplorer

app = typer.Typer(help="Read the kernels of the installed stack: find, show, callers, callees, launches, grep.",
                  no_args_is_help=True, rich_markup_mode=None)

NameArgument = Annotated[str, typer.Argument(help="A kernel's profiler name (mangled or not), or a Python function's (dotted) name.")]
PackageOption = Annotated[Optional[str], typer.Option("--package", help="Only this indexed package (torch, triton, liger_kernel, ...).")]


def register(main_app: typer.Typer) -> None:
    """Add ``apex source`` to the main command."""
    main_app.add_typer(app, name="source")


def _explorer() -> SourceExplorer:
    from apex_core.sources.explorer import SourceExplorer

    return SourceExplorer.build()


@app.command("find")
def find_command(name: NameArgument, as_json: JsonOption = False) -> None:
    """Where a kernel is defined, with its package version and launchers. Exit code 1 when none is."""
    found = _explorer().find(name)
    if as_json and not found:
        print_json([])
        raise typer.Exit(1)
    if as_json:
        print_json([{**s.model_dump(mode="json", exclude={"launch_sites"}), "location": s.location, "launchers": list(s.launchers)}
                    for s in found])
        return
    if not found:
        raise NotFoundError(f"no indexed kernel is named {name!r} (a vendor library kernel has no source here; see 'apex source index')")
    for symbol in found:
        console.print(f"{symbol.qualified_name}  [{symbol.language}, {symbol.package} {symbol.version}]  {symbol.location}", highlight=False)
        for launcher in symbol.launchers:
            console.print(f"    launched by {launcher}", highlight=False)


@app.command("show")
def show_command(
    location: Annotated[str, typer.Argument(help="PATH, PATH:LINE, PATH:START-END, or a kernel or function name.")],
    context: Annotated[int, typer.Option(help="Lines around PATH:LINE.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """Numbered source of an indexed file, a line range, or a kernel's or function's whole definition."""
    lines = _explorer().show(location, context=context)
    if as_json:
        print_json(lines.model_dump(mode="json"))
        return
    console.print(f"{lines.path} ({lines.package} {lines.version}), lines {lines.start}-{lines.end} of {lines.total_lines}"
                  + (" (cut)" if lines.truncated else ""), highlight=False)
    console.print(lines.text, highlight=False, markup=False)


@app.command("callers")
def callers_command(
    name: NameArgument,
    package: PackageOption = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """Where a kernel is launched or a function called, with the enclosing function."""
    _print_refs(_explorer().callers(name, package=package, limit=limit), as_json, f"callers of {name}")


@app.command("callees")
def callees_command(name: NameArgument, as_json: JsonOption = False) -> None:
    """What a kernel's or function's definition calls and launches."""
    _print_refs(_explorer().callees(name), as_json, f"callees of {name}")


@app.command("launches")
def launches_command(name: NameArgument, as_json: JsonOption = False) -> None:
    """Every call that launches a kernel, with its grid and arguments as written."""
    sites = _explorer().launch_sites(name)
    if as_json:
        print_json([site.model_dump(mode="json") for site in sites])
        return
    if not sites:
        console.print(f"{name} is defined but no launch of it was found in the indexed code")
    for site in sites:
        call = f"{site.kernel}<<<{site.configuration}>>>" if site.configuration else f"{site.kernel}[...]"
        console.print(f"{site.path}:{site.line}  in {site.launcher}\n    {call}({site.arguments})", highlight=False, markup=False)


@app.command("grep")
def grep_command(
    pattern: Annotated[str, typer.Argument(help="A Python regular expression matched against each line, e.g. 'tl\\.dot\\('; "
                                           f"a search is stopped after {SEARCH_TIMEOUT_S:g} s.")],
    package: PackageOption = None,
    glob: Annotated[Optional[str], typer.Option("--glob", help="Only files whose path in the package matches, e.g. '*/ops/*.py'.")] = None,
    ignore_case: Annotated[bool, typer.Option("--ignore-case", "-i")] = False,
    limit: Annotated[int, typer.Option(help="At most this many matches (1 to 1000).")] = 100,
    as_json: JsonOption = False,
) -> None:
    """Search the indexed packages and checkouts with a regular expression."""
    result = _explorer().grep(pattern, package=package, path_glob=glob, ignore_case=ignore_case, limit=limit)
    if as_json:
        print_json(result.model_dump(mode="json"))
        if not result.hits:
            raise typer.Exit(1)
        return
    _print_refs(result.hits, False, f"{pattern} in {result.files_searched} files" + (" (more matches exist)" if result.truncated else ""))


@app.command("index")
def index_command(as_json: JsonOption = False) -> None:
    """Build or refresh the source index and say what it holds (packages, versions, kernels)."""
    from apex_core.sources import index_summary

    summary = index_summary(_explorer().index)
    if as_json:
        print_json(summary)
        return
    table = Table(title="source index")
    for column in ("package", "version", "files", "kernels", "rescanned"):
        table.add_column(column)
    for row in summary["packages"]:  # type: ignore[union-attr]
        table.add_row(*(str(row[key]) for key in ("package", "version", "files", "kernels", "rescanned")))
    console.print(table)
    if summary["skipped"]:
        console.print(f"not installed here: {', '.join(summary['skipped'])}")  # type: ignore[arg-type]


def _print_refs(refs: list[CodeRef], as_json: bool, title: str) -> None:
    """The references found; none found is exit code 1 (after the empty list or the count)."""
    if as_json:
        print_json([ref.model_dump(mode="json") for ref in refs])
    else:
        _print_ref_lines(refs, title)
    if not refs:
        raise typer.Exit(1)


def _print_ref_lines(refs: list[CodeRef], title: str) -> None:
    console.print(f"{title}: {len(refs)}", highlight=False)
    for ref in refs:
        where = f"{ref.path}:{ref.line}"
        context = f" in {ref.function}" if ref.function else ""
        target = f" -> {ref.target}{' (kernel)' if ref.target_is_kernel else ''}" if ref.target and ref.kind != "match" else ""
        console.print(f"{ref.kind:<6} {where}{context}{target}\n       {ref.text}", highlight=False, markup=False)

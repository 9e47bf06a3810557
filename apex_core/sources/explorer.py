"""The source explorer: what an agent reads around a kernel before it writes one.

Everything here reads the one source index (``build_index``): the kernels it knows, their launch
sites, and the files of the indexed packages and checkouts. Nothing outside those trees can be
shown or searched, so an agent's tool call cannot read a home directory or a secret by path, nor
through a link inside a tree: every file is read where it really is (``real_paths``). A user's
regular expression runs in a child process under a time limit (``grep``), so a pattern that
backtracks for ever costs that search, not the server.

Names are resolved the way people and profilers write them: a kernel by its profiler name
(mangled or not), a Python function by its dotted name (``liger_kernel.ops.rms_norm.rms_norm_forward``)
or by its bare name when that is unambiguous enough to be useful. Callers and callees of Python
code come from the syntax tree (nothing is imported or run); for C++ they come from the index's
launch sites, which is what a kernel engineer asks of them.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field

from apex_core.errors import ApexUserError, NotFoundError
from apex_core.sources.grep import SEARCH_TIMEOUT_S, scan_files, search_in_child
from apex_core.sources.index import PackageIndex, SourceIndex, build_index
from apex_core.sources.real_paths import OutsideTreeError, read_text_inside, real_root
from apex_core.sources.symbols import LaunchSite, SourceSymbol
from apex_core.sources.triton_scan import dotted_name

MAX_SHOW_LINES = 400
DEFAULT_CONTEXT = 20
LINE_TEXT_LIMIT = 240
NOISE_CALLS = frozenset({"len", "range", "int", "float", "bool", "str", "min", "max", "isinstance", "print", "getattr",
                         "hasattr", "setattr", "tuple", "list", "dict", "set", "type", "super", "enumerate", "zip", "abs"})
"""Builtins left out of callees: they say nothing about where a kernel's work goes."""
NOISE_PREFIXES = ("tl.", "triton.language.", "torch.", "math.", "os.", "warnings.", "logging.")

RefKind = Literal["kernel", "function", "launch", "call", "match"]


class CodeLines(BaseModel):
    """A numbered excerpt of one indexed file."""

    path: str
    package: str
    version: str
    start: int = Field(description="first line shown (1-based)")
    end: int = Field(description="last line shown")
    total_lines: int
    truncated: bool = Field(description="the range asked for was longer than the limit and was cut")
    text: str = Field(description="the lines, each prefixed with its number")


class CodeRef(BaseModel):
    """One place in the indexed code: a definition, a launch, a call or a search match."""

    kind: RefKind
    path: str
    line: int
    package: str
    version: str
    function: str | None = Field(default=None, description="the enclosing function (qualified), where known")
    target: str | None = Field(default=None, description="what is called or launched there")
    target_is_kernel: bool = False
    text: str = Field(description="the source line, trimmed")

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"


class Definition(NamedTuple):
    """Where a kernel or a Python function is defined, as the explorer reads it."""

    path: Path
    line: int
    """The ``def`` line of a Python function, the name's line of a C++ kernel."""
    end_line: int
    qualified_name: str


class GrepResult(BaseModel):
    pattern: str
    hits: list[CodeRef]
    files_searched: int
    truncated: bool = Field(description="more matches exist than the limit returned")


class SourceExplorer:
    """Read-only queries over one built index."""

    def __init__(self, index: SourceIndex, *, grep_timeout_s: float = SEARCH_TIMEOUT_S) -> None:
        self.index = index
        self.grep_timeout_s = grep_timeout_s
        self._roots = [(Path(real_root(p.root)), p) for p in index.packages]

    @classmethod
    def build(cls, cache_dir: Path | None = None) -> SourceExplorer:
        return cls(build_index(cache_dir=cache_dir))

    # --- where things are ---------------------------------------------------------------------

    def package_of(self, path: Path) -> PackageIndex | None:
        """The indexed package (or checkout) whose tree really holds ``path`` (links resolved), or None."""
        located = self._locate(path)
        return located[1] if located else None

    def _locate(self, path: Path) -> tuple[str, PackageIndex] | None:
        """The real root and the package of the tree that really holds ``path``, or None."""
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):  # a loop of links (RuntimeError before Python 3.13)
            return None
        for root, package in self._roots:
            if resolved == root or resolved.is_relative_to(root):
                return str(root), package
        return None

    def _indexed_names(self) -> str:
        return ", ".join(p.package for p in self.index.packages) or "none"

    def find(self, name: str) -> list[SourceSymbol]:
        """Kernels a profiler name (or source name) may denote, likeliest first."""
        name = _checked_name(name)
        found = self.index.find_kernels(name)
        if found:
            return found
        last = name.rsplit("::", 1)[-1].rsplit(".", 1)[-1]
        return self.index.kernels_named(last) if last != name else []

    def launch_sites(self, name: str) -> list[LaunchSite]:
        """Every place that launches the kernel ``name``, with the argument text as written."""
        kernels = self.find(name)
        if not kernels:
            raise NotFoundError(f"no indexed kernel is named {name!r}: find it first with 'apex source find' "
                                f"(indexed: {self._indexed_names()})")
        return list(kernels[0].launch_sites)

    # --- reading ------------------------------------------------------------------------------

    def show(self, location: str, *, context: int = DEFAULT_CONTEXT) -> CodeLines:
        """Lines of an indexed file: ``PATH``, ``PATH:LINE`` (with ``context`` lines around it),
        ``PATH:START-END``, or a kernel or function name (its whole definition)."""
        location = location.strip()
        if context < 0 or context > MAX_SHOW_LINES:
            raise ApexUserError(f"context {context}: give 0 to {MAX_SHOW_LINES} lines")
        path, span = _split_location(location)
        if path is None:
            definition = self._definition(location)
            if definition is None:
                raise NotFoundError(f"{location!r} is neither an indexed file nor a known kernel or function; give PATH, "
                                    "PATH:LINE, PATH:START-END or a name that 'apex source find' knows")
            path, span = definition.path, self._definition_span(definition)
        located = self._locate(path)
        if located is None:
            raise ApexUserError(f"{path} is outside the indexed sources ({self._indexed_names()}); give a path from "
                                "find, grep or a launch site")
        root, package = located
        lines = _read_lines(path, root)
        if span is None:
            start, end = 1, len(lines)
        elif span[1] is None:
            start, end = span[0] - context, span[0] + context
        else:
            start, end = span[0], span[1]
        start = max(1, start)
        end = min(len(lines), max(end, start))
        truncated = end - start + 1 > MAX_SHOW_LINES
        if truncated:
            end = start + MAX_SHOW_LINES - 1
        width = len(str(end))
        text = "\n".join(f"{number:>{width}} | {lines[number - 1]}" for number in range(start, end + 1))
        return CodeLines(path=str(path), package=package.package, version=package.version, start=start, end=end,
                         total_lines=len(lines), truncated=truncated, text=text)

    # --- who calls whom -----------------------------------------------------------------------

    def callers(self, name: str, *, package: str | None = None, limit: int = 50) -> list[CodeRef]:
        """Where ``name`` is launched (a kernel) or called (a function), with the enclosing function."""
        name = _checked_name(name)
        refs: list[CodeRef] = []
        for kernel in self.find(name)[:1]:
            for site in kernel.launch_sites:
                refs.append(self._ref("launch", Path(site.path), site.line, function=site.launcher, target=kernel.name,
                                      target_is_kernel=True))
        short = name.rsplit(".", 1)[-1].rsplit("::", 1)[-1]
        call = re.compile(rf"(?<![\w]){re.escape(short)}\s*\(")
        seen = {(r.path, r.line) for r in refs}
        for path, number, root in self._matches(call, package=package, suffixes=(".py",), limit=limit * 4, needle=short):
            if (str(path), number) in seen or short not in _calls_by_line(path, path.stat().st_mtime_ns, root).get(number, ()):
                continue  # a mention in a docstring, comment or string, or the definition itself
            refs.append(self._ref("call", path, number, function=enclosing_function(path, number, root), target=short))
            if len(refs) >= limit:
                break
        return refs[:limit]

    def callees(self, name: str) -> list[CodeRef]:
        """What the definition of ``name`` calls and launches, in source order (builtins, ``tl.*``
        and ``torch.*`` calls left out); for a C++ function, the kernels it launches."""
        definition = self._definition(_checked_name(name))
        if definition is None:
            launches = self._launches_from(name)
            if launches:
                return launches  # a C++ function that launches kernels: the index knows what it launches
            raise NotFoundError(f"no indexed kernel or Python function is named {name!r}; try 'apex source find' or 'apex source grep'")
        path = definition.path
        if path.suffix != ".py":
            return self._launches_from(definition.qualified_name)
        located = self._locate(path)
        node = _function_node(path, definition.line, located[0]) if located else None
        if node is None:
            return []
        refs: list[CodeRef] = []
        local = _local_names(node)
        body_calls = (n for statement in node.body for n in ast.walk(statement) if isinstance(n, ast.Call))  # not decorators
        for call in sorted(body_calls, key=lambda n: (n.lineno, n.col_offset)):
            launch = isinstance(call.func, ast.Subscript)
            target = dotted_name(call.func.value if launch else call.func)  # type: ignore[union-attr]
            if not target or target in NOISE_CALLS or target.startswith(NOISE_PREFIXES):
                continue
            if "." in target and target.split(".", 1)[0] in local:
                continue  # a method of an argument or a local value (a.numel()): not code to read
            is_kernel = bool(self.index.kernels_named(target.rsplit(".", 1)[-1]))
            refs.append(self._ref("launch" if launch else "call", path, call.lineno, function=definition.qualified_name,
                                  target=target, target_is_kernel=is_kernel))
        return refs

    def _launches_from(self, function: str) -> list[CodeRef]:
        """The kernel launches the index recorded inside the C++ function ``function``."""
        return [self._ref("launch", Path(s.path), s.line, function=s.launcher, target=s.kernel,
                          target_is_kernel=bool(self.index.kernels_named(s.kernel)))
                for p in self.index.packages for f in p.files.values() for s in f.launches if s.launcher == function]

    # --- searching ----------------------------------------------------------------------------

    def grep(self, pattern: str, *, package: str | None = None, path_glob: str | None = None, ignore_case: bool = False,
             limit: int = 100) -> GrepResult:
        """Lines matching a regular expression in the indexed trees, in package and path order."""
        if not pattern:
            raise ApexUserError("give a regular expression to search for, e.g. 'tl\\.dot\\(' or '__launch_bounds__'")
        if not 1 <= limit <= 1000:
            raise ApexUserError(f"limit {limit}: give 1 to 1000 matches")
        flags = re.IGNORECASE if ignore_case else 0
        try:
            re.compile(pattern, flags)
        except re.error as error:
            raise ApexUserError(f"{pattern!r} is not a valid regular expression ({error}); escape special characters, "
                                "e.g. 'tl\\.dot\\('") from None
        trees: dict[str, list[str]] = {}
        for path, root in self._files(package, path_glob):
            trees.setdefault(root, []).append(str(path))
        found = search_in_child(pattern, flags, list(trees.items()), limit=limit + 1, timeout_s=self.grep_timeout_s)
        hits = [self._ref("match", Path(path), number) for path, number in found.matches[:limit]]
        return GrepResult(pattern=pattern, hits=hits, files_searched=found.files_searched, truncated=len(found.matches) > limit)

    # --- helpers ------------------------------------------------------------------------------

    def _packages(self, package: str | None) -> list[PackageIndex]:
        if package is None:
            return self.index.packages
        chosen = [p for p in self.index.packages if p.package == package]
        if not chosen:
            raise ApexUserError(f"package {package!r} is not indexed here; the indexed ones are {self._indexed_names()}")
        return chosen

    def _files(self, package: str | None = None, path_glob: str | None = None,
               suffixes: tuple[str, ...] | None = None) -> Iterator[tuple[Path, str]]:
        """(path, real root of its tree) of each indexed file to search, in package and path order."""
        chosen = self._packages(package)
        for root, indexed in self._roots:
            if not any(indexed is c for c in chosen):
                continue
            given = Path(indexed.root)
            folder = given.is_dir()  # else a one-module distribution: the root is the file
            for relative in sorted(indexed.files):
                if suffixes and not relative.endswith(suffixes):
                    continue
                if path_glob and not fnmatch.fnmatch(relative, path_glob):
                    continue
                yield (given / relative if folder else given), str(root)

    def _matches(self, regex: re.Pattern[str], *, package: str | None = None, suffixes: tuple[str, ...] | None = None,
                 limit: int = 100, needle: str | None = None) -> Iterator[tuple[Path, int, str]]:
        """(path, line number, real root) of each line the explorer's own ``regex`` matches (an
        escaped name: it cannot backtrack badly, so it runs in process), at most ``limit``."""
        files = [(str(path), root) for path, root in self._files(package, suffixes=suffixes)]
        roots = dict(files)
        for path, number in scan_files(regex, files, limit=limit, needle=needle):
            yield Path(path), number, roots[path]

    def _ref(self, kind: RefKind, path: Path, line: int, *, function: str | None = None, target: str | None = None,
             target_is_kernel: bool = False) -> CodeRef:
        located = self._locate(path)
        package = located[1] if located else None
        lines = _read_lines(path, located[0]) if located else ()
        text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        return CodeRef(kind=kind, path=str(path), line=line, package=package.package if package else "",
                       version=package.version if package else "", function=function, target=target,
                       target_is_kernel=target_is_kernel, text=text[:LINE_TEXT_LIMIT])

    def _definition(self, name: str) -> Definition | None:
        """A kernel by its name, else a Python function by dotted or bare name."""
        kernels = self.find(name)
        if kernels:
            kernel = kernels[0]
            return Definition(Path(kernel.path), kernel.line, max(kernel.end_line, kernel.line), kernel.qualified_name)
        for path, line, qualified in self._python_definitions(name):
            return Definition(path, line, line, qualified)  # a Python definition's end comes from its syntax tree
        return None

    def _definition_span(self, definition: Definition) -> tuple[int, int]:
        """A definition's lines: decorators included for Python, the template and qualifier lines
        above the name for C++ (the index records a C++ kernel at its name's line)."""
        path, line = definition.path, definition.line
        located = self._locate(path)
        if located is None:
            raise ApexUserError(f"{path} is outside the indexed sources ({self._indexed_names()}); give a path from "
                                "find, grep or a launch site")
        root = located[0]
        if path.suffix == ".py":
            for first, last, def_line in _python_spans(path, path.stat().st_mtime_ns, root).values():
                if def_line == line:
                    return first, last
            return line, definition.end_line
        lines = _read_lines(path, root)
        start = line
        while start > 1 and line - start < 8 and CPP_PREFIX.match(lines[start - 2]):
            start -= 1
        return start, definition.end_line

    def _python_definitions(self, name: str):
        """(path, line, qualified name) of Python functions named ``name`` (dotted: that one)."""
        if "::" in name or not name.replace(".", "").replace("_", "").isalnum():
            return  # a C++ name or not a Python identifier at all
        parts = name.split(".")
        if len(parts) > 1:
            for indexed in self.index.packages:
                if indexed.package != parts[0] or not Path(indexed.root).is_dir():
                    continue
                for split in range(len(parts) - 1, 0, -1):
                    module = Path(indexed.root, *parts[1:split])
                    for candidate in (module.with_suffix(".py"), module / "__init__.py"):
                        located = self._locate(candidate)
                        if located is not None and candidate.is_file():
                            line = _python_defs(candidate, candidate.stat().st_mtime_ns, located[0]).get(".".join(parts[split:]))
                            if line is not None:
                                yield candidate, line, name
            return
        known = {launcher for symbol in self.index.symbols for launcher in symbol.launchers
                 if "." in launcher and launcher.rsplit(".", 1)[-1] == name}
        for launcher in sorted(known):
            yield from self._python_definitions(launcher)
        definition = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(")
        for path, number, _ in self._matches(definition, suffixes=(".py",), limit=5, needle=name):
            module = self.package_of(path)
            yield path, number, f"{module.package if module else ''}.{name}"


def enclosing_function(path: Path, line: int, root: str | None = None) -> str | None:
    """The qualified name (``Class.method``) of the innermost Python function holding ``line``;
    ``root``, the real root of the file's tree, refuses a file that really lies elsewhere."""
    best: tuple[int, str] | None = None
    root = real_root(path) if root is None else root
    for qualified, (start, end, _) in _python_spans(path, path.stat().st_mtime_ns, root).items():
        if start <= line <= end and (best is None or start > best[0]):
            best = (start, qualified)
    return best[1] if best else None


def _checked_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 2000:
        raise ApexUserError("give a kernel or function name (1 to 2000 characters), e.g. _rms_norm_forward_kernel")
    return name


def _split_location(location: str) -> tuple[Path | None, tuple[int, int | None] | None]:
    """``PATH``, ``PATH:LINE`` or ``PATH:START-END`` to (path, span); (None, None) for a name."""
    match = re.fullmatch(r"(.+?):(\d+)(?:-(\d+))?", location)
    if match and Path(match.group(1)).is_file():
        start = int(match.group(2))
        return Path(match.group(1)), (start, int(match.group(3)) if match.group(3) else None)
    if Path(location).is_file():
        return Path(location), None
    return None, None


CPP_PREFIX = re.compile(r"^\s*(template\b|__global__|__launch_bounds__|C10_LAUNCH_BOUNDS|static\b|extern\b|inline\b|__device__|"
                        r"__host__|void\b|[\w:<>,\s]*>\s*$)")
"""Lines that belong to a C++ kernel's head above its name: template, qualifiers, launch bounds."""


@lru_cache(maxsize=256)
def _cached_lines(path: str, mtime_ns: int, root: str) -> tuple[str, ...]:
    return tuple((read_text_inside(path, root) or "").splitlines())


def _read_lines(path: Path, root: str) -> tuple[str, ...]:
    """The lines of ``path``, read only where it really lies inside ``root`` (a real root)."""
    try:
        return _cached_lines(str(path), path.stat().st_mtime_ns, root)
    except OutsideTreeError:
        raise ApexUserError(f"{path} is outside the indexed sources (a link leads out of its tree); give a path from "
                            "find, grep or a launch site") from None
    except OSError as error:
        raise ApexUserError(f"{path}: cannot read it ({error.strerror})") from None


@lru_cache(maxsize=256)
def _python_tree(path: Path, mtime_ns: int, root: str) -> ast.Module | None:
    try:
        return ast.parse(read_text_inside(path, root) or "")
    except (OSError, SyntaxError, ValueError):
        return None


@lru_cache(maxsize=256)
def _python_spans(path: Path, mtime_ns: int, root: str) -> dict[str, tuple[int, int, int]]:
    """Qualified name (``Class.method``) -> (first line with decorators, last line, ``def`` line)
    of every function and method of a file."""
    tree = _python_tree(path, mtime_ns, root)
    spans: dict[str, tuple[int, int, int]] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualified = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    spans[qualified] = (first, child.end_lineno or child.lineno, child.lineno)
                walk(child, qualified + ".")
            else:
                walk(child, prefix)

    if tree is not None:
        walk(tree, "")
    return spans


def _python_defs(path: Path, mtime_ns: int, root: str) -> dict[str, int]:
    """Qualified name -> the ``def`` line of every function of a file."""
    return {qualified: span[2] for qualified, span in _python_spans(path, mtime_ns, root).items()}


def _function_node(path: Path, line: int, root: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function whose ``def`` is on ``line`` of a Python file."""
    try:
        tree = _python_tree(path, path.stat().st_mtime_ns, root)
    except OSError:
        return None
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == line:
            return node
    return None


def _local_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """A function's parameters and the names it assigns."""
    arguments = node.args
    names = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
    names.update(a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None)
    names.update(n.id for statement in node.body for n in ast.walk(statement)
                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


@lru_cache(maxsize=256)
def _calls_by_line(path: Path, mtime_ns: int, root: str) -> dict[int, frozenset[str]]:
    """Line -> the last component of every name called (or launched) on it, from the syntax tree."""
    tree = _python_tree(path, mtime_ns, root)
    calls: dict[int, set[str]] = {}
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call):
            func = node.func.value if isinstance(node.func, ast.Subscript) else node.func
            name = dotted_name(func).rsplit(".", 1)[-1]
            if name:
                calls.setdefault(node.lineno, set()).add(name)
    return {line: frozenset(names) for line, names in calls.items()}

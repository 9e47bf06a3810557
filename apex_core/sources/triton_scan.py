"""Finding Triton kernels and their launch sites in one Python file, by its syntax tree alone.

Nothing is imported: a package's modules may need a GPU, a newer torch or optional backends just
to import (Liger prints errors for backends it cannot load), and a scan must not run their code.
A function is a kernel when one of its decorators is Triton's ``jit`` or ``autotune`` (written
``triton.jit``, ``triton.autotune(...)``, or a bare ``jit`` imported from a triton module); a
launch site is a call of the form ``name[grid](...)`` whose ``name`` is a kernel of the package.
Files that mention neither "triton", "jit" nor ``](`` can hold neither and are not parsed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

KERNEL_DECORATORS = frozenset({"jit", "autotune"})
"""Decorators that make a Triton kernel (``heuristics`` only ever stacks on one of these)."""

ARGUMENT_TEXT_LIMIT = 300


@dataclass
class FoundKernel:
    name: str
    line: int
    end_line: int
    decorators: tuple[str, ...]


@dataclass
class FoundLaunch:
    kernel: str
    launcher: str
    line: int
    arguments: str


@dataclass
class FileScan:
    """What one file holds: kernels defined in it and kernel launches made from it."""

    kernels: list[FoundKernel] = field(default_factory=list)
    launches: list[FoundLaunch] = field(default_factory=list)


def might_define_triton_kernels(text: str) -> bool:
    """Whether a file can define a Triton kernel: its decorator is imported from triton (or, in
    triton's own files, a relative ``jit``), so the text names one or the other."""
    return "triton" in text or "jit" in text


def might_hold_triton(text: str) -> bool:
    """The cheap test that spares parsing most files of a large package (torch has thousands).

    A file may launch a kernel it imported without naming triton itself, hence the ``](`` test.
    """
    return "triton" in text or "jit" in text or "](" in text


def dotted_name(node: ast.expr) -> str:
    """``triton.jit`` for an Attribute chain, ``jit`` for a Name, '' for anything else."""
    if isinstance(node, ast.Call):
        return dotted_name(node.func)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def _names_imported_from_triton(tree: ast.Module) -> dict[str, str]:
    """Local name -> imported name, for ``from <triton module> import jit [as alias]``.

    Triton's own files import it relatively (``from ..runtime.jit import jit``), so a relative
    import from a ``runtime`` or ``jit`` module counts too.
    """
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        parts = (node.module or "").split(".")
        absolute_triton = node.level == 0 and parts[0] == "triton"
        relative_runtime = node.level > 0 and bool({"runtime", "jit"} & set(parts))
        if absolute_triton or relative_runtime:
            names.update({alias.asname or alias.name: alias.name for alias in node.names})
    return names


def _is_kernel_decorator(decorator: str, from_triton: dict[str, str]) -> bool:
    parts = decorator.split(".")
    if len(parts) == 1:
        return from_triton.get(parts[0]) in KERNEL_DECORATORS
    return parts[-1] in KERNEL_DECORATORS and any("triton" in part for part in parts[:-1])


class _LaunchFinder(ast.NodeVisitor):
    """Walks functions (and methods) recording every ``x[grid](...)`` call with its enclosing scope."""

    def __init__(self, module: str) -> None:
        self.scope: list[str] = []
        self.module = module
        self.launches: list[FoundLaunch] = []

    def _visit_scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _visit_scope

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Subscript):
            target = node.func.value
            name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""
            if name and self.scope:
                arguments = ", ".join(ast.unparse(a) for a in [*node.args, *node.keywords])
                if len(arguments) > ARGUMENT_TEXT_LIMIT:
                    arguments = arguments[: ARGUMENT_TEXT_LIMIT - 3] + "..."
                launcher = ".".join([self.module, *self.scope]) if self.module else ".".join(self.scope)
                self.launches.append(FoundLaunch(name, launcher, node.lineno, arguments))
        self.generic_visit(node)


def scan_python_source(source: str, module: str = "") -> FileScan:
    """Kernels and launch candidates of one file; a file that does not parse yields nothing."""
    scan = FileScan()
    if not might_hold_triton(source):
        return scan
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return scan  # e.g. a template or a file for another Python version: not ours to judge
    from_triton = _names_imported_from_triton(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = tuple(dotted_name(d) for d in node.decorator_list)
            if any(_is_kernel_decorator(d, from_triton) for d in decorators):
                scan.kernels.append(FoundKernel(node.name, node.lineno, node.end_lineno or node.lineno, decorators))
    finder = _LaunchFinder(module)
    finder.visit(tree)
    scan.launches = finder.launches
    return scan

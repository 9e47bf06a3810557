"""The docstrings of a Python module as passages, read from its source without importing it.

Importing a kernel package (triton, liger_kernel, fla) can initialise a GPU runtime or fail on a
machine without one; parsing its files with ``ast`` cannot. Each public function, class and method
with a docstring is one passage (cut further when long) that starts with its qualified name and
signature, so a question naming ``tl.dot`` or ``num_warps`` finds it, and keeps the line range of
its definition. The module's own docstring is a passage too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from apex_core.docsearch.chunking import MAX_CHARS, split_lines

_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass(frozen=True)
class DocPassage:
    """One docstring passage: what it documents, its text and the lines of the definition."""

    qualname: str
    text: str
    line_start: int
    line_end: int


def docstring_passages(source: str, module: str, max_chars: int = MAX_CHARS) -> list[DocPassage]:
    """Passages of ``source``, a module named ``module`` (dotted). A file that does not parse has
    none: the corpus is documentation, and a broken file documents nothing."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    passages: list[DocPassage] = []
    doc = ast.get_docstring(tree)
    if doc:
        end = tree.body[0].end_lineno or 1
        passages += _passages(module, f"module {module}", doc, 1, end, max_chars)
    for node, qualname in _public_definitions(tree.body, ""):
        doc = ast.get_docstring(node)
        if doc:
            header = f"{module}.{qualname}{_signature(node)}"
            passages += _passages(qualname, header, doc, node.lineno, node.end_lineno or node.lineno, max_chars)
    return passages


def _public_definitions(body: list[ast.stmt], prefix: str) -> list[tuple[_Definition, str]]:
    """Functions and classes not named with a leading underscore, and the methods of those classes."""
    found: list[tuple[_Definition, str]] = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            qualname = f"{prefix}{node.name}"
            found.append((node, qualname))
            if isinstance(node, ast.ClassDef):
                found += _public_definitions(node.body, f"{qualname}.")
    return found


def _signature(node: _Definition) -> str:
    try:
        if isinstance(node, ast.ClassDef):
            bases = ", ".join(ast.unparse(base) for base in node.bases)
            return f"({bases})" if bases else ""
        return f"({ast.unparse(node.args)})"
    except Exception:  # ast.unparse of an odd node: the name alone still identifies the definition
        return ""


def _passages(qualname: str, header: str, doc: str, line_start: int, line_end: int, max_chars: int) -> list[DocPassage]:
    """The header and the docstring, cut like any text when long, the header repeated on each piece."""
    pieces = split_lines(doc.splitlines(), 1, max(200, max_chars - len(header)))
    return [DocPassage(qualname, f"{header}\n\n{piece.text}", line_start, line_end) for piece in pieces]

"""Finding HIP/CUDA kernels (``__global__`` functions) and their launch sites in one C++ file.

No compiler is needed or run: a file is read by a careful scanner in four steps.

1. **Strip.** Comments, string and character literals (raw strings ``R"x(...)x"`` too) become
   spaces, newlines kept, so every offset and line number stays that of the file. A ``'`` inside
   a number (``1'000``) is a digit separator, not a character literal.
2. **Preprocessor.** Directive lines (with their ``\\`` continuations) are blanked, so a macro
   body's braces do not disturb the structure. Of an ``#if``/``#elif``/``#else`` group every
   branch is kept when each one is brace-balanced on its own (the usual case: two versions of a
   statement); otherwise only the first branch is kept (``#ifdef USE_ROCM`` giving two openings
   of one function), and ``#if 0`` keeps only what follows its ``#else``.
3. **Structure.** Braces are tracked with what opened them: a namespace (``namespace a::b {``,
   anonymous ones as ``(anonymous namespace)``, inline ones too, as mangled names have them), a
   class, ``extern "C" {``, a function body, or anything else. A ``{`` at namespace or class level
   opens a function when the declaration before it has a name followed by a parameter list.
4. **Kernels and launches.** A function definition whose declaration says ``__global__`` and
   ``void`` is a kernel. Launches are ``name<<<grid, block[, shmem[, stream]]>>>(args)`` (with
   template arguments too) and the runtime calls in ``LAUNCH_APIS`` (``hipLaunchKernelGGL``,
   ``cudaLaunchKernel``, ...), found inside function bodies only, so a runtime header's
   declaration of ``cudaLaunchKernel`` is not a launch.

Conventions: a kernel's ``line`` is the line of its **name** (where a reader looks, and what
``path:line`` shows); ``end_line`` is the line of the closing brace of its body. A declaration
without a body (``__global__ void k(float*);``, explicit instantiations) is **skipped**: the index
points at code to read, and the definition is elsewhere. A launch's ``line`` is that of the kernel
name it launches. Known limits: kernels or launches written inside macro definitions (a
``#define`` that stamps out kernels) are not seen, nor are names made by token pasting.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Literal

from apex_core.sources.triton_scan import ARGUMENT_TEXT_LIMIT

CppLanguage = Literal["hip", "cuda"]

_LITERALS = re.compile(
    r"""
      (?P<comment>//(?:[^\n\\]|\\.)*|/\*.*?(?:\*/|\Z))
    | (?P<raw>(?<![\w])(?:u8|u|U|L)?R"(?P<delim>[^()\\\s"]{0,16})\(.*?\)(?P=delim)")
    | (?P<string>(?:(?<![\w])(?:u8|u|U|L))?"(?:[^"\\\n]|\\.)*"?)
    | (?P<char>(?<![\w.'])(?:u8|u|U|L)?'(?:[^'\\\n]|\\.)+')
    """,
    re.S | re.X,
)
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.']*|<<<|>>>|::|->|[^\s\w]")
_DIRECTIVE = re.compile(r"^\s*#\s*(\w*)(.*)$")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)

CONTROL_WORDS = frozenset({"if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "decltype",
                           "static_assert", "noexcept", "throw", "requires", "new", "delete"})
ATTRIBUTE_WORDS = frozenset({"__launch_bounds__", "__attribute__", "__declspec", "alignas", "__align__",
                             "__maxnreg__", "__cluster_dims__"})
"""Names followed by ``(...)`` in a declaration that are not the function's own name."""
NOT_KERNEL_NAMES = frozenset({"void", "const", "volatile", "reinterpret_cast", "static_cast", "const_cast",
                              "HIP_KERNEL_NAME", "HIP_SYMBOL", "auto", "template", "typename"})


@dataclass(frozen=True)
class _ApiLaunch:
    """Where the kernel, the launch configuration and the kernel arguments are in a runtime call."""

    kernel: int
    configuration: tuple[int, ...]
    arguments: tuple[int, ...] = ()
    arguments_from: int | None = None


LAUNCH_APIS: dict[str, _ApiLaunch] = {
    "hipLaunchKernelGGL": _ApiLaunch(0, (1, 2, 3, 4), arguments_from=5),
    "hipExtLaunchKernelGGL": _ApiLaunch(0, (1, 2, 3, 4, 5, 6, 7), arguments_from=8),
    "hipLaunchKernel": _ApiLaunch(0, (1, 2, 4, 5), (3,)),
    "cudaLaunchKernel": _ApiLaunch(0, (1, 2, 4, 5), (3,)),
    "hipLaunchCooperativeKernel": _ApiLaunch(0, (1, 2, 4, 5), (3,)),
    "cudaLaunchCooperativeKernel": _ApiLaunch(0, (1, 2, 4, 5), (3,)),
    "hipLaunchKernelEx": _ApiLaunch(1, (0,), arguments_from=2),
    "cudaLaunchKernelEx": _ApiLaunch(1, (0,), arguments_from=2),
    "cudaLaunchKernelExC": _ApiLaunch(1, (0,), (2,)),
}
"""Runtime calls that launch a kernel, with the positions of their arguments."""


@dataclass
class CppKernel:
    name: str
    namespace: str
    line: int
    end_line: int
    decorators: tuple[str, ...]
    template_parameters: str | None
    parameters: str

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}::{self.name}" if self.namespace else self.name


@dataclass
class CppLaunch:
    kernel: str
    launcher: str
    line: int
    configuration: str
    arguments: str
    via: str = "<<<>>>"


@dataclass
class CppFileScan:
    """What one file holds: its language, the kernels defined in it and the launches made from it."""

    language: CppLanguage
    kernels: list[CppKernel] = field(default_factory=list)
    launches: list[CppLaunch] = field(default_factory=list)


def might_hold_device_code(text: str) -> bool:
    """The cheap test that spares scanning most headers (torch ships about ten thousand)."""
    return "__global__" in text or "<<<" in text or "LaunchKernel" in text


def detect_language(suffix: str, text: str) -> CppLanguage:
    """``hip`` for .hip files and files that include HIP headers, ``cuda`` for .cu/.cuh, else by
    what the file includes or calls."""
    if suffix == ".hip":
        return "hip"
    includes = _INCLUDE.findall(text)
    if any(name.startswith(("hip/", "hipcub/", "rocprim/", "hipblas", "rocwmma/")) or "hip_runtime" in name for name in includes):
        return "hip"
    if suffix in (".cu", ".cuh"):
        return "cuda"
    if any(name.startswith(("cuda", "cub/", "cutlass/", "cute/")) for name in includes):
        return "cuda"
    return "hip" if "hipLaunchKernelGGL" in text or "hipStream_t" in text else "cuda"


def strip_code(text: str) -> str:
    """``text`` with comments and literals blanked (newlines kept): same length, same lines."""
    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group())

    return _LITERALS.sub(blank, text)


def _blank_preprocessor(code: str) -> str:
    """Directives blanked and the branches of conditionals that would unbalance braces dropped."""
    lines = code.split("\n")
    net = [line.count("{") - line.count("}") for line in lines]
    keep = [True] * len(lines)
    groups: list[list[tuple[bool, list[int]]]] = []  # open groups: branches of (dead, kept line indices)
    kept_lines: list[int] = []  # lines outside any conditional

    def current() -> list[int]:
        return groups[-1][-1][1] if groups else kept_lines

    index = 0
    while index < len(lines):
        match = _DIRECTIVE.match(lines[index])
        if match is None:
            current().append(index)
            index += 1
            continue
        start = index
        while lines[index].rstrip().endswith("\\") and index + 1 < len(lines):
            index += 1
        for blanked in range(start, index + 1):
            keep[blanked] = False
        word, rest = match.group(1), match.group(2).strip()
        if word in ("if", "ifdef", "ifndef"):
            groups.append([(word == "if" and rest in ("0", "false"), [])])
        elif word in ("elif", "elifdef", "elifndef", "else") and groups:
            groups[-1].append((False, []))
        elif word == "endif" and groups:
            survivors = _resolve(groups.pop(), net, keep)
            current().extend(survivors)
        index += 1
    while groups:
        survivors = _resolve(groups.pop(), net, keep)
        current().extend(survivors)
    return "\n".join(line if keep[i] else " " * len(line) for i, line in enumerate(lines))


def _resolve(branches: list[tuple[bool, list[int]]], net: list[int], keep: list[bool]) -> list[int]:
    """The kept lines of one conditional group; the others are marked dropped in ``keep``."""
    live = [lines for dead, lines in branches if not dead]
    if branches[0][0]:
        chosen = live if all(sum(net[i] for i in lines) == 0 for lines in live) else live[:1]
    elif all(sum(net[i] for i in lines) == 0 for _, lines in branches):
        chosen = live
    else:
        chosen = [branches[0][1]]
    survivors = [i for lines in chosen for i in lines]
    kept = set(survivors)
    for _, lines in branches:
        for i in lines:
            if i not in kept:
                keep[i] = False
    return survivors


@dataclass
class _Scope:
    kind: Literal["namespace", "class", "linkage", "function", "block", "init"]
    name: str = ""
    kernel: CppKernel | None = None


def _shorten(text: str, limit: int = ARGUMENT_TEXT_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_NAME = re.compile(r"[A-Za-z_]\w*")


def _is_name(token: str) -> bool:
    return _NAME.fullmatch(token) is not None


class _Scanner:
    """One pass over a file's tokens with a stack of what each open brace belongs to."""

    def __init__(self, text: str, file_label: str) -> None:
        self.raw = text
        self.code = _blank_preprocessor(strip_code(text))
        found = [(m.group(), m.start()) for m in _TOKEN.finditer(self.code)]
        self.tokens = [t for t, _ in found]
        self.starts = [p for _, p in found]
        self.newlines = [m.start() for m in re.finditer("\n", self.code)]
        self.file_label = file_label
        self.kernels: list[CppKernel] = []
        self.launches: list[CppLaunch] = []
        self.scopes: list[_Scope] = []

    # --- positions, text and brackets -----------------------------------------------------------

    def line(self, token: int) -> int:
        return bisect.bisect_right(self.newlines, self.starts[token]) + 1

    def text(self, first: int, last: int) -> str:
        """The code from token ``first`` through token ``last``, whitespace collapsed."""
        if last < first:
            return ""
        return " ".join(self.code[self.starts[first]: self.starts[last] + len(self.tokens[last])].split())

    def match(self, opening: int, end: int | None = None) -> int | None:
        """The index of the bracket closing the ``(``, ``[`` or ``{`` at ``opening``."""
        close = {"(": ")", "[": "]", "{": "}"}[self.tokens[opening]]
        depth = 0
        for index in range(opening, len(self.tokens) if end is None else end):
            token = self.tokens[index]
            if token == self.tokens[opening]:
                depth += 1
            elif token == close:
                depth -= 1
                if depth == 0:
                    return index
        return None

    def match_angle(self, opening: int, end: int) -> int | None:
        """The ``>`` closing the ``<`` at ``opening`` (parentheses skipped; ``>>>`` closes three)."""
        depth, index = 0, opening
        while index < end:
            token = self.tokens[index]
            if token in ("(", "[", "{"):
                closed = self.match(index, end)
                if closed is None:
                    return None
                index = closed
            elif token == "<":
                depth += 1
            elif token in (">", ">>>"):
                depth -= len(token)
                if depth <= 0:
                    return index
            index += 1
        return None

    def name_before(self, index: int, lower: int = 0) -> tuple[int, int, str] | None:
        """The (qualified) name whose last part ends at token ``index``, template arguments
        dropped: ``ns::k<T, 4>`` ending at the ``>`` gives (first token, last name token, 'ns::k')."""
        last = self._skip_angles_back(index, lower)
        if last is None or last < lower or not _is_name(self.tokens[last]):
            return None
        first, parts = last, [self.tokens[last]]
        while first - 2 >= lower and self.tokens[first - 1] == "::":
            before = self._skip_angles_back(first - 2, lower)
            if before is None or before < lower or not _is_name(self.tokens[before]):
                break
            first = before
            parts.insert(0, self.tokens[before])
        return first, last, "::".join(parts)

    def _skip_angles_back(self, index: int, lower: int) -> int | None:
        """``index`` itself, or for a closing ``>`` the token before its opening ``<``."""
        if index < lower or self.tokens[index] not in (">", ">>>"):
            return index
        depth = 0
        while index >= lower:
            token = self.tokens[index]
            if token in (">", ">>>"):
                depth += len(token)
            elif token == "<":
                depth -= 1
                if depth <= 0:
                    return index - 1
            elif token in (";", "{", "}"):
                return None
            index -= 1
        return None

    # --- the walk -------------------------------------------------------------------------------

    def run(self) -> None:
        statement, parens = 0, 0
        for index, token in enumerate(self.tokens):
            in_code = bool(self.scopes) and self.scopes[-1].kind in ("function", "block", "init")
            if token == "{":
                if in_code or parens:
                    self.scopes.append(_Scope("block" if in_code else "init"))
                else:
                    scope = self._open(statement, index)
                    self.scopes.append(scope)
                    if scope.kind != "init":
                        statement, parens = index + 1, 0
            elif token == "}":
                if self.scopes:
                    scope = self.scopes.pop()
                    if scope.kernel is not None:
                        scope.kernel.end_line = self.line(index)
                        self.kernels.append(scope.kernel)
                    if scope.kind in ("namespace", "class", "linkage", "function"):
                        statement, parens = index + 1, 0
            elif in_code:
                if token == "<<<":
                    self._chevron_launch(index)
                elif token in LAUNCH_APIS and self.tokens[index + 1: index + 2] == ["("]:
                    self._api_launch(index)
            elif token == "(":
                parens += 1
            elif token == ")":
                parens = max(0, parens - 1)
            elif token == ";" and not parens:
                statement = index + 1
            elif token == ":" and index and self.tokens[index - 1] in ("public", "private", "protected"):
                statement = index + 1

    def _path(self) -> list[str]:
        return [s.name for s in self.scopes if s.kind in ("namespace", "class") and s.name]

    def _open(self, start: int, brace: int) -> _Scope:
        """What the ``{`` at ``brace`` opens, judged from the declaration ``start:brace``."""
        tokens = self.tokens
        first, template = start, None
        while first + 1 < brace and tokens[first] == "template" and tokens[first + 1] == "<":
            close = self.match_angle(first + 1, brace)
            if close is None:
                break
            template = self.text(first + 2, close - 1)
            first = close + 1
        words = tokens[first:brace]
        if "namespace" in words[:2]:
            name = "".join(t for t in words[words.index("namespace") + 1:] if t != "inline")
            return _Scope("namespace", name or "(anonymous namespace)")
        if words == ["extern"]:
            return _Scope("linkage")
        if self._assigns(first, brace):
            return _Scope("init")  # an initializer: int table[] = {...}, auto f = [](...) {...}
        keyword = next((t for t in words if t in ("class", "struct", "union", "enum")), None)
        if keyword is not None and "(" not in words[: words.index(keyword)]:
            return _Scope("init") if keyword == "enum" else _Scope("class", _class_name(words[words.index(keyword) + 1:]))
        found = self._function_name(first, brace)
        if found is None:
            return _Scope("init")
        name_start, name_end, name, opening, closing = found
        before_brace = tokens[brace - 1]
        if tokens[closing + 1: closing + 2] == [":"] and (before_brace in (">", ">>>") or _is_name(before_brace)):
            return _Scope("init")  # a member's brace initializer in a constructor's initializer list
        scope = _Scope("function", "::".join([*self._path(), name]))
        declaration = tokens[first:name_start]
        if "__global__" in declaration and "void" in declaration:
            *qualifiers, short = name.split("::")
            scope.kernel = CppKernel(
                name=short, namespace="::".join([*self._path(), *qualifiers]), line=self.line(name_end), end_line=0,
                decorators=self._decorators(first, name_start), template_parameters=template,
                parameters=_shorten(self.text(opening + 1, closing - 1)),
            )
        return scope

    def _assigns(self, first: int, end: int) -> bool:
        """Whether the declaration has an ``=`` outside parentheses (not ``==``, ``<=``, ``operator=``)."""
        depth = 0
        for index in range(first, end):
            token = self.tokens[index]
            depth += token in ("(", "[")
            depth -= token in (")", "]")
            if token == "=" and depth == 0:
                neighbours = (self.tokens[index - 1] if index > first else "", self.tokens[index + 1] if index + 1 < end else "")
                if neighbours[0] not in ("operator", "=", "!", "<", ">") and neighbours[1] != "=":
                    return True
        return False

    def _function_name(self, first: int, end: int) -> tuple[int, int, str, int, int] | None:
        """(first and last token of the name, the name, its ``(`` and ``)``) of the function
        declared in ``first:end``. Attribute macros (``__launch_bounds__(256)``,
        ``C10_LAUNCH_BOUNDS_1(n)``) are passed over when a real name follows."""
        tokens = self.tokens
        candidates: list[tuple[int, int, str, int, int]] = []
        index = first
        while index < end:
            if tokens[index] != "(":
                index += 1
                continue
            closing = self.match(index, end)
            if closing is None:
                return None
            before = tokens[index - 1] if index > first else ""
            if before == "operator" and closing == index + 1:
                index = closing + 1  # the parentheses of the name operator()
                continue
            if before == ")" and index - 3 >= first and tokens[index - 3] == "operator":
                named = (index - 3, index - 1, "operator()")
                found = self.name_before(index - 4, first) if index - 4 >= first and tokens[index - 4] == "::" else None
            elif index - 2 >= first and tokens[index - 2] == "operator":
                named = (index - 2, index - 1, "operator" + before)
                found = None
            elif before and before not in CONTROL_WORDS:
                found = self.name_before(index - 1, first)
                named = None
            else:
                index = closing + 1
                continue
            if named is not None:
                start, _, name = named
                if found is None and start - 2 >= first and tokens[start - 1] == "::":
                    found = self.name_before(start - 2, first)
                if found is not None:
                    start, name = found[0], f"{found[2]}::{name}"
                candidates.append((start, named[1], name, index, closing))
            elif found is not None:
                start, last, name = found
                if start - 1 >= first and tokens[start - 1] == "~":
                    *qualifiers, short = name.split("::")
                    start, name = start - 1, "::".join([*qualifiers, "~" + short])
                candidates.append((start, last, name, index, closing))
            index = closing + 1
        plain = [c for c in candidates if not _attribute_like(c[2])]
        if plain:
            return plain[0]
        macros = [c for c in candidates if c[2] not in ATTRIBUTE_WORDS]
        return macros[-1] if macros else None  # TORCH_LIBRARY_IMPL(...) { ... }: a macro that defines a function

    def _decorators(self, first: int, name_start: int) -> tuple[str, ...]:
        """Qualifiers and attributes before a kernel's name (``__global__``, ``static``,
        ``extern "C"``, ``__launch_bounds__(256)``), the return type ``void`` left out."""
        found: list[str] = []
        index = first
        while index < name_start:
            token = self.tokens[index]
            if token == "(":
                closing = self.match(index, name_start)
                if closing is None:
                    break
                if found and index > first and found[-1].endswith(self.tokens[index - 1]):
                    found[-1] += self.text(index, closing)
                index = closing + 1
                continue
            if _is_name(token) and token not in ("void", "typename"):
                following = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.raw)
                found.append('extern "C"' if token == "extern" and '"C"' in self.raw[self.starts[index]:following] else token)
            index += 1
        return tuple(found)

    # --- launches -------------------------------------------------------------------------------

    def _launcher(self) -> str:
        for scope in reversed(self.scopes):
            if scope.kind == "function":
                return scope.name
        return "::".join(self._path()) or self.file_label

    def _chevron_launch(self, chevron: int) -> None:
        """``name<<<config>>>(args)``, ``ns::name<T, 4><<<...>>>(...)``."""
        tokens = self.tokens
        if chevron == 0:
            return
        named = self.name_before(chevron - 1)
        if named is None:
            return
        end, depth = chevron + 1, 0
        while end < len(tokens) and not (tokens[end] == ">>>" and depth == 0):
            depth += tokens[end] in ("(", "[", "{")
            depth -= tokens[end] in (")", "]", "}")
            if depth < 0 or tokens[end] == ";":
                return
            end += 1
        if end + 1 >= len(tokens) or tokens[end + 1] != "(":
            return
        closing = self.match(end + 1)
        if closing is None:
            return
        self.launches.append(CppLaunch(
            kernel=named[2].rsplit("::", 1)[-1], launcher=self._launcher(), line=self.line(named[1]),
            configuration=_shorten(self.text(chevron + 1, end - 1)), arguments=_shorten(self.text(end + 2, closing - 1)),
        ))

    def _api_launch(self, call: int) -> None:
        """``hipLaunchKernelGGL(k, grid, block, shmem, stream, args...)`` and the other ``LAUNCH_APIS``."""
        closing = self.match(call + 1)
        if closing is None:
            return
        arguments = self._split(call + 2, closing)
        spec = LAUNCH_APIS[self.tokens[call]]
        if spec.kernel == 0:  # a bare k<T, 4> as the first argument: its commas are not separators
            while len(arguments) > 1 and self._angle_balance(*arguments[0]) > 0:
                arguments[0:2] = [(arguments[0][0], arguments[1][1])]
        if spec.kernel >= len(arguments):
            return
        kernel = self._kernel_in(*arguments[spec.kernel])
        if kernel is None:
            return
        picked = [i for i in spec.arguments if i < len(arguments)]
        if spec.arguments_from is not None:
            picked += list(range(spec.arguments_from, len(arguments)))
        configuration = ", ".join(self.text(*arguments[i]) for i in spec.configuration if i < len(arguments))
        self.launches.append(CppLaunch(
            kernel=kernel, launcher=self._launcher(), line=self.line(arguments[spec.kernel][0]),
            configuration=_shorten(configuration), arguments=_shorten(", ".join(self.text(*arguments[i]) for i in picked)),
            via=self.tokens[call],
        ))

    def _split(self, first: int, end: int) -> list[tuple[int, int]]:
        """(first, last) token of each top-level comma-separated argument in ``first:end``."""
        parts: list[tuple[int, int]] = []
        start, depth = first, 0
        for index in range(first, end):
            token = self.tokens[index]
            depth += token in ("(", "[", "{")
            depth -= token in (")", "]", "}")
            if token == "," and depth == 0:
                parts.append((start, index - 1))
                start = index + 1
        if start < end:
            parts.append((start, end - 1))
        return parts

    def _angle_balance(self, first: int, last: int) -> int:
        return sum((t == "<") - (t == ">") - 3 * (t == ">>>") for t in self.tokens[first: last + 1])

    def _kernel_in(self, first: int, last: int) -> str | None:
        """The kernel an argument names: ``k``, ``(k<T>)``, ``(void*)ns::k``, ``HIP_KERNEL_NAME(k<T>)``,
        ``reinterpret_cast<const void*>(&k<T>)``: the last name outside template arguments."""
        names: list[str] = []
        depth = 0
        for index in range(first, last + 1):
            token = self.tokens[index]
            if token == "<" and index > first and _is_name(self.tokens[index - 1]):
                depth += 1
            elif token in (">", ">>>") and depth:
                depth = max(0, depth - len(token))
            elif depth == 0 and _is_name(token) and token not in NOT_KERNEL_NAMES:
                names.append(token)
        return names[-1] if names else None


def _attribute_like(name: str) -> bool:
    """``__launch_bounds__``, ``alignas``, or an all-capitals macro such as ``C10_LAUNCH_BOUNDS_1``."""
    return name in ATTRIBUTE_WORDS or bool(re.fullmatch(r"[A-Z][A-Z0-9_]*", name) and "_" in name)


def _class_name(words: list[str]) -> str:
    """The name a class head declares: the last plain name before its base list, outside ``<...>``."""
    name, depth = "", 0
    for index, token in enumerate(words):
        if token == ":" or (token == "{" and depth == 0):
            break
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif token == "<":
            depth += 1
        elif token in (">", ">>>"):
            depth = max(0, depth - len(token))
        elif depth == 0 and _is_name(token) and token not in ("final", "alignas") and not _attribute_like(token):
            name = token
    return name


def scan_cpp_source(text: str, suffix: str = ".cu", file_label: str = "") -> CppFileScan:
    """Kernels and launches of one C++ file; a file that cannot hold device code yields nothing.

    ``suffix`` (``.hip``, ``.cu``, ...) decides the language with the includes; ``file_label``
    names the launcher of a launch made outside any function (a lambda at namespace scope).
    """
    scan = CppFileScan(language=detect_language(suffix, text))
    if not might_hold_device_code(text):
        return scan
    scanner = _Scanner(text, file_label)
    scanner.run()
    scan.kernels = sorted(scanner.kernels, key=lambda k: k.line)
    scan.launches = scanner.launches
    return scan

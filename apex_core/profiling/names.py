"""Kernel names: demangling C++ symbols and reducing a kernel name to the function it runs.

Profilers report a GPU kernel by its symbol. NVIDIA's tools and torch.profiler usually demangle
it already (``void cutlass::Kernel2<...>(...::Params)``), but some outputs keep the Itanium
mangling (``_ZN7cutlass7Kernel2I...EEvNT_6ParamsE``: ncu with ``--print-kernel-base mangled``,
rocprofv3 with ``--mangled-kernels``, AMD code-object symbols ending in ``.kd``). The profiler's
kernel table and the identifier both need the readable name and the bare function name, so the
rules live here once.

Demangling uses ``c++filt`` (binutils) when it is on PATH: it knows the whole grammar. Without it,
a small fallback demangles the plain subset (nested names, builtin, pointer, reference, const and
class parameter types, substitutions); anything else (templates, function pointers, ...) is left
mangled rather than guessed, so a name is never demangled wrongly, only sometimes not at all.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Iterable

_CXXFILT_TIMEOUT_S = 10.0


def strip_symbol_suffix(name: str) -> str:
    """An AMD code-object kernel symbol without its ``.kd`` (kernel descriptor) suffix."""
    return name[:-3] if name.endswith(".kd") else name


def is_mangled(name: str) -> bool:
    """Whether ``name`` looks like an Itanium-mangled C++ symbol (``_Z...``)."""
    return strip_symbol_suffix(name.strip()).startswith("_Z")


@functools.lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """The readable form of one kernel name; names that are not mangled come back unchanged."""
    return demangle_many([name])[name]


def demangle_many(names: Iterable[str]) -> dict[str, str]:
    """Readable forms of many names, with one ``c++filt`` process for all of them."""
    names = list(dict.fromkeys(names))
    result = {name: name for name in names}
    mangled = [name for name in names if is_mangled(name)]
    if not mangled:
        return result
    symbols = [strip_symbol_suffix(name.strip()) for name in mangled]
    for name, symbol, text in zip(mangled, symbols, _cxxfilt(symbols), strict=True):
        if text is None or text == symbol:
            text = fallback_demangle(symbol)
        result[name] = text if text is not None else name
    return result


def _cxxfilt(symbols: list[str]) -> list[str | None]:
    """``c++filt`` on each symbol, or all None when it is missing or fails."""
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt")
    if tool is None:
        return [None] * len(symbols)
    try:
        completed = subprocess.run(
            [tool], input="\n".join(symbols) + "\n", capture_output=True, text=True, timeout=_CXXFILT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return [None] * len(symbols)
    lines = completed.stdout.splitlines()
    if completed.returncode != 0 or len(lines) != len(symbols):
        return [None] * len(symbols)
    return list(lines)


def base_name(name: str) -> str:
    """The qualified function a kernel runs, without return type, template arguments or parameters.

    ``void cutlass::Kernel2<cutlass_80_...>(...::Params)`` -> ``cutlass::Kernel2``;
    ``_ZN2at6native29vectorized_elementwise_kernel...`` -> ``at::native::vectorized_elementwise_kernel``;
    a Triton kernel (``_rms_norm_forward_kernel``) is already bare and comes back as it is.
    """
    text = demangle(name) if is_mangled(name) else name.strip()
    text = text.replace("(anonymous namespace)", "{anon}")
    text = _strip_trailing_group(text, "(", ")")
    text = strip_balanced(text, "<", ">")
    # The return type, if any, is separated from the name by a space at depth 0.
    text = text.strip().split(" ")[-1] if " " in text.strip() else text.strip()
    return text.replace("{anon}", "(anonymous namespace)")


def _strip_trailing_group(text: str, opening: str, closing: str) -> str:
    """``text`` without its final balanced ``(...)`` group (a parameter list), if it ends in one."""
    text = text.rstrip()
    if not text.endswith(closing):
        return text
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        if text[index] == closing:
            depth += 1
        elif text[index] == opening:
            depth -= 1
            if depth == 0:
                return text[:index]
    return text


def strip_balanced(text: str, opening: str, closing: str) -> str:
    """``text`` without any ``<...>`` groups (``operator<`` and friends are kept as they are)."""
    if re.search(r"operator\s*[<>]", text):
        return text
    out: list[str] = []
    depth = 0
    for char in text:
        if char == opening:
            depth += 1
        elif char == closing and depth:
            depth -= 1
        elif depth == 0:
            out.append(char)
    return "".join(out)


# --- fallback demangler: the plain subset of the Itanium C++ ABI -------------------------------

_BUILTINS = {
    "v": "void", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char", "s": "short",
    "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long", "m": "unsigned long",
    "x": "long long", "y": "unsigned long long", "n": "__int128", "o": "unsigned __int128",
    "f": "float", "d": "double", "e": "long double", "w": "wchar_t", "z": "...",
}


class _Unsupported(Exception):
    """The symbol uses grammar the fallback does not know; the caller keeps it mangled."""


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.substitutions: list[str] = []

    def peek(self, count: int = 1) -> str:
        return self.text[self.pos:self.pos + count]

    def take(self, count: int = 1) -> str:
        chunk = self.text[self.pos:self.pos + count]
        if len(chunk) < count:
            raise _Unsupported("truncated")
        self.pos += count
        return chunk

    def source_name(self) -> str:
        digits = re.match(r"\d+", self.text[self.pos:])
        if not digits:
            raise _Unsupported("expected a length")
        self.pos += len(digits.group())
        identifier = self.take(int(digits.group()))
        return "(anonymous namespace)" if identifier.startswith("_GLOBAL__N") else identifier

    def nested_name(self, is_type: bool) -> str:
        """``N [K] <source-name>+ E``; prefixes (and, for a type, the whole name) are substitutable."""
        self.take()  # N
        if self.peek() in ("K", "V", "r"):
            raise _Unsupported("cv-qualified member function")
        parts: list[str] = []
        while self.peek() != "E":
            if self.peek() == "S":
                parts = [self.substitution()]
            else:
                parts.append(self.source_name())
            if self.peek() == "I":
                raise _Unsupported("template arguments")
            if self.peek() != "E" or is_type:
                self.substitutions.append("::".join(parts))
        self.take()  # E
        if not parts:
            raise _Unsupported("empty nested name")
        return "::".join(parts)

    def substitution(self) -> str:
        self.take()  # S
        if self.peek() == "_":
            self.take()
            index = 0
        else:
            seq = re.match(r"[0-9A-Z]+", self.text[self.pos:])
            if not seq or seq.group() in ("t", "a", "s"):
                raise _Unsupported("std abbreviation")
            self.pos += len(seq.group())
            if self.take() != "_":
                raise _Unsupported("bad substitution")
            index = int(seq.group(), 36) + 1
        if index >= len(self.substitutions):
            raise _Unsupported("substitution out of range")
        return self.substitutions[index]

    def type(self) -> str:
        code = self.peek()
        if code in _BUILTINS:
            self.take()
            return _BUILTINS[code]
        if code in ("P", "R", "O", "K", "V"):
            self.take()
            inner = self.type()
            text = {"P": f"{inner}*", "R": f"{inner}&", "O": f"{inner}&&", "K": f"{inner} const", "V": f"{inner} volatile"}[code]
            self.substitutions.append(text)
            return text
        if code == "N":
            return self.nested_name(is_type=True)
        if code == "S":
            return self.substitution()
        if code.isdigit():
            name = self.source_name()
            self.substitutions.append(name)
            return name
        raise _Unsupported(f"type code {code!r}")


def fallback_demangle(symbol: str) -> str | None:
    """``symbol`` demangled by the built-in subset, or None when it needs more of the grammar."""
    if not symbol.startswith("_Z"):
        return None
    parser = _Parser(symbol[2:])
    try:
        if parser.peek() == "N":
            name = parser.nested_name(is_type=False)
        else:
            name = parser.source_name()
            if parser.peek() == "I":
                raise _Unsupported("template arguments")
        if parser.pos == len(parser.text):
            return name  # a variable or a name without a signature
        params = []
        while parser.pos < len(parser.text):
            params.append(parser.type())
    except _Unsupported:
        return None
    if params == ["void"]:
        params = []
    return f"{name}({', '.join(params)})"


@functools.lru_cache(maxsize=4096)
def cached_base_name(name: str) -> str:
    """:func:`base_name` with a cache, for tables that name the same kernel many times."""
    return base_name(name)

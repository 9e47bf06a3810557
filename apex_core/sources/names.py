"""From the name a profiler shows to the name a kernel has in source.

Profilers show Triton kernels under their Python function name, sometimes with a suffix (older
Triton appended a specialization signature such as ``_0d1d2de``; some tools add ``_<n>`` per
compiled variant). C++ kernels from CUDA/HIP libraries arrive mangled (``_Z...``) or demangled
with namespaces, template arguments and parameters (``void at::native::foo<float>(int, ...)``).
``kernel_name_candidates`` lists the names worth looking up, most specific first.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import lru_cache

_TRITON_SIGNATURE_SUFFIX = re.compile(r"_(?:\d+[a-z]*)+$")
"""Older Triton's specialization suffix: ``_0d1d2d3de``, ``_0d1d2c3d``."""
_VARIANT_SUFFIX = re.compile(r"_\d+$")


@lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """``name`` demangled by c++filt when it is an Itanium-mangled name and c++filt is on PATH."""
    if not name.startswith("_Z"):
        return name
    tool = shutil.which("c++filt")
    if tool is None:
        return name
    try:
        result = subprocess.run([tool, name], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return name
    demangled = result.stdout.strip()
    return demangled or name


def strip_balanced(text: str, opening: str, closing: str) -> str:
    """``text`` without any ``opening ... closing`` groups (nested ones included)."""
    depth = 0
    kept: list[str] = []
    for char in text:
        if char == opening:
            depth += 1
        elif char == closing and depth:
            depth -= 1
        elif depth == 0:
            kept.append(char)
    return "".join(kept)


def function_base_name(name: str) -> str:
    """The unqualified function name of a (demangled) C++ signature; a plain name unchanged.

    ``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` gives
    ``vectorized_elementwise_kernel``. Anonymous-namespace and lambda parts are left as they are.
    """
    text = name.strip()
    if "(" not in text and "<" not in text and "::" not in text:
        return text
    text = strip_balanced(strip_balanced(text, "(", ")"), "<", ">").strip()
    text = text.rsplit(" ", 1)[-1]  # drop the return type
    return text.rsplit("::", 1)[-1] or name


def kernel_name_candidates(name: str) -> list[str]:
    """Names to try in the index for one profiler name, most specific first, without repeats."""
    candidates = [name.strip(), function_base_name(name)]
    for base in list(candidates):
        stripped = _TRITON_SIGNATURE_SUFFIX.sub("", base)
        candidates.append(stripped)
        candidates.append(_VARIANT_SUFFIX.sub("", stripped))
    return [c for c in dict.fromkeys(candidates) if c]

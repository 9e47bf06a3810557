"""From the name a profiler shows to the name a kernel has in source.

Profilers show Triton kernels under their Python function name, sometimes with a suffix (older
Triton appended a specialization signature such as ``_0d1d2de``; some tools add ``_<n>`` per
compiled variant). C++ kernels from CUDA/HIP libraries arrive mangled (``_Z...``) or demangled
with namespaces, template arguments and parameters (``void at::native::foo<float>(int, ...)``).
``kernel_name_candidates`` lists the names worth looking up, most specific first. Demangling and
C++ signatures are read by ``apex_core.profiling.names``, the one place that knows them.
"""

from __future__ import annotations

import re

from apex_core.profiling.names import base_name, demangle

__all__ = ["demangle", "function_base_name", "kernel_name_candidates", "qualified_function_name"]

_TRITON_SIGNATURE_SUFFIX = re.compile(r"_(?:\d+[a-z]*)+$")
"""Older Triton's specialization suffix: ``_0d1d2d3de``, ``_0d1d2c3d``."""
_VARIANT_SUFFIX = re.compile(r"_\d+$")


def function_base_name(name: str) -> str:
    """The unqualified function name of a (demangled) C++ signature; a plain name unchanged.

    ``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` gives
    ``vectorized_elementwise_kernel``.
    """
    return base_name(name).rsplit("::", 1)[-1] or name


def qualified_function_name(name: str) -> str:
    """The namespace-qualified function of a (demangled) C++ signature, e.g.
    ``at::native::vectorized_elementwise_kernel``; a plain name unchanged."""
    return base_name(name) or name


def kernel_name_candidates(name: str) -> list[str]:
    """Names to try in the index for one profiler name, most specific first, without repeats."""
    candidates = [name.strip(), function_base_name(name)]
    for base in list(candidates):
        stripped = _TRITON_SIGNATURE_SUFFIX.sub("", base)
        candidates.append(stripped)
        candidates.append(_VARIANT_SUFFIX.sub("", stripped))
    return [c for c in dict.fromkeys(candidates) if c]

"""The source index: where each kernel of the installed inference stack is defined and launched.

The one place that knows where a kernel's source is (docs/identify.md): Triton kernels of the
installed packages, HIP/CUDA ``__global__`` kernels of their C++ files, and the same of the
optional source checkouts (``checkout:<name>``). The identifier, the source explorer (issue 16)
and the patcher ask the same index.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apex_core.sources.index import PackageIndex, SourceIndex, build_index, index_package, index_summary
    from apex_core.sources.names import demangle, function_base_name, kernel_name_candidates, qualified_function_name
    from apex_core.sources.packages import DEFAULT_PACKAGES, PackageSource, installed_package, installed_packages, source_checkouts
    from apex_core.sources.symbols import LaunchSite, SourceSymbol

_HOMES = {
    "PackageIndex": "index", "SourceIndex": "index", "build_index": "index", "index_package": "index", "index_summary": "index",
    "demangle": "names", "function_base_name": "names", "kernel_name_candidates": "names", "qualified_function_name": "names",
    "DEFAULT_PACKAGES": "packages", "PackageSource": "packages", "installed_package": "packages",
    "installed_packages": "packages", "source_checkouts": "packages", "LaunchSite": "symbols", "SourceSymbol": "symbols",
}
"""Each public name's module, imported on first use: the index's name reading pulls in torch
(about a second), which ``apex_core.sources.packages`` alone (the docs search's package lookup)
must not pay."""


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(import_module(f"apex_core.sources.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'apex_core.sources' has no attribute {name!r}")


__all__ = [
    "DEFAULT_PACKAGES",
    "LaunchSite",
    "PackageIndex",
    "PackageSource",
    "SourceIndex",
    "SourceSymbol",
    "build_index",
    "demangle",
    "function_base_name",
    "index_package",
    "index_summary",
    "installed_package",
    "installed_packages",
    "kernel_name_candidates",
    "qualified_function_name",
    "source_checkouts",
]

"""The source index: where each kernel of the installed inference stack is defined and launched.

The one place that knows where a kernel's source is (docs/identify.md): Triton kernels of the
installed packages, HIP/CUDA ``__global__`` kernels of their C++ files, and the same of the
optional source checkouts (``checkout:<name>``). The identifier, the source explorer (issue 16)
and the patcher ask the same index.
"""

from apex_core.sources.index import PackageIndex, SourceIndex, build_index, index_package, index_summary
from apex_core.sources.names import demangle, function_base_name, kernel_name_candidates, qualified_function_name
from apex_core.sources.packages import DEFAULT_PACKAGES, PackageSource, installed_package, installed_packages, source_checkouts
from apex_core.sources.symbols import LaunchSite, SourceSymbol

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

"""What the source index stores: kernel symbols and the places that launch them.

One record per kernel definition, whatever its language: ``@triton.jit`` functions
(``triton_scan``) and ``__global__`` functions of HIP/CUDA C++ (``cpp_scan``) live in the same
index, not in two. Paths are absolute (where the file is on this machine) and the package's
version is kept with each symbol, because a source location is only true for the version it was
read from. A Python kernel is qualified by its module (``pkg.mod.kernel``), a C++ kernel by its
namespaces (``at::native::kernel``), the form a demangled profiler name has.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SymbolLanguage = Literal["triton", "hip", "cuda"]


class LaunchSite(BaseModel):
    """One launch: ``kernel[grid](...)`` in Python, ``kernel<<<grid, block>>>(...)`` or
    ``hipLaunchKernelGGL(kernel, ...)`` in C++; who launches the kernel, where, with what."""

    model_config = ConfigDict(frozen=True)

    kernel: str
    launcher: str = Field(description="qualified name of the enclosing function: dotted in Python "
                          "('liger_kernel.ops.rms_norm.rms_norm_forward'), with '::' in C++ ('at::native::launch_reduce_kernel')")
    path: str
    line: int = Field(description="the line of the launched kernel's name")
    arguments: str = Field(default="", description="the kernel arguments as written (shortened)")
    configuration: str = Field(default="", description="a C++ launch's grid, block, shared memory and stream as written "
                               "(shortened); empty for Python")


class SourceSymbol(BaseModel):
    """A kernel defined in source: a ``@triton.jit`` function or a HIP/CUDA ``__global__`` function."""

    model_config = ConfigDict(frozen=True)

    name: str
    language: SymbolLanguage
    package: str
    version: str
    module: str | None = Field(default=None, description="dotted module of a Python-defined kernel")
    namespace: str | None = Field(default=None, description="enclosing C++ namespaces, e.g. 'at::native' "
                                  "('(anonymous namespace)' as demanglers write it); None for Python")
    path: str
    line: int = Field(description="the line of the definition's name (the def line in Python)")
    end_line: int = Field(description="the last line of the body (a C++ kernel's closing brace)")
    decorators: tuple[str, ...] = Field(default=(), description="Python decorators; for C++ the qualifiers and "
                                        "attributes, e.g. ('__global__', '__launch_bounds__(256)')")
    template_parameters: str | None = Field(default=None, description="a C++ template's parameter list text")
    parameters: str | None = Field(default=None, description="a C++ kernel's parameter list text (shortened)")
    launch_sites: tuple[LaunchSite, ...] = ()

    @property
    def location(self) -> str:
        """``path:line``, the form editors and the identifier's output use."""
        return f"{self.path}:{self.line}"

    @property
    def is_cpp(self) -> bool:
        return self.language in ("hip", "cuda")

    @property
    def qualified_name(self) -> str:
        """``module.name`` for Python, ``namespace::name`` for C++ (the demangled form)."""
        if self.is_cpp:
            return f"{self.namespace}::{self.name}" if self.namespace else self.name
        return f"{self.module}.{self.name}" if self.module else self.name

    @property
    def launchers(self) -> tuple[str, ...]:
        """The functions that launch this kernel, each once, in source order."""
        return tuple(dict.fromkeys(site.launcher for site in self.launch_sites))

"""What the source index stores: kernel symbols and the places that launch them.

One record per kernel definition, whatever its language, so that issue 16's HIP/C++ scanner adds
``language="hip"`` records to the same index instead of keeping a second one. Paths are absolute
(where the file is on this machine) and the package's version is kept with each symbol, because a
source location is only true for the version it was read from.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SymbolLanguage = Literal["triton", "hip", "cuda"]


class LaunchSite(BaseModel):
    """One ``kernel[grid](...)`` call: who launches the kernel, where, and with what arguments."""

    model_config = ConfigDict(frozen=True)

    kernel: str
    launcher: str = Field(description="dotted name of the enclosing function, e.g. 'liger_kernel.ops.rms_norm.rms_norm_forward'")
    path: str
    line: int
    arguments: str = Field(default="", description="the call's argument text as written (shortened)")


class SourceSymbol(BaseModel):
    """A kernel defined in source: a ``@triton.jit`` function now, a ``__global__`` function later."""

    model_config = ConfigDict(frozen=True)

    name: str
    language: SymbolLanguage
    package: str
    version: str
    module: str | None = Field(default=None, description="dotted module of a Python-defined kernel")
    path: str
    line: int
    end_line: int
    decorators: tuple[str, ...] = ()
    launch_sites: tuple[LaunchSite, ...] = ()

    @property
    def location(self) -> str:
        """``path:line``, the form editors and the identifier's output use."""
        return f"{self.path}:{self.line}"

    @property
    def qualified_name(self) -> str:
        return f"{self.module}.{self.name}" if self.module else self.name

    @property
    def launchers(self) -> tuple[str, ...]:
        """The functions that launch this kernel, each once, in source order."""
        return tuple(dict.fromkeys(site.launcher for site in self.launch_sites))

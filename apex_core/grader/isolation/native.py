"""Compiling HIP, CUDA and C++ solutions into importable extensions, and making errors readable.

A ``.hip``/``.cu``/``.cpp`` solution defines the entry point in C++ and binds it with
``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("<entry>", &<entry>); }``. It is built by
``torch.utils.cpp_extension`` (hipcc on ROCm, nvcc on CUDA, the host compiler for ``.cpp``) inside
the worker's scratch directory. Compiler output is cut down to the error lines that point into
the solution, with their line numbers. The ROCm path is written against cpp_extension's
documented behaviour (``.hip`` sources are compiled with hipcc) and has not run on an AMD machine.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from types import ModuleType

COMPILED_SUFFIXES = (".hip", ".cu", ".cpp")
HIP_ON_CUDA_DIR = Path(__file__).resolve().parent / "hip_on_cuda"


class ToolchainMissing(Exception):
    """This machine cannot build the solution's kind of source (not the solution's fault)."""


def _error_lines(text: str, source_name: str) -> list[str]:
    patterns = (
        re.compile(rf"{re.escape(source_name)}\((\d+)\): (?:catastrophic )?error"),  # nvcc
        re.compile(rf"{re.escape(source_name)}:(\d+):(\d+): (?:fatal )?error"),  # gcc, clang, hipcc
    )
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if any(p.search(line) for p in patterns):
            entry = line.strip()[line.strip().find(source_name):]
            context = lines[i + 1].strip() if i + 1 < len(lines) else ""
            found.append(f"{entry}" + (f"  |  {context}" if context and "error" not in context else ""))
    return found


def trim_compiler_output(text: str, source_name: str, limit: int = 6) -> str:
    """The compiler's errors about the solution, each with its line; else the output's last lines."""
    errors = _error_lines(text, source_name)
    if errors:
        more = f" (+{len(errors) - limit} more errors)" if len(errors) > limit else ""
        return "compilation failed: " + " ;; ".join(errors[:limit]) + more
    tail = [line.strip() for line in text.splitlines() if line.strip()][-8:]
    return "compilation failed: " + " ;; ".join(tail)


def hip_source_for_cuda(text: str, source_name: str) -> str:
    """A HIP source as nvcc should see it: the HIP-on-CUDA header first, line numbers kept.

    On NVIDIA machines (our development stand-in for AMD) a ``.hip`` solution is compiled by nvcc
    with ``hip_on_cuda/`` on the include path, which maps the common HIP runtime names onto CUDA;
    ``#line`` keeps compiler errors pointing at the solution's own lines and name.
    """
    return f'#include <hip/hip_runtime.h>\n#line 1 "{source_name}"\n{text}'


def extension_name(source: Path) -> str:
    """The module name ``source`` is built as (its library is ``<build_dir>/<name>.so``)."""
    return "apex_solution_" + hashlib.sha256(source.read_bytes()).hexdigest()[:12]


def build_extension(source: Path, build_dir: Path) -> ModuleType:
    """Compile ``source`` and import it; ToolchainMissing if this machine cannot build that kind."""
    import torch
    from torch.utils import cpp_extension

    if source.suffix in (".cu", ".hip") and not (torch.version.cuda or torch.version.hip):
        raise ToolchainMissing(f"this torch build has neither CUDA nor ROCm, so {source.suffix} solutions cannot be compiled here")
    build_dir.mkdir(parents=True, exist_ok=True)
    name = extension_name(source)
    include_paths: list[str] = []
    compiled = source
    if source.suffix == ".hip" and not torch.version.hip:
        compiled = build_dir / f"{source.stem}_on_cuda.cu"
        compiled.write_text(hip_source_for_cuda(source.read_text(errors="replace"), source.name))
        include_paths.append(str(HIP_ON_CUDA_DIR))
    try:
        return cpp_extension.load(
            name=name,
            sources=[str(compiled)],
            build_directory=str(build_dir),
            extra_cflags=["-O3"],
            extra_cuda_cflags=["-O3"],
            extra_include_paths=include_paths,
            verbose=False,
        )
    except (RuntimeError, OSError) as error:
        log = _build_log(build_dir) + "\n" + str(error)
        raise CompileError(trim_compiler_output(log, source.name)) from None


_GLOBAL = re.compile(r"\b__global__\b")
_ATTRIBUTE = re.compile(r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)|__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
_NAME_BEFORE_PARAMETERS = re.compile(r"[\w:<>,\s*&]*?\b(\w+)\s*\(")


def kernel_names(source: str) -> list[str]:
    """Names of the ``__global__`` kernels a HIP/CUDA source defines (what a profiler trace shows).

    Launch bounds and attributes may stand before or after the return type
    (``__global__ void __launch_bounds__(256) k(...)`` is common); they are dropped before the
    name is read, or an honest kernel would be missed and its solution flagged no_custom_kernel.
    """
    names = set()
    for match in _GLOBAL.finditer(source):
        declaration = _ATTRIBUTE.sub(" ", source[match.end() : match.end() + 500])
        found = _NAME_BEFORE_PARAMETERS.match(declaration)
        if found:
            names.add(found.group(1))
    return sorted(names)


class CompileError(Exception):
    """The solution's source did not compile; the message is already trimmed."""


def _build_log(build_dir: Path) -> str:
    log = build_dir / ".ninja_log"
    return log.read_text(errors="replace") if log.exists() else ""

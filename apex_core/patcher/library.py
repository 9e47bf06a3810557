"""Building a HIP/CUDA/C++ solution into the shared library a patch loads.

The build runs in a child process (``python -m apex_core.patcher.library``) with the grader's own
builder (``apex_core.grader.native``: cpp_extension, hipcc on ROCm, nvcc with the HIP shim on
NVIDIA stand-ins), because loading the built module runs the solution's static initialisers and
the patching process never runs solution code. The parent trusts nothing the child prints: the
library's path and module name follow from the source's hash, and the file must be there.
Verified on the CPU (a C++ solution, host compiler) in CI; HIP on NVIDIA through the shim is the
grader's tested path; hipcc on ROCm is not verified here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel

BUILD_TIMEOUT_S = 900.0


class BuiltLibrary(BaseModel):
    ok: bool
    library: str = ""
    module_name: str = ""
    message: str = ""
    """Why it did not build (the compiler's errors about the solution, trimmed)."""


def build_library(source: Path, build_dir: Path, timeout_s: float = BUILD_TIMEOUT_S) -> BuiltLibrary:
    from apex_core.grader.native import extension_name

    name = extension_name(source)
    command = [sys.executable, "-m", "apex_core.patcher.library", str(source), str(build_dir)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return BuiltLibrary(ok=False, message=f"the build did not finish in {timeout_s:g} s")
    library = build_dir / f"{name}.so"
    if done.returncode != 0 or not library.is_file():
        lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
        return BuiltLibrary(ok=False, message=(lines[-1] if lines else f"the build failed (exit {done.returncode})")[:600])
    return BuiltLibrary(ok=True, library=str(library), module_name=name)


def main(argv: list[str] | None = None) -> int:
    from apex_core.grader.native import CompileError, ToolchainMissing, build_extension

    source, build_dir = (Path(a) for a in (argv if argv is not None else sys.argv[1:]))
    try:
        build_extension(source, build_dir)
    except (CompileError, ToolchainMissing) as error:
        sys.stderr.write(f"{error}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

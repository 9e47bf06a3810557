"""Building a HIP/CUDA/C++ solution into the shared library a patch loads.

The build runs in a confined child process (``python -m apex_core.patcher.library``, started by
``apex_core.grader.isolation.confined``) with the grader's own builder
(``apex_core.grader.isolation.native``: cpp_extension, hipcc on ROCm, nvcc with the HIP shim on
NVIDIA stand-ins), because building imports the module, which runs the solution's static
initialisers, and the compiler reads whatever the source includes: neither may happen with the
user's rights. The parent trusts nothing the child says: the library's name follows from the
source's hash, and the file must be a regular file in the child's scratch directory, which the
parent copies out. Verified on the CPU (a C++ solution, host compiler) in CI; HIP on NVIDIA
through the shim is the grader's tested path; hipcc on ROCm is not verified here.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from pydantic import BaseModel

BUILD_TIMEOUT_S = 900.0
BUILD_DIR = "build"


class BuiltLibrary(BaseModel):
    ok: bool
    library: str = ""
    module_name: str = ""
    message: str = ""
    """Why it did not build (the compiler's errors about the solution, trimmed)."""


def build_library(source: Path, build_dir: Path, timeout_s: float = BUILD_TIMEOUT_S, *,
                  unconfined: bool = False) -> BuiltLibrary:
    """Build ``source`` confined; the library is copied into ``build_dir``."""
    from apex_core.grader import ChildFailed, ConfinedChild, extension_name

    name = extension_name(source)
    with ConfinedChild("apex_core.patcher.library", unconfined=unconfined) as child:
        copy = child.scratch / source.name
        shutil.copyfile(source, copy)
        child.give(copy)
        try:
            reply = child.request({"op": "build", "source": source.name}, timeout_s)
        except ChildFailed as failure:
            message = f"the build did not finish in {timeout_s:g} s" if failure.kind == "timeout" else str(failure)
            return BuiltLibrary(ok=False, message=message[:600])
        built = child.scratch / BUILD_DIR / f"{name}.so"
        if not reply.get("ok") or built.is_symlink() or not built.is_file():
            return BuiltLibrary(ok=False, message=str(reply.get("message") or "the build made no library")[:600])
        build_dir.mkdir(parents=True, exist_ok=True)
        library = build_dir / f"{name}.so"
        shutil.copyfile(built, library)
    return BuiltLibrary(ok=True, library=str(library), module_name=name)


def main(argv: list[str] | None = None) -> int:
    """The child: one 'build' request, built in the scratch directory, one reply."""
    from apex_core.grader import CompileError, ParentChannel, ToolchainMissing, build_extension

    channel, _ = ParentChannel.from_argv(list(sys.argv[1:] if argv is None else argv))
    request = channel.receive()
    if request is None:
        return 1
    scratch = Path(os.environ["HOME"])
    try:
        build_extension(scratch / Path(request["source"]).name, scratch / BUILD_DIR)
    except (CompileError, ToolchainMissing) as error:
        channel.reply({"ok": False, "message": str(error)})
        return 0
    channel.reply({"ok": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())

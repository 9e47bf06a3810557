"""What the patcher's confinement tests share: a solution that tries three escapes the moment it is
loaded (a ``.pth`` into site-packages, a file outside its sandbox, a local socket), in Python and in
C++, and the check that none of them happened."""

from __future__ import annotations

import socket
import sysconfig
from pathlib import Path

import pytest

SITE = Path(sysconfig.get_paths()["purelib"])


def escape_targets(folder: Path, marker: str) -> tuple[Path, Path]:
    """Where an escape would leave its mark: a startup file in site-packages, a file outside the sandbox."""
    return SITE / f"apex_escape_{marker}.pth", folder / f"escaped-{marker}"


def python_escapes(folder: Path, port: int, marker: str) -> str:
    """Python that attempts the three escapes at import time and carries on whatever happens."""
    pth, outside = escape_targets(folder, marker)
    return f"""
import socket as _socket

for _attempt in (lambda: open({str(pth)!r}, "w").write("import os\\n"),
                 lambda: open({str(outside)!r}, "w").write("out"),
                 lambda: _socket.create_connection(("127.0.0.1", {port}), timeout=3).sendall(b"leak")):
    try:
        _attempt()
    except OSError:
        pass

"""


def native_escapes(folder: Path, port: int, marker: str) -> str:
    """C++ that attempts the same three in a static constructor: it runs when the library is loaded,
    whichever process loads it (the build's own import, the in-model check, the model)."""
    pth, outside = escape_targets(folder, marker)
    return f"""#include <arpa/inet.h>
#include <cstdio>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

__attribute__((constructor)) static void apex_escape_attempts() {{
  if (std::FILE* f = std::fopen("{pth}", "w")) {{ std::fputs("import os\\n", f); std::fclose(f); }}
  if (std::FILE* f = std::fopen("{outside}", "w")) {{ std::fputs("out", f); std::fclose(f); }}
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return;
  sockaddr_in address{{}};
  address.sin_family = AF_INET;
  address.sin_port = htons({port});
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (connect(s, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) (void)!write(s, "leak", 4);
  close(s);
}}

"""


@pytest.fixture
def listener():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        yield server


def connected(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
        return True
    except BlockingIOError:
        return False


def nothing_escaped(marker: str, folder: Path, listener: socket.socket, where: str) -> None:
    pth, outside = escape_targets(folder, marker)
    assert not pth.exists(), f"{where} wrote into site-packages"
    assert not outside.exists(), f"{where} wrote outside its sandbox"
    assert not connected(listener), f"{where} reached a local socket"


def native_escapes_work_unconfined(folder: Path, listener: socket.socket) -> bool:
    """The C++ probe built alone (no torch) and loaded by a plain process: all three escapes must
    happen there, or a test that sees none of them under confinement proves nothing."""
    import shutil
    import subprocess
    import sys

    compiler = shutil.which("c++") or shutil.which("g++")
    assert compiler, "no C++ compiler on PATH; the native patch path needs one"
    marker = f"{folder.name}-probe"
    source, library = folder / "probe.cpp", folder / "probe.so"
    source.write_text(native_escapes(folder, listener.getsockname()[1], marker))
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True, capture_output=True, timeout=120)
    subprocess.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(library)!r})"], check=True, timeout=60)
    pth, outside = escape_targets(folder, marker)
    try:
        return pth.exists() and outside.exists() and connected(listener)
    finally:
        pth.unlink(missing_ok=True)

"""Shared fixtures: how tests run the CLI, and the GPU marker's skip rule."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests import cpu_seconds, durations
from tests.worker_environments import in_worker_environment, put_own_site_first

put_own_site_first()  # before any test imports transformers

REPO_ROOT = Path(__file__).resolve().parent.parent
_SESSION_CACHE = Path(tempfile.mkdtemp(prefix="apex-test-cache-"))
_SOURCE_CACHE = os.environ.get("APEX_SOURCE_CACHE_DIR") or str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "apex")
"""The source index is derived from the installed packages alone, so every test shares the one
setup.sh built (a cold build reads all of torch and transformers); tests of the index itself give
their own cache_dir."""


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch, tmp_path):
    """Tests never read or write the user's grade cache."""
    monkeypatch.setenv("APEX_CACHE_DIR", str(tmp_path / "apex-cache"))
    monkeypatch.setenv("APEX_SOURCE_CACHE_DIR", _SOURCE_CACHE)


def ensure_debian_binary(binary: str, packages: list[str], purpose: str) -> str:
    """``binary``'s path, installing Debian's ``packages`` first where that is allowed and possible
    (CI's fresh Debian image runs as root with apt-get). RuntimeError says why it is not there, so
    the caller can skip with the reason; APEX_TEST_NO_APT=1 forbids installing."""
    found = shutil.which(binary)
    if found:
        return found
    if os.environ.get("APEX_TEST_NO_APT") == "1":
        raise RuntimeError(f"{binary} is not on PATH and APEX_TEST_NO_APT=1 forbids installing it")
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError(f"{binary} is not on PATH; install it (apt-get install {' '.join(packages)})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    sys.stderr.write(f"{purpose}: {binary} is missing; installing Debian's {' '.join(packages)}\n")
    update = subprocess.run(["apt-get", "update"], capture_output=True, text=True, timeout=600, env=env, check=False)
    install = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *packages], capture_output=True, text=True,
                             timeout=1200, env=env, check=False)
    found = shutil.which(binary)
    if install.returncode != 0 or not found:
        raise RuntimeError(f"apt-get could not install {' '.join(packages)}: {(update.stderr + install.stderr)[-400:]}")
    return found


@pytest.fixture(scope="session")
def debian_binary():
    """``ensure_debian_binary`` for tests that need a system program (npm, chromium)."""
    return ensure_debian_binary


def _gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


SITE_PACKAGES_GROUP = "site-packages"
"""The xdist group of the tests marked ``site_packages``. They patch transformers in the venv (or
run a model from it while another patches it), and one environment has one patcher at a time. Each
worker has an environment of its own (``tests/worker_environments.py``), so each module of them is
a group (its fixtures set up once, on one worker) and the modules spread over the workers; where
workers share one environment (``APEX_TEST_SHARED_ENV=1``), the whole group goes to one worker,
which runs it in order."""

SHARED_ENV = "APEX_TEST_SHARED_ENV"
WORKER_ENVIRONMENTS = Path(sys.prefix) / "apex-test-workers"


def pytest_configure(config: pytest.Config) -> None:
    """On xdist's controller: one environment per worker, each worker started in its own. On a
    worker: device slots of its own (``_own_device_slots``)."""
    from tests import worker_environments

    if hasattr(config, "workerinput"):
        _own_device_slots(config.workerinput["workerid"])
    specs = list(config.getoption("tx", None) or [])
    if hasattr(config, "workerinput") or not specs or os.environ.get(SHARED_ENV) == "1" or \
            any(spec != "popen" for spec in specs) or worker_environments.in_worker_environment():
        return
    pythons = worker_environments.build(len(specs), WORKER_ENVIRONMENTS)
    config.option.tx = [f"popen//python={python}" for python in pythons]
    config.add_cleanup(lambda: worker_environments.remove_session(WORKER_ENVIRONMENTS))


def _own_device_slots(worker: str) -> None:
    """Each worker's gradings queue on device slots of their own (``APEX_SLOTS_DIR``), not on the
    machine's: a timed CPU grading holds the one ``cpu`` slot machine-wide, so the workers' gradings
    ran one at a time across the whole suite, each worker idle while another's timed. The slots
    still order the gradings inside a worker (and ``tests/apex_core/grader/test_slots.py`` checks
    them across processes); what the slots protect, a measurement nothing else disturbs, is what
    the ``timing`` tests get from having the whole machine (``_alone_or_together``)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "local")
    folder = Path(tempfile.gettempdir()) / f"apex-pytest-{os.getuid()}-{run}" / f"slots-{worker}"
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["APEX_SLOTS_DIR"] = str(folder)


@contextlib.contextmanager
def _alone_or_together(alone: bool):
    """Under xdist, a ``timing`` or ``alone`` test runs while no other test does; the others run side by side.

    A readers-writer lock over the session's workers (two flock files, so a waiting ``timing``
    test is not starved): every test passes the turnstile and holds the room shared; a ``timing``
    test holds the turnstile, so none starts, until it has the room to itself. Outside xdist there
    is one test at a time anyway."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        yield
        return
    folder = Path(tempfile.gettempdir()) / f"apex-pytest-{os.getuid()}-{run}"
    folder.mkdir(exist_ok=True)
    with open(folder / "turnstile", "a") as turnstile, open(folder / "room", "a") as room:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """The lock spans setup, call and teardown, so a module fixture that measures (first set up by
    the item that needs it) measures alone too."""
    with _alone_or_together(any(item.get_closest_marker(name) for name in ("timing", "alone"))), \
            cpu_seconds.recorded(item.nodeid):
        yield


@pytest.hookimpl(wrapper=True)  # around every other impl: xdist reads the groups off the items in its own
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    own_environment = in_worker_environment()
    for item in items:
        if item.get_closest_marker("site_packages"):
            module = item.nodeid.split("::", 1)[0]
            item.add_marker(pytest.mark.xdist_group(f"{SITE_PACKAGES_GROUP}:{module}" if own_environment else SITE_PACKAGES_GROUP))
    _skip_gpu_tests(items)
    result = yield
    if os.environ.get("PYTEST_XDIST_WORKER") and not config.getoption("loadscopereorder", True):
        # xdist's own impl has named the groups (``@group``); the controller takes the workers' order.
        order = durations.longest_first([item.nodeid for item in items], durations.load())
        items[:] = [items[i] for i in order]
    return result


def _skip_gpu_tests(items: list[pytest.Item]) -> None:
    """GPU tests skip with the reason where torch sees no GPU."""
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA or ROCm GPU; torch sees none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago (the probe's socket is closed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def interruptible() -> None:
    """``preexec_fn`` for a child a test interrupts with SIGINT: Ctrl-C's default back. A process
    started in the background by a non-interactive shell (``cmd &``, as a CI runner or a detached
    test run may be) inherits SIGINT ignored, and a Python started so never installs its
    KeyboardInterrupt handler: the interrupt would then test nothing but the inheritance."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_apex(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real ``apex`` command line in a child process, as a user would."""
    full_env = {**os.environ, "APEX_CACHE_DIR": str(_SESSION_CACHE), **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), full_env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, "-m", "apex_core.cli.main", *args],
        cwd=cwd or REPO_ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def apex_cli():
    return run_apex

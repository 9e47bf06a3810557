"""A pipeline run in a child process (what the MCP server does): it gives the same state as a run
in-process, it restores the environment when its parent is killed mid benchmark-final or when the
awaiting call is cancelled mid integrate, and a user mistake comes back as one line.

The runs resume a copy of one cpu-mini run taken through grade in-process (module fixture), so each
test runs only the stages it is about. They patch the real environment: one at a time, never beside
other patching tests (one patcher per environment)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from apex_core.errors import ApexUserError
from apex_core.patcher import restore, status
from apex_core.patcher.points import get_point
from apex_core.pipeline.child import UNWIND_S, PipelineStopped, run_in_child, run_in_child_blocking
from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.runner import run_pipeline
from apex_core.pipeline.state import RUNS_DIR, RunState, load_run

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[3]
CONFIG = RunConfig(workload="cpu-mini", runs=2, iterations=1, top_k=1, leaderboard=False)
GRADED = ("benchmark", "identify", "optimize", "grade")
PARENT = """
import json, sys
from pathlib import Path
from apex_core.pipeline.child import run_in_child_blocking

def say(**line):
    print(json.dumps(line), flush=True)

run_in_child_blocking(None, Path(sys.argv[1]), resume=Path(sys.argv[2]), progress=lambda f, m: say(message=m),
                      started=lambda pid, folder: say(child=pid))
"""
"""A parent process as small as an MCP server's part in a run: it starts the child and relays."""


def _patch_folder() -> dict[str, bytes]:
    """The cpu-mini patch target's folder as it is: a patch rewrites the target and adds its copy."""
    folder = get_point("cpu-mini.rms_norm").target_file().parent
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _nothing_patched() -> bool:
    journal = status()
    return journal is None or not journal.active()


@pytest.fixture(scope="module")
def judge_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cache, and so the judge's ledger, the graded run was signed in."""
    return tmp_path_factory.mktemp("apex-cache")


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, judge_cache: Path) -> RunState:
    """One cpu-mini run taken in-process through grade: what is left is integrate and after."""
    from apex_core.sources.index import SOURCE_CACHE_ENV, source_cache_dir

    with pytest.MonkeyPatch.context() as patch:  # as conftest's _private_cache, which a module fixture runs before
        patch.setenv(SOURCE_CACHE_ENV, str(source_cache_dir()))  # the shared index: a cold one takes 20 s
        patch.setenv("APEX_CACHE_DIR", str(judge_cache))
        return run_pipeline(CONFIG, tmp_path_factory.mktemp("graded"), only=GRADED)


@pytest.fixture
def same_judge(judge_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumed copy integrates only gradings its judge signed: the graded run's ledger, not this test's."""
    monkeypatch.setenv("APEX_CACHE_DIR", str(judge_cache))


def _copy_of(state: RunState, results_root: Path) -> Path:
    """The run, copied under ``results_root``, to resume without touching the original."""
    folder = results_root / RUNS_DIR / state.run_id
    shutil.copytree(state.folder, folder)
    copy = load_run(folder)
    copy.results_dir = str(folder.resolve())
    copy.save()
    return folder


class Leftovers:
    """The children a test started, and the environment as it was before."""

    def __init__(self) -> None:
        self.before = _patch_folder()
        self.children: list[int] = []


@pytest.fixture
def leftovers() -> Iterator[Leftovers]:
    """After a test that patches: no child of it still runs and nothing stays patched, whatever failed."""
    left = Leftovers()
    yield left
    for pid in left.children:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 30)
    restore()


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs; an orphan's zombie (not reaped where pid 1 does not reap) has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] not in ("Z", "X")


def _wait_gone(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        assert time.monotonic() < deadline, f"process {pid} still runs {timeout_s} s after it was told to stop"
        time.sleep(0.05)


def test_a_run_through_the_child_gives_the_same_state_as_one_in_process(graded, tmp_path):
    seen: list[str] = []
    started: list[tuple[int, Path]] = []
    state = run_in_child_blocking(CONFIG, tmp_path, only=("benchmark", "identify"), progress=lambda f, m: seen.append(m),
                                  started=lambda pid, folder: started.append((pid, folder)))
    assert state == load_run(state.folder) and state.folder.is_relative_to(tmp_path.resolve())
    assert started == [(started[0][0], state.folder)] and started[0][0] != os.getpid()
    assert state.config == graded.config
    for name in ("benchmark", "identify"):
        assert (state.stages[name].status, graded.stages[name].status) == ("done", "done")
    assert [(k.task_id, k.kernel, k.language, k.rank, k.kernel_name) for k in state.kernels] == \
        [(k.task_id, k.kernel, k.language, k.rank, k.kernel_name) for k in graded.kernels]
    assert seen[0] == "benchmark: starting" and seen[-1].startswith("identify: done: 1 kernel(s) to optimize: cpu-mini__rms_norm")


def test_killing_the_parent_mid_benchmark_final_leaves_the_environment_unpatched(graded, same_judge, tmp_path, leftovers):
    folder = _copy_of(graded, tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    with open(tmp_path / "stderr.txt", "wb") as stderr:  # a file: a pipe nobody reads would stall the orphan's unwinding
        parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path), str(folder)], stdout=subprocess.PIPE,
                                  stderr=stderr, env=env, cwd=tmp_path, text=True)
    assert parent.stdout is not None
    child = None
    said: list[str] = []
    for raw in parent.stdout:
        line = json.loads(raw)
        said.append(line.get("message", ""))
        child = line.get("child", child)
        if child is not None and child not in leftovers.children:
            leftovers.children.append(child)
        if line.get("message", "").startswith("benchmark-final: loading the candidate arm"):
            break
    assert child is not None, (tmp_path / "stderr.txt").read_text()[-3000:]
    deadline = time.monotonic() + 120
    while _patch_folder() == leftovers.before:  # the candidate arm's winner is put back in (the control's baseline was)
        assert time.monotonic() < deadline, f"benchmark-final never patched the winner back in; the run said {said[-8:]}"
        time.sleep(0.02)
    parent.kill()
    parent.wait()
    _wait_gone(child, 60)
    state = load_run(folder)
    assert state.stages["integrate"].status == "done"
    assert (state.stages["benchmark-final"].status, state.stages["benchmark-final"].error) == ("failed", "interrupted")
    assert _nothing_patched() and _patch_folder() == leftovers.before, (tmp_path / "stderr.txt").read_text()[-3000:]


def test_cancelling_the_awaited_run_mid_integrate_stops_the_child_and_it_restores(graded, same_judge, tmp_path, leftovers):
    folder = _copy_of(graded, tmp_path)
    patched_when_cancelled: list[bool] = []
    cancelled_at: list[float] = []

    async def cancel_once_patched() -> None:
        with anyio.CancelScope() as scope:
            async def progress(fraction: float, message: str) -> None:
                if message.startswith("integrate: checking"):  # the target is rewritten, the patch not yet kept
                    patched_when_cancelled.append(_patch_folder() != leftovers.before)
                    cancelled_at.append(time.monotonic())
                    scope.cancel()

            await run_in_child(None, tmp_path, resume=folder, progress=progress,
                               started=lambda pid, _: leftovers.children.append(pid))
        assert scope.cancelled_caught

    anyio.run(cancel_once_patched)
    unwound_s = time.monotonic() - cancelled_at[0]
    assert patched_when_cancelled == [True]  # the stop was sent while integrate had a patch written
    assert not _alive(leftovers.children[0])  # the call returned once the child had unwound
    state = load_run(folder)
    # The SIGTERM lands in the stage the child is in by then: integrate, unless a loaded machine let
    # it finish its last check before the signal arrived (seen once in a fresh-clone run), and then
    # the benchmark it went on to. Either way that stage is interrupted and nothing after it ran.
    interrupted = [name for name, stage in state.stages.items() if (stage.status, stage.error) == ("failed", "interrupted")]
    # (Once, in a loaded fresh-clone run, no stage was recorded as interrupted: the stop had landed
    # between integrate and the stage after it, outside any stage's own try; the runner now records
    # such a stop on the stage about to run, test_run.py. The message says where each stage stood.)
    assert interrupted in (["integrate"], ["benchmark-final"]), (
        f"{unwound_s:.1f} s from the stop to the child's end (it is killed after {UNWIND_S:g} s); stages: "
        + "; ".join(f"{name} {stage.status} {stage.error!r}" for name, stage in state.stages.items()))
    later = list(state.stages)[list(state.stages).index(interrupted[0]) + 1:]
    assert all(state.stages[name].status == "pending" for name in later)
    assert _nothing_patched() and _patch_folder() == leftovers.before


def test_a_child_stopped_from_elsewhere_is_a_stopped_run_to_resume_not_a_result(tmp_path):
    children: list[int] = []

    def stop_while_loading(fraction: float, message: str) -> None:
        if message.startswith("benchmark: loading"):
            os.kill(children[0], signal.SIGTERM)

    with pytest.raises(PipelineStopped) as stopped:
        run_in_child_blocking(CONFIG, tmp_path, only=("benchmark",), progress=stop_while_loading,
                              started=lambda pid, _: children.append(pid))
    (folder,) = (tmp_path / RUNS_DIR).iterdir()
    assert str(stopped.value) == (f"the pipeline run was stopped (SIGTERM) before it finished and restored its patches "
                                  f"({folder.resolve()}; resume_run or apex run --resume goes on with it)")
    assert (load_run(folder).stages["benchmark"].status, load_run(folder).stages["benchmark"].error) == ("failed", "interrupted")


def test_a_user_mistake_in_the_child_comes_back_as_one_line(graded, tmp_path):
    with pytest.raises(ApexUserError) as missing:
        run_in_child_blocking(None, tmp_path, resume=tmp_path / "no-such-run")
    assert str(missing.value).startswith(f"{tmp_path.resolve() / 'no-such-run'}: no state.json there")
    with pytest.raises(ApexUserError) as stage:
        run_in_child_blocking(None, tmp_path, resume=graded.folder, only=("polish",))
    assert str(stage.value).startswith("stage 'polish': the stages are benchmark, identify")
    assert "\n" not in str(missing.value) + str(stage.value)

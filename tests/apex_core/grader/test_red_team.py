"""Solutions that attack the grader's process model, each with the verdict it must get.

The reward-hack classes of docs/grader.md that concern processes and files: detached
children, memory exhaustion, killing itself, editing the grader's or the baseline's files.
"""

import os
import textwrap
import threading
import time
from pathlib import Path

import pytest

from apex_core.grader import GradeOptions, Outcome, grade
from apex_core.tasks import get_task

FAST = GradeOptions(time_budget_s=0.5, timeout_s=30)
CORRECT = textwrap.dedent(
    """
    def _correct(x, weight, eps):
        ms = (x.astype(np.float64) ** 2).mean(-1, keepdims=True)
        return (x / np.sqrt(ms + eps) * weight).astype(np.float32)
    """
)


HONEST_WHILE_CHECKED = """
    _calls = []
    def rms_norm(x, weight, eps):
        _calls.append(1)
        if len(_calls) > 60:
            return np.zeros_like(x)
        return _correct(x, weight, eps)
"""
"""Correct for the first 60 calls (the correctness checks), zeros once timed."""


@pytest.fixture
def task():
    return get_task("cpu-mini__rms_norm")


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "solution.py"
    path.write_text("import numpy as np\nimport os, sys, time\n" + CORRECT + textwrap.dedent(body))
    return path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_child_that_detaches_with_setsid_and_a_double_fork_does_not_survive_the_grading(task, tmp_path):
    marker = f"{os.getpid()}{int(time.time() * 1000) % 100000}.5"
    body = f"""
    _started = []
    def rms_norm(x, weight, eps):
        if not _started:
            _started.append(1)
            child = os.fork()
            if child == 0:
                os.setsid()
                if os.fork() == 0:
                    os.execv("/bin/sleep", ["sleep", {marker!r}])
                os._exit(0)
            os.waitpid(child, 0)
        return _correct(x, weight, eps)
    """
    # The daemon runs in the solution's namespaces (its pid there means nothing here, and it can
    # write nowhere the test reads): the test finds it by its command line while the grading runs.
    seen: list[int] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set() and not seen:
            seen.extend(pid for pid in _pids() if _cmdline(pid) == ["sleep", marker])
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = grade(task, write(tmp_path, body), FAST)
    finally:
        done.set()
        watcher.join()
    assert result.outcome is Outcome.ok
    assert seen, "the daemon never started"
    deadline = time.monotonic() + 5
    while alive(seen[0]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(seen[0])


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def test_one_huge_allocation_fails_inside_the_address_space_limit(task, tmp_path):
    body = """
    def rms_norm(x, weight, eps):
        hoard = np.ones(1 << 40, dtype=np.uint8)
        return _correct(x, weight, eps)
    """
    result = grade(task, write(tmp_path, body), GradeOptions(memory_bytes=1 << 30, timeout_s=30, timing=False))
    assert result.outcome is Outcome.runtime_error
    assert "MemoryError" in result.reason


def test_children_that_together_exceed_the_memory_limit_are_killed(task, tmp_path):
    body = """
    def rms_norm(x, weight, eps):
        for _ in range(4):
            if os.fork() == 0:
                block = np.ones(400 * 1024 * 1024, dtype=np.uint8)
                time.sleep(60)
                os._exit(0)
        time.sleep(60)
        return _correct(x, weight, eps)
    """
    started = time.monotonic()
    result = grade(task, write(tmp_path, body), GradeOptions(memory_bytes=1 << 30, timeout_s=40, timing=False))
    assert result.outcome is Outcome.crash
    assert "memory limit" in result.reason
    assert time.monotonic() - started < 40


@pytest.mark.alone  # every grading on another worker would see score.py change and be void
def test_a_solution_that_edits_the_grader_is_tampering_and_the_file_is_restored(task, tmp_path):
    # Unconfined: a confined solution cannot write there at all (test_sandbox.py); this is the
    # integrity snapshot, the defense left when the user grades --unconfined.
    target = Path(__file__).resolve().parents[3] / "apex_core" / "score.py"
    original = target.read_bytes()
    body = f"""
    def rms_norm(x, weight, eps):
        with open({str(target)!r}, "a") as handle:
            handle.write("\\nCOMPILED_POINTS = 1000.0\\n")
        return _correct(x, weight, eps)
    """
    try:
        result = grade(task, write(tmp_path, body), FAST.model_copy(update={"unconfined": True}))
        assert result.outcome is Outcome.tampering
        assert "score.py" in result.reason
        assert target.read_bytes() == original
    finally:
        target.write_bytes(original)


@pytest.mark.alone  # every grading on another worker would see score.py change and be void
def test_an_edit_to_apex_by_another_process_during_a_confined_grading_voids_it_and_is_kept(task, tmp_path):
    # Confined, the solution cannot write Apex's files (test_sandbox.py): a change seen afterwards
    # came from elsewhere (here: the test, as a developer's editor would), so it is neither
    # the solution's tampering nor undone.
    from apex_core.grader import confinement_problem

    if confinement_problem():
        pytest.skip(f"solutions cannot be confined here: {confinement_problem()}")
    target = Path(__file__).resolve().parents[3] / "apex_core" / "score.py"
    original = target.read_bytes()
    edited = original + b"\n# a developer's edit, made while a grading ran\n"

    def edit_once_checking(fraction: float, message: str) -> None:
        if message.startswith("checking correctness") and target.read_bytes() == original:
            target.write_bytes(edited)

    solution = write(tmp_path, "rms_norm = _correct\n")
    try:
        result = grade(task, solution, FAST, progress=edit_once_checking)
        assert result.outcome is Outcome.infra_error
        assert "score.py" in result.reason and "another process" in result.reason
        assert result.score.total == 0 and not any(flag.startswith("tampering") for flag in result.flags)
        assert target.read_bytes() == edited
    finally:
        target.write_bytes(original)


@pytest.mark.alone  # every grading on another worker would see the baseline change and be void
def test_slowing_the_baseline_by_editing_it_earns_no_speedup(task, tmp_path):
    # Unconfined, as above: confined, the baseline is read-only to the solution (test_sandbox.py).
    baseline = task.baseline_path
    original = baseline.read_bytes()
    body = f"""
    _done = []
    def rms_norm(x, weight, eps):
        if not _done:
            with open({str(baseline)!r}, "a") as handle:
                handle.write("\\nimport time as _t\\n_orig = rms_norm\\ndef rms_norm(x, w, e):\\n    _t.sleep(0.05)\\n    return _orig(x, w, e)\\n")
            _done.append(1)
        return _correct(x, weight, eps)
    """
    try:
        result = grade(task, write(tmp_path, body), FAST.model_copy(update={"unconfined": True}))
        assert result.outcome is Outcome.tampering
        assert result.speedup is not None and result.speedup <= 1.0
        assert baseline.read_bytes() == original
    finally:
        baseline.write_bytes(original)


# --- hack classes of docs/grader.md that apply to a CPU task ------------------------------------


def test_a_cache_keyed_on_the_input_buffer_is_caught_by_checking_the_timed_outputs(task, tmp_path):
    body = """
    _cache = {}
    def rms_norm(x, weight, eps):
        key = (x.__array_interface__["data"][0], x.shape)
        if key not in _cache:
            _cache[key] = _correct(x, weight, eps)
        return _cache[key]
    """
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome is Outcome.wrong_answer
    assert result.speedup is None


MEMO_KEYS = {
    "prefix_hash": "hashlib.sha256(x.tobytes()[:4096]).hexdigest()",
    "strided_sample": "x.ravel()[:: max(1, x.size // 256)][:256].tobytes()",
    "full_hash": "hashlib.sha256(x.tobytes()).hexdigest()",
}


@pytest.mark.parametrize("key", sorted(MEMO_KEYS))
def test_no_timed_call_sees_inputs_whose_outputs_a_content_keyed_cache_remembers(task, tmp_path, key):
    # On a hit the memo returns its remembered output with one element off by 1.0, a tell that
    # the check of the timed outputs sees: a memo that ever answered a checked timed call from
    # its cache fails. Without fresh inputs per timed call it hit on every call after the first
    # use of each staged input set, and was credited 2-3x the honest speedup (issue 13).
    body = f"""
    import hashlib
    _memo = {{}}
    def rms_norm(x, weight, eps):
        key = (x.shape, {MEMO_KEYS[key]})
        if key in _memo:
            remembered = _memo[key].copy()
            remembered.flat[0] += 1.0
            return remembered
        _memo[key] = _correct(x, weight, eps)
        return _memo[key].copy()
    """
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome is Outcome.ok, result.reason


def test_the_honest_control_of_the_memo_tests_passes_with_a_speedup(task, tmp_path):
    body = """
    import hashlib
    def rms_norm(x, weight, eps):
        hashlib.sha256(x.tobytes()).hexdigest()  # the memo's cost, without its cache
        return _correct(x, weight, eps)
    """
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome is Outcome.ok and result.speedup > 1.0


def test_a_patched_worker_cannot_choose_which_timed_outputs_are_checked(task, tmp_path):
    # Honest while checked, garbage once timed, plus a rewrite of the harness (reached past the
    # pre-scan) that answers the judge's request for timed outputs with none at all. The judge
    # knows from its own copy of the rotation which buffers it asked for and what they held, so an
    # empty answer is wrong.
    body = """
    _main = getattr(sys, "mod" + "ules")["__ma" + "in__"]
    _main.Worker.timed_outputs_payload = lambda self, slots: (
        {"ok": True, "output_type": "exact", "items": [], "outputs": 1}, _main.encode_values([]))
    """ + HONEST_WHILE_CHECKED
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome is Outcome.wrong_answer
    assert "timed calls" in result.reason
    assert result.speedup is None


def test_behaving_only_while_being_checked_is_caught_on_the_timed_calls(task, tmp_path):
    result = grade(task, write(tmp_path, HONEST_WHILE_CHECKED), FAST)
    assert result.outcome is Outcome.wrong_answer
    assert "timed call" in result.reason


def test_a_forged_reply_written_to_the_judges_channel_is_tampering(task, tmp_path):
    body = """
    import json, struct
    def rms_norm(x, weight, eps):
        fake = json.dumps({"ok": True, "output_type": "exact", "samples_ns": [1] * 5}).encode()
        frame = struct.pack(">Q", len(fake)) + fake + struct.pack(">Q", 0)
        os.write(int(sys.argv[2]), frame)
        return _correct(x, weight, eps)
    """
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome is Outcome.tampering
    assert "nonce" in result.reason
    assert result.speedup is None or result.speedup <= 1.0


def test_mutating_the_inputs_is_caught_even_when_the_worker_is_patched_to_deny_it(task, tmp_path):
    # The worker runs as __main__; a solution can replace anything in it. The judge decides from
    # the inputs' digests under its own key, which the solution cannot produce without the
    # original inputs.
    body = """
    worker_module = sys.modules["__main__"]
    worker_module.input_digests = lambda args, key, skip=(): [None] * len(args)
    def rms_norm(x, weight, eps):
        out = _correct(x, weight, eps)
        x[...] = 0
        return out
    """
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome in (Outcome.wrong_answer, Outcome.tampering)
    assert not result.correct and result.speedup is None


def test_patching_the_timer_does_not_fool_the_timing_and_is_tampering(task, tmp_path):
    body = """
    time.perf_counter_ns = lambda: 0
    time.perf_counter = lambda: 0.0
    def rms_norm(x, weight, eps):
        time.sleep(0.002)
        return _correct(x, weight, eps)
    """
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome is Outcome.tampering
    assert result.speedup <= 1.0
    assert result.timings[0].solution_median_ns > 1_000_000  # the real 2 ms sleep was measured


def test_exiting_at_import_is_a_compile_error_not_a_pass(task, tmp_path):
    result = grade(task, write(tmp_path, "sys.exit(0)\n"), FAST)
    assert result.outcome is Outcome.compile_error and "SystemExit" in result.reason


def test_printing_pass_changes_nothing(task, tmp_path):
    body = """
    def rms_norm(x, weight, eps):
        print("PASS")
        print("BENCHMARK_MS: 0.0001")
        return x.copy()
    """
    assert grade(task, write(tmp_path, body), FAST).outcome is Outcome.wrong_answer


def test_calling_the_graders_reference_is_tampering(task, tmp_path):
    body = """
    from apex_core.kernels.rms_norm import reference_numpy
    def rms_norm(x, weight, eps):
        return reference_numpy(x, weight, eps)
    """
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome is Outcome.tampering
    assert result.speedup is None or result.speedup <= 1.0


def test_finishing_the_output_in_a_thread_after_returning_is_wrong(task, tmp_path):
    body = """
    import threading
    def rms_norm(x, weight, eps):
        out = np.zeros_like(x)
        def later():
            time.sleep(0.05)
            out[...] = _correct(x, weight, eps)
        threading.Thread(target=later).start()
        return out
    """
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome is Outcome.wrong_answer
    assert any(flag.startswith("prescan:threads_or_processes") for flag in result.flags)


def test_an_honest_solution_that_uses_a_thread_pool_is_not_penalized(task, tmp_path):
    body = """
    from concurrent.futures import ThreadPoolExecutor
    _pool = ThreadPoolExecutor(2)
    def rms_norm(x, weight, eps):
        halves = np.array_split(np.arange(x.shape[0]), 2)
        parts = list(_pool.map(lambda rows: _correct(x[rows], weight, eps), halves))
        return np.concatenate(parts).astype(np.float32)
    """
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome is Outcome.ok and result.correct
    assert result.speedup > 1.0


def test_a_speedup_above_the_ceiling_is_re_measured_before_credit(task):
    canned = Path(__file__).resolve().parents[3] / "apex_core" / "agents" / "canned" / "cpu-mini__rms_norm.py"
    strict = task.model_copy(update={"speedup_ceiling": 2.0})
    result = grade(strict, canned, FAST)
    assert result.outcome is Outcome.ok
    assert any(flag.startswith("above_ceiling") for flag in result.flags)
    assert result.speedup > 2.0

"""Device slots: a timing grading has its device to itself, machine-wide; the others queue."""

import subprocess
import sys
import threading
import time

import pytest

from apex_core.grader import slots


@pytest.fixture(autouse=True)
def _private_slots(monkeypatch, tmp_path):
    monkeypatch.setenv("APEX_SLOTS_DIR", str(tmp_path / "slots"))


def _holder_process(exclusive: bool) -> subprocess.Popen:
    """Another process that takes the CPU's slot, says so, and holds it until its stdin closes."""
    code = (
        "import sys\n"
        "from apex_core.grader import slots\n"
        f"with slots.device_slot('cpu', exclusive={exclusive}):\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.read()\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process


def _taken_within(exclusive: bool, seconds: float, reports: list[str] | None = None) -> bool:
    done = threading.Event()

    def take() -> None:
        with slots.device_slot("cpu", exclusive=exclusive, report=(reports.append if reports is not None else None)):
            done.set()

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return done.wait(seconds)


def test_a_timing_grading_waits_while_another_process_times_and_says_it_is_queued():
    holder = _holder_process(exclusive=True)
    reports: list[str] = []
    try:
        assert not _taken_within(True, 0.5, reports)
        assert reports and reports[0].startswith("queued: another grading is using cpu")
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


def test_a_slot_is_free_again_when_its_holder_is_killed():
    holder = _holder_process(exclusive=True)
    holder.kill()
    holder.wait(timeout=10)
    assert _taken_within(True, 2.0)


def test_gradings_that_only_check_correctness_share_the_device_but_not_with_one_that_times():
    holder = _holder_process(exclusive=False)
    try:
        assert _taken_within(False, 2.0)
        assert not _taken_within(True, 0.3)
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


def test_two_threads_of_one_process_never_time_at_once():
    inside, overlaps = [0], []
    lock = threading.Lock()

    def grading() -> None:
        with slots.device_slot("cpu", exclusive=True):
            with lock:
                inside[0] += 1
                overlaps.append(inside[0])
            time.sleep(0.02)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=grading) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert overlaps == [1, 1, 1, 1]


def test_a_slots_folder_whose_parents_are_missing_is_made(tmp_path, monkeypatch):
    """An agent's confined session sees a private /tmp: a folder named from outside is not there yet."""
    from apex_core.grader import slots

    monkeypatch.setenv("APEX_SLOTS_DIR", str(tmp_path / "not" / "yet" / "slots"))
    with slots.device_slot("cpu", exclusive=True) as name:
        assert name == "cpu" and (tmp_path / "not" / "yet" / "slots" / "cpu.lock").is_file()

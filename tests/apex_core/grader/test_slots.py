"""Device slots: a grading measures with its device to itself, machine-wide; the others queue, and
one waiting to measure is not starved by others that keep the device shared in turn."""

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
        f"with slots.DeviceHold('cpu') as hold, hold.held(exclusive={exclusive}):\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.read()\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process


def _taken_within(exclusive: bool, seconds: float, reports: list[str] | None = None) -> bool:
    done = threading.Event()

    def take() -> None:
        with slots.DeviceHold("cpu", report=(reports.append if reports is not None else None)) as hold:
            with hold.held(exclusive):
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
        with slots.DeviceHold("cpu") as hold, hold.held(exclusive=True):
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
    with slots.DeviceHold("cpu") as hold, hold.held(exclusive=True):
        assert hold.name == "cpu" and (tmp_path / "not" / "yet" / "slots" / "cpu.lock").is_file()


def test_a_grading_waiting_to_measure_goes_before_one_that_comes_later_to_share():
    """The turnstile: while one grading waits for the shared holders to leave so it can measure,
    a newcomer that only wants the device shared waits behind it, not beside the holders."""
    holder = _holder_process(exclusive=False)
    order: list[str] = []
    measuring_started = threading.Event()

    def measure() -> None:
        with slots.DeviceHold("cpu") as hold, hold.held(exclusive=True):
            order.append("measured")
            measuring_started.set()
            time.sleep(0.2)
        order.append("measured and let go")

    def share() -> None:
        with slots.DeviceHold("cpu") as hold, hold.held(exclusive=False):
            order.append("shared")

    measurer = threading.Thread(target=measure, daemon=True)
    measurer.start()
    time.sleep(0.3)  # the measurer now holds the turnstile and waits for the holder
    sharer = threading.Thread(target=share, daemon=True)
    sharer.start()
    try:
        sharer.join(0.5)
        assert order == [] and sharer.is_alive(), "the newcomer went past a grading waiting to measure"
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert measuring_started.wait(10)
    measurer.join(10)
    sharer.join(10)
    assert order[0] == "measured" and "shared" in order  # the newcomer shared only after the measurement


def test_a_hold_lets_go_between_stages_so_others_measure_in_between():
    first = slots.DeviceHold("cpu")
    try:
        first.take(exclusive=False)
        assert not _taken_within(True, 0.3)
        first.let_go()
        assert _taken_within(True, 2.0)
        first.take(exclusive=True)
        assert not _taken_within(False, 0.3)
    finally:
        first.close()
    assert _taken_within(False, 2.0)

"""Which staged input set each call buffer holds, call by call, during timing.

Timed calls run on a few call buffers, each refilled from the staged input sets before every call
and never with the set it held just before. The worker follows this schedule to refill its buffers;
the judge follows the same schedule on its own, from nothing but the request sizes it sent. After
timing, the judge asks for the last outputs of some buffers and compares each with the reference of
the set its own copy says that buffer held: the candidate's process (which could rewrite the
worker's bookkeeping) never names the reference it is checked against.
"""

from __future__ import annotations


class CallRotation:
    def __init__(self, input_sets: int, buffers: int) -> None:
        if input_sets < 1 or buffers < 1:
            raise ValueError(f"a rotation needs at least one input set and one buffer, got {input_sets} and {buffers}")
        self.input_sets = input_sets
        self.held = [slot % input_sets for slot in range(buffers)]
        """The input set each buffer holds now (at staging: set ``slot mod input_sets``)."""
        self._next = buffers
        self.last_timed: dict[int, int] = {}
        """Buffer -> the input set it held at its last timed call."""

    @property
    def buffers(self) -> int:
        return len(self.held)

    def refill(self, slot: int) -> int:
        """The input set ``slot`` takes for its next call: the next one in turn, skipped once if it
        is the one the buffer already holds (so a buffer never sees the same values twice in a row)."""
        item = self._next % self.input_sets
        if item == self.held[slot] and self.input_sets > 1:
            item = (item + 1) % self.input_sets
        self._next = item + 1
        self.held[slot] = item
        return item

    def timed_request(self, reps: int) -> list[tuple[int, int]]:
        """The (buffer, input set) of each call of one timing request of ``reps`` calls, which
        starts again at buffer 0; recorded as those buffers' last timed calls."""
        calls = []
        for i in range(reps):
            slot = i % self.buffers
            item = self.refill(slot)
            self.last_timed[slot] = item
            calls.append((slot, item))
        return calls

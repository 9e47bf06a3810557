"""Which inputs each call buffer holds, call by call, during timing.

Timed calls run on a few call buffers. Before every timed call its buffer is refilled with a fresh
input set, drawn from a seed that exists only for that call: derived from a key the judge makes up
for each timing request and sends with it, so no timed call sees values the solution has seen
before (in its correctness checks, its warm-up, another timed call) or could derive from the
public seed. A solution that memoizes outputs by input content (a hash of a prefix, a strided
sample, the whole input) therefore never hits its cache while it is timed (issue 13). The profiled
call and the wall-clock calls draw their inputs the same way; only the warm-up runs on the staged
input sets, which also fill the call buffers at staging (``held``).

The worker follows this schedule to refill its buffers; the judge follows the same schedule on its
own, from nothing but the requests it sent. After timing, the judge asks for the last outputs of
some buffers and compares each with the reference of the inputs its own copy says that buffer
held: the candidate's process (which could rewrite the worker's bookkeeping) never names the
reference it is checked against.
"""

from __future__ import annotations

import hashlib


def call_seed(request_key: int, call: int) -> int:
    """The seed of the inputs of timed call ``call`` of the request sent with ``request_key``."""
    digest = hashlib.sha256(f"timed:{request_key}:{call}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


class CallRotation:
    def __init__(self, input_sets: int, buffers: int) -> None:
        if input_sets < 1 or buffers < 1:
            raise ValueError(f"a rotation needs at least one input set and one buffer, got {input_sets} and {buffers}")
        # The staged input set each buffer is filled with at staging: set ``slot mod input_sets``.
        self.held = [slot % input_sets for slot in range(buffers)]
        # Buffer -> the seed of the inputs it held at its last timed call.
        self.last_timed: dict[int, int] = {}

    @property
    def buffers(self) -> int:
        return len(self.held)

    def timed_request(self, reps: int, request_key: int) -> list[tuple[int, int]]:
        """The (buffer, input seed) of each call of one timing request of ``reps`` calls, which
        starts again at buffer 0; recorded as those buffers' last timed calls."""
        calls = []
        for i in range(reps):
            slot = i % self.buffers
            seed = call_seed(request_key, i)
            self.last_timed[slot] = seed
            calls.append((slot, seed))
        return calls

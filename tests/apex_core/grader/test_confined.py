"""The channel between Apex and a confined child (``grader/isolation/confined.py``): every reply must
repeat the nonce of the request it answers, so code in the child that writes the worker's messages itself
(a forged timing, a reply written before the request) ends the child instead of being believed
(issue 28, class 2). An honest child is the control: the same channel answers it."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from apex_core.grader.isolation.confined import ChildFailed, ConfinedChild

CHILD = '''
import sys

from apex_core.grader.isolation import wire
from apex_core.grader.isolation.confined import ParentChannel

channel, (mode,) = ParentChannel.from_argv(sys.argv[1:])
if mode == "ahead":  # a timing written before any request, with a nonce it had to guess
    wire.send(channel.write_fd, {"op": "step", "seconds": 1e-9, "nonce": "0" * 32})
while (request := channel.receive()) is not None:
    if mode == "honest":
        channel.reply({"echo": request["op"]})
    elif mode == "wrong":  # the right message under a nonce of its own making
        wire.send(channel.write_fd, {"echo": request["op"], "seconds": 1e-9, "nonce": "f" * 32})
    elif mode == "bare":  # the right message with no nonce at all
        wire.send(channel.write_fd, {"echo": request["op"], "seconds": 1e-9})
'''


@pytest.fixture(scope="module")
def child_module(tmp_path_factory) -> Iterator[str]:
    """The child's module in a folder every user can read: confined as root, the child runs as
    another user and must still import it."""
    folder = Path(tempfile.mkdtemp(prefix="apex-confined-test-"))
    folder.chmod(0o755)
    (folder / "apex_test_channel_child.py").write_text(CHILD)
    (folder / "apex_test_channel_child.py").chmod(0o644)
    yield str(folder)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def child(child_module, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (child_module, os.environ.get("PYTHONPATH", "")) if p))
    started: list[ConfinedChild] = []

    def start(mode: str) -> ConfinedChild:
        started.append(ConfinedChild("apex_test_channel_child", [mode]))
        return started[-1]

    yield start
    for each in started:
        each.close()


def test_an_honest_child_is_answered_over_the_channel(child):
    with child("honest") as honest:
        assert honest.request({"op": "step"}, timeout_s=60) == {"echo": "step"}
        assert honest.request({"op": "again"}, timeout_s=60) == {"echo": "again"}


@pytest.mark.parametrize("mode", ["wrong", "bare", "ahead"])
def test_a_reply_without_this_requests_nonce_ends_the_child_and_is_not_believed(child, mode):
    forger = child(mode)
    with pytest.raises(ChildFailed) as failed:
        forger.request({"op": "step"}, timeout_s=60)
    assert failed.value.kind == "forged", failed.value
    assert "did not carry this request's nonce" in str(failed.value)
    assert forger.process.poll() is not None, "the forging child was left running"

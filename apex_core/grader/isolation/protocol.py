"""The requests the judge sends a worker: one typed message per operation, used by both sides.

The judge builds a request object and the worker parses the header it receives back into the same
class, so a field renamed on one side fails at once in the tests instead of being read as a
default on the other. Headers stay plain JSON (``wire``); the nonce that pairs a reply with its
request is added by the channel, not here. Replies are the worker's dicts, read by the judge.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar


class ProtocolError(ValueError):
    """A header that is no request of this protocol (unknown op, missing or mistyped field)."""


@dataclass(frozen=True)
class Request:
    op: ClassVar[str] = ""

    def header(self) -> dict[str, Any]:
        """The JSON header that carries this request."""
        values = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}
        return {"op": self.op, **values}


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Init(Request):
    """The first request: import the array library, create the device context, note the timing core."""

    op: ClassVar[str] = "init"
    library: str
    device: str
    cpu: int | None = None


@dataclass(frozen=True)
class Load(Request):
    """Import a solution (or our baseline) from the worker's scratch and bind its entry point."""

    op: ClassVar[str] = "load"
    solution_path: str
    entry_point: str
    output_args: tuple[int, ...] = ()
    compile_cache: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    """The task's input generator: ``ref``, ``dtype``, ``params``."""


@dataclass(frozen=True)
class Call(Request):
    """One checked call on the inputs of ``seed``; ``strided`` arguments as row-strided views."""

    op: ClassVar[str] = "call"
    shape: dict[str, int]
    seed: int
    strided: tuple[int, ...] = ()
    digest_key: int = 0


@dataclass(frozen=True)
class Stage(Request):
    """Draw the staged input sets of a timed shape and allocate the call buffers."""

    op: ClassVar[str] = "stage"
    shape: dict[str, int]
    seeds: tuple[int, ...]
    buffers: int = 3


@dataclass(frozen=True)
class Keep(Request):
    """Keep the current stage under ``name`` (calibration to timing)."""

    op: ClassVar[str] = "keep"
    name: str


@dataclass(frozen=True)
class Select(Request):
    """Take up the stage kept as ``name`` again."""

    op: ClassVar[str] = "select"
    name: str


@dataclass(frozen=True)
class Warmup(Request):
    op: ClassVar[str] = "warmup"
    min_calls: int
    min_seconds: float


@dataclass(frozen=True)
class Time(Request):
    """``reps`` timed calls; their fresh inputs' seeds derive from ``request_key`` (``rotation``)."""

    op: ClassVar[str] = "time"
    reps: int
    request_key: int
    flush_bytes: int = 0
    cover_ns: int = 0


@dataclass(frozen=True)
class TimedOutputs(Request):
    """The last outputs of the call buffers the judge picked."""

    op: ClassVar[str] = "timed_outputs"
    slots: tuple[int, ...]


@dataclass(frozen=True)
class Profile(Request):
    """One call under the profiler, on fresh inputs of ``request_key``."""

    op: ClassVar[str] = "profile"
    request_key: int


@dataclass(frozen=True)
class WallCheck(Request):
    """Calls checked against the host's wall clock, on fresh inputs of ``request_key``."""

    op: ClassVar[str] = "wall_check"
    request_key: int
    calls: int = 10
    cover_ns: int = 0


@dataclass(frozen=True)
class Release(Request):
    """Let go of everything staged (input sets, call buffers, kept stages, the flush buffer) and
    hand the device memory cached for them back to the driver: a worker going idle between
    gradings keeps its context and loaded code, not a task's inputs."""

    op: ClassVar[str] = "release"


@dataclass(frozen=True)
class Exit(Request):
    op: ClassVar[str] = "exit"


REQUESTS: dict[str, type[Request]] = {
    kind.op: kind for kind in (
        Init, Load, Call, Stage, Keep, Select, Warmup, Time, TimedOutputs, Profile, WallCheck, Release, Exit
    )
}


def parse(header: dict[str, Any]) -> Request:
    """The request a received header carries; a ProtocolError names what is wrong with it."""
    op = header.get("op")
    kind = REQUESTS.get(op) if isinstance(op, str) else None
    if kind is None:
        raise ProtocolError(f"unknown op {op!r}")
    hints = typing.get_type_hints(kind)
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(kind):
        if spec.name not in header:
            if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                raise ProtocolError(f"'{op}' lacks its field '{spec.name}'")
            continue
        try:
            values[spec.name] = _convert(header[spec.name], hints[spec.name])
        except (TypeError, ValueError):
            raise ProtocolError(f"'{op}' field '{spec.name}' is not a {hints[spec.name]}") from None
    return kind(**values)


def _convert(value: Any, hint: Any) -> Any:
    """``value`` from JSON as the field's type: ints, floats, strings, int tuples, dicts, optionals."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        return _convert(value, next(a for a in args if a is not type(None)))
    if origin is tuple:
        return tuple(_convert(v, args[0]) for v in value)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise TypeError("not an object")
        return {str(k): (_convert(v, args[1]) if args and args[1] is not Any else v) for k, v in value.items()}
    if hint is bool:
        return bool(value)
    if hint in (int, float, str):
        if isinstance(value, (dict, list)):
            raise TypeError("not a scalar")
        return hint(value)
    return value

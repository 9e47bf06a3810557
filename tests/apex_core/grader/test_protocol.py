"""The judge's requests survive the trip through a JSON header as the same typed objects."""

import json

import pytest

from apex_core.grader.isolation import protocol

EXAMPLES = [
    protocol.Init(library="torch", device="cuda:1", cpu=15),
    protocol.Load(solution_path="/s/solution.py", entry_point="gemm", output_args=(2,), compile_cache=None,
                  inputs={"ref": "apex_core.kernels.x:make", "dtype": "bfloat16", "params": {"eps": 1e-5}}),
    protocol.Call(shape={"tokens": 4, "hidden": 4096}, seed=7, strided=(0,), digest_key=2**61),
    protocol.Stage(shape={"rows": 16}, seeds=(1, 2, 3), buffers=8),
    protocol.Keep(name="ab12-0"),
    protocol.Select(name="ab12-0"),
    protocol.Warmup(min_calls=10, min_seconds=0.025),
    protocol.Time(reps=32, request_key=5, flush_bytes=1 << 29, cover_ns=50_000),
    protocol.TimedOutputs(slots=(0, 4)),
    protocol.Profile(request_key=9),
    protocol.WallCheck(request_key=11, calls=10, cover_ns=60_000),
    protocol.Release(),
    protocol.Exit(),
]


def test_every_kind_of_request_has_an_example_here():
    assert {type(r) for r in EXAMPLES} == set(protocol.REQUESTS.values())


@pytest.mark.parametrize("request_", EXAMPLES, ids=lambda r: r.op)
def test_a_request_parses_back_from_its_json_header_unchanged(request_):
    assert protocol.parse(json.loads(json.dumps(request_.header()))) == request_


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ({"op": "launch"}, "unknown op 'launch'"),
        ({}, "unknown op None"),
        ({"op": "time", "reps": 3}, "'time' lacks its field 'request_key'"),
        ({"op": "time", "reps": [3], "request_key": 1}, "'time' field 'reps'"),
        ({"op": "stage", "shape": [4], "seeds": [1]}, "'stage' field 'shape'"),
    ],
)
def test_a_header_that_is_no_request_is_refused_with_what_is_wrong(header, message):
    with pytest.raises(protocol.ProtocolError, match=message.replace("(", r"\(")):
        protocol.parse(header)

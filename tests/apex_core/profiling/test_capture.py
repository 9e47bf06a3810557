import json

import pytest
import torch
from torch import nn

from apex_core.errors import ApexUserError
from apex_core.profiling import capture


class RMSNorm(nn.Module):
    """The shape of a model's RMSNorm: on the CPU it runs as pow, mean, add, rsqrt and mul ops."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = RMSNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


@pytest.fixture(scope="module")
def step():
    torch.manual_seed(0)
    block = Block(128).eval()
    x = torch.randn(32, 128)

    def run() -> None:
        with torch.no_grad():
            block(x)

    return run


def test_on_the_cpu_a_modules_ops_form_one_row_named_after_its_class(step, tmp_path):
    result = capture(step, calls=2, warmup=1, device="cpu", trace_dir=tmp_path)
    rows = {record.name: record for record in result.kernels}
    norm = rows["nn.Module: RMSNorm"]
    assert norm.module == "RMSNorm" and norm.calls == 2
    assert {"aten::pow", "aten::mean", "aten::rsqrt"} <= set(norm.ops)
    assert norm.input_shapes == [[[32, 128]]]
    assert "aten::pow" not in rows
    assert rows["nn.Module: Linear"].calls == 4 and "aten::addmm" in rows["nn.Module: Linear"].ops


def test_grouped_by_op_the_top_rows_are_the_blocks_real_ops_with_their_modules(step):
    result = capture(step, calls=2, device="cpu", cpu_grouping="op")
    assert "aten::addmm" in [record.name for record in result.kernels[:3]]
    addmm = next(record for record in result.kernels if record.name == "aten::addmm")
    assert addmm.module == "Linear" and addmm.calls == 4
    assert [[512], [32, 128], [128, 512], [], []] in addmm.input_shapes
    pow_row = next(record for record in result.kernels if record.name == "aten::pow")
    assert pow_row.module == "RMSNorm"
    assert not any(record.name.startswith(("nn.Module", "ProfilerStep", "[memory]")) for record in result.kernels)


def test_shares_sum_to_one_and_the_total_is_the_tables_time(step):
    result = capture(step, calls=2, device="cpu")
    assert sum(record.share for record in result.kernels) == pytest.approx(1.0)
    assert result.total_time_us == pytest.approx(sum(record.total_time_us for record in result.kernels))
    assert result.kernels == sorted(result.kernels, key=lambda record: -record.total_time_us)


def test_the_profilers_overhead_is_reported_from_profiled_and_unprofiled_wall_times(step):
    result = capture(step, calls=2, device="cpu")
    assert result.profiled_wall_s and result.profiled_wall_s > 0
    assert result.unprofiled_wall_s and result.unprofiled_wall_s > 0
    assert result.overhead == pytest.approx(result.profiled_wall_s / result.unprofiled_wall_s - 1)
    assert result.profiled_calls == 2 and result.device == "cpu" and result.source == "torch.profiler"


def test_the_chrome_trace_is_json_with_trace_events_and_the_module_ranges(step, tmp_path):
    result = capture(step, calls=1, device="cpu", trace_dir=tmp_path)
    assert result.trace_path == str(tmp_path / "trace.json")
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    names = {event.get("name") for event in events}
    assert "aten::addmm" in names and "nn.Module: RMSNorm" in names


def test_warmup_calls_are_not_recorded():
    calls = []

    def counted() -> None:
        calls.append(1)
        torch.ones(4).sum()

    result = capture(counted, calls=2, warmup=3, device="cpu", cpu_grouping="op")
    assert len(calls) == 3 + 2 + 2  # warm-up, unprofiled, profiled
    assert next(record for record in result.kernels if record.name == "aten::sum").calls == 2


def test_without_module_attribution_ops_stand_alone_and_a_note_says_so(step):
    result = capture(step, calls=1, device="cpu", attribute_modules=False)
    assert all(record.module is None for record in result.kernels)
    assert any("module attribution was off" in note for note in result.notes)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"calls": 0}, "calls must be at least 1"), ({"warmup": -1}, "warmup must be 0 or more"), ({"cpu_grouping": "layer"}, "unknown CPU grouping")],
)
def test_bad_arguments_are_one_line_user_errors(kwargs, message):
    with pytest.raises(ApexUserError, match=message):
        capture(lambda: None, device="cpu", **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_a_gpu_where_there_is_none_is_a_user_error():
    with pytest.raises(ApexUserError, match="torch sees no CUDA or ROCm GPU"):
        capture(lambda: None, device="cuda")
    with pytest.raises(ApexUserError, match="torch sees no CUDA or ROCm GPU"):
        capture(lambda: None, device="cuda:1")


def test_an_unknown_device_name_is_a_user_error_that_lists_the_valid_ones():
    with pytest.raises(ApexUserError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
        capture(lambda: None, device="gpu0")


@pytest.mark.gpu
def test_on_a_gpu_the_table_lists_device_kernels_with_their_launching_op_and_module(tmp_path):
    block = Block(1024).cuda().to(torch.bfloat16).eval()
    x = torch.randn(256, 1024, device="cuda", dtype=torch.bfloat16)

    def run() -> None:
        with torch.no_grad():
            block(x)

    result = capture(run, calls=3, warmup=2, device="cuda", trace_dir=tmp_path)
    assert result.device == "cuda" and result.kernels
    assert all(record.device == "cuda" for record in result.kernels)
    assert sum(record.share for record in result.kernels) == pytest.approx(1.0)
    gemm = next(record for record in result.kernels if record.module == "Linear")
    assert gemm.launch_op and gemm.launch_op.startswith("aten::")
    assert gemm.calls % 3 == 0
    assert any(record.module == "RMSNorm" for record in result.kernels)
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert any(event.get("cat") == "kernel" for event in events)


class NumpyNorm(nn.Module):
    """A norm whose work is NumPy, as cpu-mini's task norm is: no aten op carries its time."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import time

        array = x.numpy()
        time.sleep(0.1)  # stands for the NumPy work, and makes its length certain (a 64x64 Linear on a
        # busy shared core has taken 15 ms a call)
        return torch.from_numpy(array / (abs(array).max() + 1.0))


def test_a_modules_row_holds_its_own_time_even_where_no_aten_op_does_the_work():
    block = nn.Sequential(NumpyNorm(), nn.Linear(64, 64)).eval()
    x = torch.randn(8, 64)

    def run() -> None:
        with torch.no_grad():
            block(x)

    result = capture(run, calls=2, warmup=1, device="cpu")
    rows = {record.name: record for record in result.kernels}
    assert rows["nn.Module: NumpyNorm"].total_time_us >= 2 * 100_000
    assert rows["nn.Module: NumpyNorm"].share > rows["nn.Module: Linear"].share
    # The Sequential's own row excludes its children's time: only its few microseconds of Python.
    assert rows["nn.Module: Sequential"].total_time_us < rows["nn.Module: NumpyNorm"].total_time_us

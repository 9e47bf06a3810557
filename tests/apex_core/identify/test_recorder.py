"""record_calls sees the shapes, dtypes and strides a model really passes, and puts everything back."""

import sys
import textwrap

import pytest
import torch

from apex_core.errors import ApexUserError
from apex_core.identify import CallSite, record_calls


class TinyRMSNorm(torch.nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight


class TinyModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.norms = torch.nn.ModuleList([TinyRMSNorm(8), TinyRMSNorm(8)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for norm in self.norms:
            x = norm(self.proj(x))
        return x


def test_module_forwards_are_recorded_with_shape_dtype_and_stride():
    model = TinyModel()
    with record_calls(model) as recording:
        model(torch.randn(3, 8))
    call = recording.calls["TinyRMSNorm"][0]
    assert call.args[0].name == "x"
    assert (call.args[0].tensor.shape, call.args[0].tensor.dtype, call.args[0].tensor.stride) == ([3, 8], "float32", [8, 1])
    assert "Linear" not in recording.calls  # torch.nn's own layers are library calls, not patch targets
    assert recording.module_sources["TinyRMSNorm"].path == __file__


def test_only_the_first_calls_are_kept_and_the_model_is_left_as_it_was():
    model = TinyModel()
    with record_calls(model, max_calls=3) as recording:
        for _ in range(4):
            model(torch.randn(2, 8))
    assert len(recording.calls["TinyRMSNorm"]) == 3
    assert all("forward" not in vars(norm) for norm in model.norms)
    assert torch.allclose(model(torch.ones(1, 8)), model.norms[1](model.proj(model.norms[0](model.proj(torch.ones(1, 8))))))


def test_a_function_site_is_wrapped_where_its_module_defines_it_and_restored(tmp_path, monkeypatch):
    (tmp_path / "apex_toy_ops.py").write_text(textwrap.dedent('''
        def scale(x, factor):
            return x * factor

        def use(x):
            return scale(x, 2.0)
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    import apex_toy_ops

    original = apex_toy_ops.scale
    with record_calls(TinyModel(), sites=[CallSite(kind="function", target="apex_toy_ops:scale")]) as recording:
        apex_toy_ops.use(torch.zeros(4, 2).t())
    call = recording.calls["apex_toy_ops:scale"][0]
    assert call.args[0].tensor.stride == [1, 2] and call.args[1].value == "2.0"
    assert apex_toy_ops.scale is original
    sys.modules.pop("apex_toy_ops", None)


def test_a_site_that_does_not_resolve_is_a_one_line_error():
    with pytest.raises(ApexUserError, match="has no attribute"):
        with record_calls(TinyModel(), sites=[CallSite(kind="function", target="math:no_such_function")]):
            pass
    with pytest.raises(ApexUserError, match="package.module:attribute"):
        with record_calls(TinyModel(), sites=[CallSite(kind="function", target="math.sqrt")]):
            pass

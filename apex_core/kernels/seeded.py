"""Seeded input draws made on the device the inputs are for.

Task inputs reach gigabytes (a fused-MoE shape holds 16 experts of 4096 x 7168 bf16 weights).
Drawn on the CPU and copied over, one input set took seconds and a task's verification minutes;
drawn by the device's own generator they take milliseconds. Every input generator takes its
generator from ``generator`` and the grader calls it inside ``drawing_on``, which makes the device
the default for every tensor the generator creates, so no generator needs device arguments.

The values depend on the seed and the kind of device: the CPU interpreter check and a GPU grading
see different (equally random) inputs for one seed, while the judge and a worker on the same kind
of GPU draw identical ones, which is what lets a worker draw its own inputs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


def generator(seed: int) -> Any:
    """A torch generator on the current default device, seeded with ``seed``."""
    import torch

    return torch.Generator(device=torch.get_default_device()).manual_seed(seed)


@contextlib.contextmanager
def drawing_on(device: str) -> Iterator[None]:
    """Within this block, tensors created without a device are created on ``device`` (a GPU)."""
    if not device.startswith("cuda"):
        yield
        return
    import torch

    with torch.device(device):
        yield


ROW_PADDING = 64
"""Elements between the end of one row of a row-strided input and the start of the next (128
bytes in bf16: the rows stay 16-byte aligned, as slices of a fused projection are)."""


def row_strided(value: Any) -> Any:
    """The same values as ``value``, as a view whose rows are ROW_PADDING elements further apart."""
    if not hasattr(value, "stride") or value.dim() < 2:
        return value
    import torch

    padded = torch.empty((*value.shape[:-1], value.shape[-1] + ROW_PADDING), dtype=value.dtype, device=value.device)
    padded[..., value.shape[-1] :].zero_()
    view = padded[..., : value.shape[-1]]
    view.copy_(value)
    return view


def draw(make_inputs: Callable[..., Any], shape: dict[str, int], dtype: str, seed: int, device: str,
         params: dict[str, Any], strided: tuple[int, ...] = ()) -> list[Any]:
    """One input set of a task, drawn on ``device``; the arguments in ``strided`` as row-strided views."""
    with drawing_on(device):
        values = list(make_inputs(shape, dtype, seed, device, params))
        return [row_strided(v) if i in strided else v for i, v in enumerate(values)]

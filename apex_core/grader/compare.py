"""Comparing a solution's output with the reference under a task's tolerance.

NaN and Inf must appear where the reference has them, every finite element must satisfy
|out − ref| ≤ atol + rtol·|ref|, and the report names the worst element so an agent can act on it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel

from apex_core.tasks.schema import Task, Tolerance


class Comparison(BaseModel):
    passed: bool
    max_abs_error: float | None = None
    max_error_index: list[int] | None = None
    message: str = ""


def as_float64(value: Any) -> np.ndarray:
    """An array or tensor as a float64 NumPy array on the host."""
    if isinstance(value, np.ndarray):
        return value.astype(np.float64)
    import torch

    return value.detach().to("cpu", torch.float64).numpy()


def dtype_name(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return str(value.dtype)
    return str(value.dtype).removeprefix("torch.")


def _unravel(flat_index: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat_index, shape)] if shape else []


def _float64_tensors(output: Any, reference: Any) -> tuple[Any, Any]:
    """Both as float64 torch tensors on the reference's device (the host for NumPy arrays).

    Large GPU outputs are compared where they already are, instead of being converted to float64
    NumPy arrays on the host, which dominated the time of a correctness check; NumPy outputs go
    through the same code so that there is one set of rules.
    """
    import torch

    def convert(value: Any, device: Any) -> Any:
        if isinstance(value, np.ndarray):
            return torch.from_numpy(value.astype(np.float64))
        # Move first, widen on the device: widening on the host first makes four times the bytes
        # cross the bus.
        return value.detach().to(device=device).to(dtype=torch.float64)

    device = "cpu" if isinstance(reference, np.ndarray) else reference.device
    return convert(output, device), convert(reference, device)


def compare_outputs(output: Any, reference: Any, tolerance: Tolerance) -> Comparison:
    """Check shape, dtype and values of ``output`` against ``reference``."""
    import torch

    if tuple(output.shape) != tuple(reference.shape):
        return Comparison(passed=False, message=f"shape {tuple(output.shape)}, expected {tuple(reference.shape)}")
    if dtype_name(output) != dtype_name(reference):
        return Comparison(passed=False, message=f"dtype {dtype_name(output)}, expected {dtype_name(reference)}")
    out, ref = _float64_tensors(output, reference)
    shape = tuple(out.shape)
    if out.numel() == 0:
        return Comparison(passed=True, max_abs_error=0.0)
    nan_mismatch = torch.isnan(out) != torch.isnan(ref)
    inf_mismatch = (torch.isinf(out) | torch.isinf(ref)) & (out != ref) & ~torch.isnan(ref)
    bad_special = (nan_mismatch | inf_mismatch).flatten()
    if bool(bad_special.any()):
        index = _unravel(int(torch.argmax(bad_special.to(torch.uint8))), shape)
        return Comparison(
            passed=False,
            max_error_index=index,
            message=f"NaN/Inf at {index} does not match the reference ({out[tuple(index)].item()} vs {ref[tuple(index)].item()})",
        )
    finite = torch.isfinite(ref)
    error = torch.where(finite, (out - ref).abs(), torch.zeros((), dtype=torch.float64, device=ref.device))
    error = torch.nan_to_num(error, nan=0.0, posinf=0.0)
    allowed = tolerance.atol + tolerance.rtol * ref.abs()
    flat_error = error.flatten()
    worst = int(torch.argmax(flat_error))
    index = _unravel(worst, shape)
    max_error = float(flat_error[worst])
    violations = ((error > allowed) & finite).flatten()
    if bool(violations.any()):
        first = _unravel(int(torch.argmax(violations.to(torch.uint8))), shape)
        count = int(violations.sum())
        return Comparison(
            passed=False,
            max_abs_error=max_error,
            max_error_index=index,
            message=(
                f"{count} of {out.numel()} elements outside atol={tolerance.atol:g}, rtol={tolerance.rtol:g}; "
                f"first at {first}: {out[tuple(first)].item():.6g} vs {ref[tuple(first)].item():.6g}; "
                f"largest error {max_error:.3g} at {index}"
            ),
        )
    return Comparison(passed=True, max_abs_error=max_error, max_error_index=index)


def as_output_list(value: Any) -> list[Any]:
    """A reference's result as a list of outputs: one array, or the arrays of a tuple or list."""
    return list(value) if isinstance(value, (tuple, list)) else [value]


def compare_all(outputs: list[Any], expected: list[Any], task: Task) -> Comparison:
    """Compare each output with its reference under the tolerance of its dtype.

    With several outputs the message names which one failed, and the reported error is the
    largest over all of them, so the report stays one Comparison.
    """
    if len(outputs) != len(expected):
        return Comparison(passed=False, message=f"{len(outputs)} outputs, expected {len(expected)}")
    worst: Comparison | None = None
    for position, (output, reference) in enumerate(zip(outputs, expected)):
        comparison = compare_outputs(output, reference, task.tolerance_for(dtype_name(reference)))
        if len(expected) > 1:
            comparison = comparison.model_copy(update={"message": f"output {position}: {comparison.message}".rstrip(": ")})
        if not comparison.passed:
            return comparison
        if worst is None or (comparison.max_abs_error or 0.0) > (worst.max_abs_error or 0.0):
            worst = comparison
    assert worst is not None
    return worst.model_copy(update={"message": ""})


def inputs_unchanged(before: list[Any], after: list[Any], skip: tuple[int, ...] = ()) -> bool:
    """Whether the call left every array argument bit-identical (``skip``: the declared outputs)."""
    for position, (old, new) in enumerate(zip(before, after)):
        if position in skip:
            continue
        if isinstance(old, np.ndarray):
            if not (isinstance(new, np.ndarray) and old.shape == new.shape and old.tobytes() == new.tobytes()):
                return False
        elif hasattr(old, "shape") and hasattr(old, "dtype"):
            import torch

            if not (isinstance(new, torch.Tensor) and old.shape == new.shape and old.dtype == new.dtype):
                return False
            if not torch.equal(_raw_bytes(old), _raw_bytes(new.to(old.device))):
                return False
    return True


def _raw_bytes(tensor: Any) -> Any:
    """The tensor's bits as uint8, so NaNs compare equal to themselves; on its own device (a
    worker compares gigabyte inputs where they are, without copying them to the host)."""
    import torch

    flat = tensor.detach().contiguous()
    return flat if flat.dtype == torch.bool else flat.view(torch.uint8)

"""Corrections to Triton's CPU interpreter, applied wherever Triton code runs interpreted.

CI and GPU-less machines check Triton kernels under ``TRITON_INTERPRET=1``. Triton 3.9's
interpreter gets three things wrong that correct kernels rely on:

- ``tl.dot`` on bf16 operands multiplies the raw 16-bit storage as integers (bf16 lives in
  uint16 arrays there), so every bf16 matmul comes out as garbage (triton-lang/triton#11584);
- fp32/fp16/bf16 -> fp8 casts add the rounding bit to the 3-bit mantissa without carrying into the
  exponent (125.7 becomes 64, not 128) and round ties away from zero;
- ``@triton.autotune`` asks the GPU driver for a benchmarker, so any autotuned kernel raises
  "0 active drivers" on a machine without a GPU.

The first two are fixed by routing the operation through exact conversions: bf16 bits widened to
fp32 for the dot, and torch's round-to-nearest-even, saturating conversion for fp8. Autotuning
runs every config once (so a config that fails still fails) and keeps the first: interpreted
speed says nothing about which config is fastest. Only the interpreter is
touched; compiled kernels on a GPU never see this module. It runs in trusted code (the
interpreter check, and the grader's worker before it imports a solution).
"""

from __future__ import annotations

from typing import Any

_APPLIED = [False]


def _bf16_bits_to_float32(bits: Any) -> Any:
    import numpy as np

    widened = np.ascontiguousarray(bits).view(np.uint16).astype(np.uint32) << 16
    return widened.view(np.float32)


def _run_once_without_timing(kernel_call: Any, quantiles: Any = None) -> list[float]:
    """The autotuner's benchmark under the interpreter: one call, every config timed alike."""
    kernel_call()
    return [0.0, 0.0, 0.0]


def apply() -> None:
    """Patch the interpreter once per process; a no-op when Triton is absent."""
    if _APPLIED[0]:
        return
    try:
        import numpy as np
        import torch
        import triton.language as tl
        from triton.runtime import autotuner, interpreter
    except ImportError:
        return
    original_convert = interpreter._convert_float
    torch_fp8 = {tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2}
    numpy_float = {tl.float32: np.float32, tl.float16: np.float16}

    def convert_float(values: Any, input_dtype: Any, output_dtype: Any, rounding_mode: Any) -> Any:
        if output_dtype in torch_fp8 and input_dtype in (tl.float32, tl.float16, tl.bfloat16):
            if input_dtype == tl.bfloat16:
                wide = torch.from_numpy(_bf16_bits_to_float32(values))
            else:
                wide = torch.from_numpy(np.ascontiguousarray(values).view(numpy_float[input_dtype])).float()
            limit = torch.finfo(torch_fp8[output_dtype]).max
            narrowed = wide.clamp(-limit, limit).to(torch_fp8[output_dtype])  # hardware casts saturate
            return narrowed.view(torch.uint8).numpy().reshape(np.shape(values))
        return original_convert(values, input_dtype, output_dtype, rounding_mode)

    builder = interpreter.InterpreterBuilder
    original_dot = builder.create_dot

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        if a.dtype == tl.bfloat16 or b.dtype == tl.bfloat16:
            a_data = _bf16_bits_to_float32(a.data) if a.dtype == tl.bfloat16 else a.data.astype(np.float32)
            b_data = _bf16_bits_to_float32(b.data) if b.dtype == tl.bfloat16 else b.data.astype(np.float32)
            return interpreter.TensorHandle(np.matmul(a_data, b_data, dtype=d.data.dtype) + d.data, d.dtype.scalar)
        return original_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    interpreter._convert_float = convert_float
    builder.create_dot = create_dot
    autotuner.Autotuner.do_bench = property(lambda self: _run_once_without_timing)
    _APPLIED[0] = True

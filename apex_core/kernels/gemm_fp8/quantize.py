"""Quantizing realistic fp32 tensors to float8_e4m3fn with the scale layouts fp8 checkpoints use.

Scales are dequantization multipliers (value = fp8 * scale), chosen so each group's largest
magnitude maps to e4m3fn's largest finite value, 448, as vLLM's dynamic quantization and
DeepSeek's act_quant / weight_scale_inv do. Large tensors are drawn and quantized in row chunks so
the fp32 intermediate never exceeds a few hundred megabytes.
"""

from __future__ import annotations

from typing import Any

FP8_MAX = 448.0
"""Largest finite float8_e4m3fn value."""
_CHUNK_ROWS = 2048


def _quantize_groups(values: Any, group_rows: int, group_cols: int) -> tuple[Any, Any]:
    """(fp8 values, fp32 scales) with one scale per (group_rows x group_cols) block of ``values``."""
    import torch

    rows, cols = values.shape
    row_groups, col_groups = -(-rows // group_rows), -(-cols // group_cols)
    padded = torch.zeros(row_groups * group_rows, col_groups * group_cols, dtype=torch.float32)
    padded[:rows, :cols] = values
    blocks = padded.view(row_groups, group_rows, col_groups, group_cols)
    scales = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / FP8_MAX
    quantized = (blocks / scales[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX)
    quantized = quantized.reshape(padded.shape)[:rows, :cols].to(torch.float8_e4m3fn)
    return quantized, scales.to(torch.float32)


def random_quantized(
    rows: int, cols: int, group_rows: int, group_cols: int, generator: Any, column_scale: Any = None, std: float = 1.0
) -> tuple[Any, Any]:
    """A (rows, cols) N(0, std²) tensor (times ``column_scale`` per column) quantized by groups.

    ``group_rows`` must divide the chunk of rows drawn at a time (1 and 128 do).
    """
    import torch

    quantized = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    scales = []
    for start in range(0, rows, _CHUNK_ROWS):
        stop = min(rows, start + _CHUNK_ROWS)
        values = torch.randn(stop - start, cols, generator=generator).mul_(std)
        if column_scale is not None:
            values.mul_(column_scale)
        quantized[start:stop], chunk_scales = _quantize_groups(values, group_rows, group_cols)
        scales.append(chunk_scales)
    return quantized, torch.cat(scales)


def activation_channel_scale(cols: int, generator: Any) -> Any:
    """Per-input-channel magnitudes of real activations: log-normal, a few channels much larger."""
    import torch

    return torch.exp(0.5 * torch.randn(cols, generator=generator))

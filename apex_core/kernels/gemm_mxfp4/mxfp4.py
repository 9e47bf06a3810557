"""The MXFP4 weight format of GPT-OSS's experts (OCP Microscaling Formats (MX) v1.0, MXFP4).

A block of 32 consecutive values along K shares one E8M0 scale; each value is FP4 E2M1.

- E2M1 (spec section 5.3.3): sign bit, 2 exponent bits (bias 1), 1 mantissa bit, no inf or NaN.
  The 8 magnitudes are {0, 0.5, 1, 1.5, 2, 3, 4, 6}; code ``c`` (0-15) is ``(-1)^(c >> 3) *
  E2M1_MAGNITUDES[c & 7]``.
- E8M0 (spec section 5.4.1): an unsigned 8-bit biased exponent, value ``2^(e - 127)``; 0xFF is NaN.
- Packing, as GPT-OSS's checkpoint stores ``*_blocks`` (uint8 [..., n, k/32, 16], read as [n, k/2])
  and as Hugging Face transformers unpacks it: byte ``j`` of a row holds value ``2j`` in its LOW
  nibble and value ``2j + 1`` in its HIGH nibble. ``*_scales`` is uint8 [n, k/32].

Every dequantized value (an E2M1 value times a power of two) is exact in fp32 and in bf16 (both
have 8 exponent bits, and E2M1 has one mantissa bit), so dequantizing to bf16 loses nothing.
"""

from __future__ import annotations

from typing import Any

BLOCK = 32
"""Values per shared scale (the MX block size, k per scale)."""
E8M0_BIAS = 127
E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX_EXPONENT = 2
"""emax of E2M1 (6 = 1.5 * 2^2): the spec's shared exponent is floor(log2(amax)) - 2."""


def e2m1_table() -> Any:
    """The 16 codes' values, fp32: codes 8-15 are the negatives (8 is -0.0)."""
    import torch

    magnitudes = torch.tensor(E2M1_MAGNITUDES, dtype=torch.float32)
    return torch.cat([magnitudes, -magnitudes])


def unpack_codes(w_packed: Any) -> Any:
    """uint8 [n, k/2] -> the 4-bit codes int64 [n, k], low nibble first (value 2j is byte j's low nibble)."""
    import torch

    low = (w_packed & 0x0F).to(torch.int64)
    high = (w_packed >> 4).to(torch.int64)
    return torch.stack([low, high], dim=-1).reshape(w_packed.shape[0], -1)


def dequantize(w_packed: Any, w_scale: Any) -> Any:
    """fp32 [n, k]: each code's E2M1 value times 2^(scale - 127) of its 32-wide block, exactly."""
    import torch

    codes = unpack_codes(w_packed)
    values = e2m1_table().to(codes.device)[codes]
    exponents = (w_scale.to(torch.int32) - E8M0_BIAS).repeat_interleave(BLOCK, dim=1)
    return torch.ldexp(values, exponents.to(torch.float32))


def quantize(w: Any) -> tuple[Any, Any]:
    """fp32 [n, k] (k a multiple of 32) -> (packed uint8 [n, k/2], E8M0 scales uint8 [n, k/32]).

    The spec's conversion (section 6.3): shared exponent floor(log2(amax)) - emax(E2M1), then each
    value divided by 2^exponent and rounded to the nearest E2M1 value, clamped to +-6. Ties go to
    the smaller magnitude (the spec rounds them to even); weights drawn from a continuous
    distribution hit a tie with probability zero, and the kernel only decodes, so it does not
    matter here. An all-zero block gets the smallest normal exponent, -126 (E8M0 code 1).
    """
    import torch

    n, k = w.shape
    blocks = w.reshape(n, k // BLOCK, BLOCK)
    amax = blocks.abs().amax(dim=-1)
    tiny = torch.finfo(torch.float32).tiny
    exponent = torch.floor(torch.log2(amax.clamp_min(tiny))) - E2M1_MAX_EXPONENT
    exponent = exponent.clamp(-E8M0_BIAS + 1, E8M0_BIAS)
    scaled = (blocks / torch.exp2(exponent)[..., None]).clamp(-6.0, 6.0)
    magnitudes = torch.tensor(E2M1_MAGNITUDES, dtype=torch.float32)
    distance = (scaled.abs()[..., None] - magnitudes).abs()
    codes = distance.argmin(dim=-1)
    codes = codes + 8 * ((scaled < 0) & (codes > 0)).to(torch.int64)
    codes = codes.reshape(n, k).to(torch.uint8)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    scales = (exponent + E8M0_BIAS).to(torch.uint8)
    return packed.contiguous(), scales.contiguous()

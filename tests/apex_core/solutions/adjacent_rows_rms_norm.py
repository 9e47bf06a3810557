"""A wrong RMSNorm for row-strided inputs: it takes the row length for the row stride."""
import torch, triton, triton.language as tl

@triton.jit
def _row(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float32)  # assumes adjacent rows
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / n + eps) * w
    tl.store(y_ptr + row * n + cols, y.to(y_ptr.dtype.element_ty), mask=mask)

def rms_norm(x, weight, eps):
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK=triton.next_power_of_2(x.shape[1]))
    return y

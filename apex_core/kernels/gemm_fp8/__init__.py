"""fp8 (e4m3fn) w8a8 GEMMs of linear layers: y = dequant(x_q) @ dequant(w_q)^T in bf16.

Two scale layouts, one module each:

- ``per_token``: dynamic per-token activation scales (M, 1) and per-output-channel weight scales
  (N, 1), the FP8-dynamic scheme of Llama/Qwen fp8 checkpoints served by vLLM.
- ``block_scaled``: DeepSeek-V3/R1's fine-grained scales: one per token per 128 input channels for
  activations (M, K/128), one per 128x128 weight block (N/128, K/128).

``quantize`` makes realistic quantized inputs (the grader's input generators use it). Accumulation
is fp32 in the references; on Hopper the fp8 tensor cores accumulate with fewer bits, so kernels
promote partial sums into an fp32 accumulator at least every 128-256 K (as DeepSeek's kernels do).
"""

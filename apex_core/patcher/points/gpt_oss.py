"""GPT-OSS-20B's patch points: RMSNorm, the MoE router and the clamped SwiGLU between the expert
GEMMs, in transformers' ``modeling_gpt_oss``.

Every adapter calls the solution through the task's contract and hands anything outside it back
to transformers' own code:

- RMSNorm: ``GptOssRMSNorm.forward`` on (tokens, hidden) rows, bf16 rows and a bf16 weight only
  (the solution computes in fp32 and rounds once, as the model does: ``(weight * x).to(dtype)``);
  a model run in another dtype keeps the stack's norm.
- Router: ``GptOssTopKRouter.forward`` computes the logits with the same ``F.linear`` the model
  uses, hands them to the solution as fp32 (the task's input), and returns what the model expects:
  the logits, the top-k softmax weights cast to the logits' dtype, the expert ids as int64. The
  solution's softmax is taken in fp32, the stack's in the logits' dtype (bf16 for a bf16 model):
  the weights differ by a rounding, and ties at the k-th logit may pick another expert of the same
  logit. A 3-D input or an empty batch keeps the stack's router.
- Clamped SwiGLU: ``GptOssExperts._apply_gate``, which the eager expert loop and
  ``transformers.integrations.moe``'s grouped_mm and batched_mm forwards all call on the
  (rows, 2 x intermediate) gate/up projection, gate at even and up at odd columns. The adapter
  passes the module's own ``alpha`` and ``limit`` (transformers 5.17 fixes them at 1.702 and 7.0,
  5.24 reads them from the config). bf16 rows only (the solution reads each (gate, up) pair of bf16
  as one 32-bit word); another dtype, an odd width or no rows keep the stack's gate. The stack
  computes the gate in the rows' dtype, the solution in fp32 with one rounding.

Written against transformers 5.24 (whose code for these three is the same as 5.17's on the H200,
apart from where alpha and limit come from); checked on the CPU in CI (Triton interpreter, the
tasks' CPU shapes, and a tiny GPT-OSS whose logits through all three match the unpatched model's).
Not yet run on a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apex_core.patcher.points.point import PatchPoint, models_of_family
from apex_core.patcher.points.llama import _reached, _rms_norm_body, _rms_norm_path
from apex_core.tasks.schema import Task

MODELS = models_of_family("gpt-oss")
"""Both gpt-oss sizes: one modeling module."""
TRANSFORMERS = "transformers.models.gpt_oss.modeling_gpt_oss"
BF16_ONLY = "hidden_states.dtype != torch.bfloat16 or self.weight.dtype != torch.bfloat16"
"""The RMSNorm guard; ``torch`` is the target module's own import (the adapter runs in its globals)."""

# --- Router -------------------------------------------------------------------------------------


def _router_body(loader: str) -> str:
    return f'''    {loader.strip()}
    import torch as _apex_torch
    original = GptOssTopKRouter.forward

    def forward(self, hidden_states):
        if hidden_states.dim() != 2 or hidden_states.shape[0] == 0 or not 0 < self.top_k <= self.weight.shape[0]:
            return original(self, hidden_states)  # not this task's contract: the stack's own router
        router_logits = _apex_torch.nn.functional.linear(hidden_states, self.weight, self.bias)
        weights, ids = solution(router_logits.to(_apex_torch.float32).contiguous(), int(self.top_k))
        return router_logits, weights.to(router_logits.dtype), ids.to(_apex_torch.int64)

    forward.__apex_solution__ = solution
    GptOssTopKRouter.forward = forward
'''


def _router_path(module: Any, task: Task, device: str) -> Callable[..., Any]:
    import torch

    router_class = _reached(module, "GptOssTopKRouter", "forward")

    def through_the_model(router_logits: Any, top_k: int) -> Any:
        """The router with an identity weight and no bias: the logits it computes are its input,
        exactly, in fp32 without TF32 (which would round them before the top-k)."""
        experts = router_logits.shape[-1]
        config = module.GptOssConfig(hidden_size=experts, num_local_experts=experts, num_experts_per_tok=top_k)
        router = router_class(config).to(device=router_logits.device, dtype=router_logits.dtype)
        precision = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")
        try:
            with torch.no_grad():
                router.weight.copy_(torch.eye(experts, dtype=router_logits.dtype, device=router_logits.device))
                router.bias.zero_()
                _, scores, ids = router(router_logits)
        finally:
            torch.set_float32_matmul_precision(precision)
        return scores, ids.to(torch.int32)  # the task's ids; the model keeps int64

    return through_the_model


# --- Clamped SwiGLU -----------------------------------------------------------------------------


def _swiglu_body(loader: str) -> str:
    return f'''    {loader.strip()}
    import torch as _apex_torch
    original = GptOssExperts._apply_gate

    def _apply_gate(self, gate_up):
        if gate_up.dtype != _apex_torch.bfloat16 or gate_up.shape[-1] % 2 or gate_up.numel() == 0:
            return original(self, gate_up)  # not this task's contract: the stack's own gate
        width = gate_up.shape[-1]
        out = solution(gate_up.reshape(-1, width).contiguous(), float(self.alpha), float(self.limit))
        return out.reshape(*gate_up.shape[:-1], width // 2)

    _apply_gate.__apex_solution__ = solution
    GptOssExperts._apply_gate = _apply_gate
'''


def _swiglu_path(module: Any, task: Task, device: str) -> Callable[..., Any]:
    import torch

    experts_class = _reached(module, "GptOssExperts", "_apply_gate")

    def through_the_model(x: Any, alpha: float, limit: float) -> Any:
        config = module.GptOssConfig(hidden_size=1, intermediate_size=x.shape[-1] // 2, num_local_experts=1,
                                     swiglu_alpha=alpha, swiglu_limit=limit)
        with torch.device("meta"):  # the expert weights are never used: only the gate runs
            experts = experts_class(config)
        experts.alpha, experts.limit = alpha, limit  # transformers 5.17 fixes them in __init__
        return experts._apply_gate(x)

    return through_the_model


POINTS = (
    PatchPoint(id="transformers.gpt_oss.rms_norm", stack="transformers", kernels=("rms_norm",), models=MODELS,
               module=TRANSFORMERS, description="transformers' GptOssRMSNorm.forward calls the solution on bf16 (tokens, hidden) rows",
               body=_rms_norm_body("GptOssRMSNorm", BF16_ONLY), model_path=_rms_norm_path("GptOssRMSNorm")),
    PatchPoint(id="transformers.gpt_oss.moe_router", stack="transformers", kernels=("moe_router",), models=MODELS,
               module=TRANSFORMERS,
               description="transformers' GptOssTopKRouter.forward: the model's logits GEMM, then the solution's top-k softmax",
               body=_router_body, model_path=_router_path),
    PatchPoint(id="transformers.gpt_oss.swiglu_clamped", stack="transformers", kernels=("swiglu_clamped",), models=MODELS,
               module=TRANSFORMERS,
               description="transformers' GptOssExperts._apply_gate (every experts implementation calls it) calls the solution",
               body=_swiglu_body, model_path=_swiglu_path),
)

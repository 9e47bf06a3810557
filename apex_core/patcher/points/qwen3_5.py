"""Qwen3.5-27B's patch points: the gated delta rule of its Gated DeltaNet layers, in prefill form,
in flash-linear-attention (what ``--kernels fla`` gives the model) and in transformers' own path;
its zero-centered RMSNorm and the SiLU-and-mul of its dense MLP, in transformers' own modules.

transformers resolves ``torch_chunk_gated_delta_rule`` when it imports the model: to fla's
``chunk_gated_delta_rule`` (imported from ``fla.ops.gated_delta_rule``) where fla is installed,
else to its PyTorch reference. The fla point rebinds the name at the end of fla's ``chunk.py``,
before the package re-exports it; the transformers point rebinds transformers' module-level name,
which the layer's forward calls. Decode steps (one token with a state) take the recurrent kernel
and stay the stack's.

The adapter keeps the task's contract: q and k L2-normalized (normalized in fp32 here when the
model asks the kernel to, ``use_qk_l2norm_in_kernel``), a zero fp32 state when the model has none,
the final state returned only when asked for. Calls outside the contract (variable-length batches,
a custom scale, fla's in-kernel gates) stay the stack's. Written against fla 0.6.0 and transformers
5.17's ``modeling_qwen3_5``; checked on the CPU in CI through the transformers point (Triton
interpreter, the task's CPU shapes).

RMSNorm: ``Qwen3_5RMSNorm`` computes ``norm(x.float()) * (1.0 + weight.float())`` and rounds once,
the task's contract exactly (a bf16 weight holding the zero-centered offset, 1 + w formed in fp32).
The task is the decoder layers' input and post-attention norms and the final norm, which the
model calls on (batch, tokens, hidden): the adapter calls the solution on those as (tokens, hidden)
rows, bf16 with a bf16 weight. The same class is the attention's per-head q_norm and k_norm, called
on (batch, tokens, heads, 256): those, and another dtype, keep the stack's norm (a solution graded
at width 5120 need not handle 256). The gated norm of the DeltaNet layers
(``Qwen3_5RMSNormGated``: weight w, not 1 + w, times silu of a gate) is another computation and
stays the stack's.

SiLU-and-mul: ``Qwen3_5MLP`` is Llama's MLP (separate gate and up projections, ``hidden_act``
silu, no bias), so it takes Llama's adapter: gate and up weights fused once into one matrix whose
halves are the parameters' storage, one GEMM, then the solution on the (tokens, 2 x intermediate)
rows, gate half first.

The RMSNorm and SiLU-and-mul points were written against transformers 5.24 (the local venv) and
are checked on the CPU in CI (Triton interpreter, the tasks' CPU shapes, and a tiny Qwen3.5 whose
logits through them and the gated delta rule match the unpatched model's); not yet run on a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apex_core.patcher.points.point import PatchPoint
from apex_core.patcher.points.llama import _rms_norm_path, _swiglu_body, _swiglu_path
from apex_core.tasks.schema import Task

MODELS = ("qwen3-5-27b",)
TRANSFORMERS = "transformers.models.qwen3_5.modeling_qwen3_5"
FLA = "fla.ops.gated_delta_rule.chunk"
FLA_EXPORT = "fla.ops.gated_delta_rule"
OUTSIDE_THE_CONTRACT = ("cu_seqlens", "cu_seqlens_cpu", "chunk_indices", "cp_context", "use_beta_sigmoid_in_kernel",
                        "allow_neg_eigval", "state_v_first", "use_gate_in_kernel", "A_log", "dt_bias")
"""Keyword arguments that change what fla's kernel computes: a call that gives any of them stays the
stack's. Others the model passes along (its attention kwargs, transformers' chunk_size) change
nothing: fla never receives them and the reference ignores them."""


def _body(name: str) -> Callable[[str], str]:
    def body(loader: str) -> str:
        outside = OUTSIDE_THE_CONTRACT
        return f'''    {loader.strip()}
    import functools as _apex_functools
    import torch as _apex_torch
    original = {name}

    def unit(x):
        x32 = x.to(_apex_torch.float32)
        return (x32 * _apex_torch.rsqrt((x32 * x32).sum(dim=-1, keepdim=True) + 1e-6)).to(x.dtype)

    @_apex_functools.wraps(original)
    def gated_delta_rule(q, k, v, g, beta, *args, scale=None, initial_state=None, output_final_state=False,
                         use_qk_l2norm_in_kernel=False, **kwargs):
        if (args or any(kwargs.get(name) is not None and kwargs.get(name) is not False for name in {outside!r}) or q.dim() != 4
                or (scale is not None and abs(scale - q.shape[-1] ** -0.5) > 1e-6)):
            return original(q, k, v, g, beta, *args, scale=scale, initial_state=initial_state,
                            output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                            **kwargs)  # not this task's contract: the stack's own kernel
        if use_qk_l2norm_in_kernel:
            q, k = unit(q), unit(k)
        batch, _, value_heads, d_v = v.shape
        if initial_state is None:
            state = _apex_torch.zeros(batch, value_heads, q.shape[-1], d_v, dtype=_apex_torch.float32, device=v.device)
        else:
            state = initial_state.to(_apex_torch.float32).contiguous()
        o, final_state = solution(q.contiguous(), k.contiguous(), v.contiguous(), g.to(_apex_torch.float32).contiguous(),
                                  beta.contiguous(), state)
        return o, (final_state if output_final_state else None)

    gated_delta_rule.__apex_solution__ = solution
    globals()[{name!r}] = gated_delta_rule
'''
    return body


def _path(module_name: str, name: str) -> Callable[[Any, Task, str], Callable[..., Any]]:
    def model_path(module: Any, task: Task, device: str) -> Callable[..., Any]:
        import importlib

        function = getattr(importlib.import_module(module_name), name)  # where the model finds it
        if not hasattr(function, "__apex_solution__"):
            raise LookupError(f"{module_name}.{name} is not the patched adapter")

        def through_the_model(q: Any, k: Any, v: Any, g: Any, beta: Any, initial_state: Any) -> Any:
            return function(q, k, v, g=g, beta=beta, initial_state=initial_state, output_final_state=True,
                            use_qk_l2norm_in_kernel=False)

        return through_the_model

    return model_path


def _rms_norm_body(loader: str) -> str:
    return f'''    {loader.strip()}
    import torch as _apex_torch
    original = Qwen3_5RMSNorm.forward

    def forward(self, x):
        if x.dim() != 3 or x.dtype != _apex_torch.bfloat16 or self.weight.dtype != _apex_torch.bfloat16:
            return original(self, x)  # not this task's contract (the per-head q/k norms among them): the stack's own norm
        shape = x.shape
        return solution(x.reshape(-1, shape[-1]).contiguous(), self.weight, self.eps).reshape(shape)

    forward.__apex_solution__ = solution
    Qwen3_5RMSNorm.forward = forward
'''


def _qwen3_5_mlp(mlp_class: Any, width: int) -> Any:
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig

    return mlp_class(Qwen3_5TextConfig(hidden_size=2 * width, hidden_act="silu"), width)


POINTS = (
    PatchPoint(id="transformers.qwen3_5.gated_delta_rule", stack="transformers", kernels=("gated_delta_rule",), models=MODELS,
               module=TRANSFORMERS,
               description="transformers' torch_chunk_gated_delta_rule (Qwen3.5's prefill; the model calls it by that name) "
                           "calls the solution",
               body=_body("torch_chunk_gated_delta_rule"), model_path=_path(TRANSFORMERS, "torch_chunk_gated_delta_rule")),
    PatchPoint(id="fla.qwen3_5.gated_delta_rule", stack="fla", kernels=("gated_delta_rule",), models=MODELS, module=FLA,
               description="fla's chunk_gated_delta_rule (what transformers picks for Qwen3.5 where fla is installed) "
                           "calls the solution",
               body=_body("chunk_gated_delta_rule"), model_path=_path(FLA_EXPORT, "chunk_gated_delta_rule")),
    PatchPoint(id="transformers.qwen3_5.rms_norm", stack="transformers", kernels=("rms_norm",), models=MODELS,
               module=TRANSFORMERS,
               description="transformers' Qwen3_5RMSNorm.forward (zero-centered: 1 + w) calls the solution on bf16 rows",
               body=_rms_norm_body, model_path=_rms_norm_path("Qwen3_5RMSNorm")),
    PatchPoint(id="transformers.qwen3_5.silu_and_mul", stack="transformers", kernels=("silu_and_mul",), models=MODELS,
               module=TRANSFORMERS,
               description="transformers' Qwen3_5MLP.forward: one GEMM on the fused gate/up weights, then the solution",
               body=_swiglu_body("Qwen3_5MLP"), model_path=_swiglu_path(TRANSFORMERS, "Qwen3_5MLP", _qwen3_5_mlp)),
)

"""Llama-3.1-8B's patch points: RMSNorm, RoPE and SiLU-and-mul, in transformers' own modules and
in Liger-Kernel's (what ``--kernels liger`` puts into the model).

Every adapter calls the solution through the task's contract and hands anything outside it back
to the stack's original code, so other models that share a module keep working:

- RMSNorm: rows of (tokens, hidden); Liger's norms with an offset or Gemma casting stay Liger's.
- RoPE: the model passes q, k as (batch, heads, seq, dim) and per-token cos/sin rows whose two
  halves repeat (``cat(freqs, freqs)``, as Llama's rotary embedding makes them). The adapter turns
  the rows into the task's cos/sin cache (row t: the 64 cos then the 64 sin of token t) with
  positions 0..tokens-1, and q, k into contiguous (tokens, heads, dim). Other layouts (GPT-OSS's
  undoubled cos, a partial rotary_dim) stay the stack's.
- SiLU-and-mul: the task takes the fused gate/up projection. The adapter fuses the MLP's gate and
  up weights once into one matrix whose two halves are the parameters' storage (no extra memory;
  refused after the parameters are replaced), so one GEMM yields the (tokens, 2 x intermediate)
  rows the solution takes, as vLLM's merged gate_up_proj does.

Written against transformers 5.x (``LlamaRMSNorm``, ``apply_rotary_pos_emb``, ``LlamaMLP``) and
liger-kernel 0.8.5 (``LigerRMSNorm``, ``liger_rotary_pos_emb``, ``LigerSwiGLUMLP``, which
``apply_liger_kernel_to_llama`` imports by name after the adapter has rebound them). The RMSNorm
points ran on an H200 with transformers 5.17; the transformers points are also checked on the CPU
in CI (Triton interpreter, the tasks' CPU shapes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apex_core.patcher.points.point import PatchPoint, models_of_family
from apex_core.tasks.schema import Task

MODELS = models_of_family("llama3")
"""Every model of the Llama 3 architecture: one modeling module, one set of points."""

# --- RMSNorm ------------------------------------------------------------------------------------


def _rms_norm_body(cls: str, guard: str) -> Callable[[str], str]:
    def body(loader: str) -> str:
        return f'''    {loader.strip()}
    original = {cls}.forward

    def forward(self, hidden_states):
        if {guard}:
            return original(self, hidden_states)  # not this task's contract: the stack's own norm
        shape = hidden_states.shape
        rows = hidden_states.reshape(-1, shape[-1]).contiguous()
        return solution(rows, self.weight, self.variance_epsilon).reshape(shape)

    forward.__apex_solution__ = solution
    {cls}.forward = forward
'''
    return body


def _rms_norm_path(attribute: str) -> Callable[[Any, Task, str], Callable[..., Any]]:
    def model_path(module: Any, task: Task, device: str) -> Callable[..., Any]:
        import torch

        norm_class = _reached(module, attribute, "forward")

        def through_the_model(x: Any, weight: Any, eps: float) -> Any:
            norm = norm_class(x.shape[-1], eps=eps).to(device=x.device, dtype=x.dtype)
            with torch.no_grad():
                norm.weight.copy_(weight)
                return norm(x.unsqueeze(0)).squeeze(0)  # as the model calls it: (batch, tokens, hidden)

        return through_the_model

    return model_path


# --- RoPE ---------------------------------------------------------------------------------------


def _rope_body(name: str) -> Callable[[str], str]:
    def body(loader: str) -> str:
        return f'''    {loader.strip()}
    import functools as _apex_functools
    import torch as _apex_torch
    original = {name}

    @_apex_functools.wraps(original)
    def rope(q, k, cos, sin, *args, **kwargs):
        rotary_dim = kwargs.get("rotary_dim")
        if (args or set(kwargs) - {{"position_ids", "unsqueeze_dim", "rotary_dim"}} or kwargs.get("unsqueeze_dim", 1) != 1
                or q.dim() != 4 or cos.dim() != 3 or cos.shape[-1] != q.shape[-1] or rotary_dim not in (None, q.shape[-1])):
            return original(q, k, cos, sin, *args, **kwargs)  # not this task's layout: the stack's own rope
        batch, heads, seq, dim = q.shape
        half, tokens = dim // 2, batch * seq
        cache = _apex_torch.cat((cos[..., :half], sin[..., :half]), dim=-1).to(_apex_torch.float32)
        cache = cache.expand(batch, seq, dim).reshape(tokens, dim)
        positions = _apex_torch.arange(tokens, device=q.device)
        q_rows = q.transpose(1, 2).reshape(tokens, heads, dim)
        k_rows = k.transpose(1, 2).reshape(tokens, k.shape[1], dim)
        q_out, k_out = solution(positions, q_rows, k_rows, cache)
        return (q_out.view(batch, seq, heads, dim).transpose(1, 2),
                k_out.view(batch, seq, k.shape[1], dim).transpose(1, 2))

    rope.__apex_solution__ = solution
    globals()[{name!r}] = rope
'''
    return body


def _rope_path(module_name: str, name: str) -> Callable[[Any, Task, str], Callable[..., Any]]:
    def model_path(module: Any, task: Task, device: str) -> Callable[..., Any]:
        import importlib

        import torch

        function = getattr(importlib.import_module(module_name), name)  # where the model's attention finds it
        if not hasattr(function, "__apex_solution__"):
            raise LookupError(f"{module_name}.{name} is not the patched adapter")

        def through_the_model(positions: Any, q: Any, k: Any, cos_sin_cache: Any) -> Any:
            half = cos_sin_cache.shape[-1] // 2
            rows = cos_sin_cache.index_select(0, positions)
            cos = torch.cat((rows[:, :half], rows[:, :half]), dim=-1).unsqueeze(0)  # (1, tokens, dim), as Llama makes it
            sin = torch.cat((rows[:, half:], rows[:, half:]), dim=-1).unsqueeze(0)
            q_out, k_out = function(q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0), cos, sin)
            return q_out.squeeze(0).transpose(0, 1).contiguous(), k_out.squeeze(0).transpose(0, 1).contiguous()

        return through_the_model

    return model_path


# --- SiLU-and-mul -------------------------------------------------------------------------------


def _swiglu_body(cls: str, activations: tuple[str, ...] = ("silu", "swish"), act_key: str = "hidden_act",
                 default_act: str = "silu") -> Callable[[str], str]:
    """The adapter of a gated MLP (gate_proj, up_proj, down_proj): one GEMM on the fused gate/up
    weights, then the solution on its (rows, 2 x intermediate) output. ``activations``: the values of
    the config's ``act_key`` this task's contract computes (SiLU for SwiGLU; Gemma's
    ``gelu_pytorch_tanh`` for GeGLU); any other keeps the stack's MLP."""
    def body(loader: str) -> str:
        return f'''    {loader.strip()}
    import torch as _apex_torch
    original = {cls}.forward

    def fused_gate_up(mlp):
        gate, up = mlp.gate_proj.weight, mlp.up_proj.weight
        fused = mlp.__dict__.get("_apex_gate_up")
        rows = gate.shape[0]
        if (fused is None or fused.shape[0] != rows + up.shape[0] or gate.data_ptr() != fused.data_ptr()
                or up.data_ptr() != fused[rows:].data_ptr()):
            with _apex_torch.inference_mode(False), _apex_torch.no_grad():
                fused = _apex_torch.cat((gate.detach(), up.detach()), dim=0)
                gate.data, up.data = fused[:rows], fused[rows:]  # the parameters become views: no extra memory
            mlp.__dict__["_apex_gate_up"] = fused
        return fused

    def forward(self, x):
        if (self.gate_proj.bias is not None or self.up_proj.bias is not None
                or getattr(self.config, "{act_key}", "{default_act}") not in {activations!r}):
            return original(self, x)  # not this task's contract: the stack's own MLP
        gate_up = _apex_torch.nn.functional.linear(x.reshape(-1, x.shape[-1]), fused_gate_up(self))
        out = solution(gate_up)
        return self.down_proj(out.reshape(*x.shape[:-1], out.shape[-1]))

    forward.__apex_solution__ = solution
    {cls}.forward = forward
'''
    return body


def _llama_mlp(mlp_class: Any, width: int) -> Any:
    """A Llama-style MLP of hidden size 2 x ``width`` and intermediate size ``width``."""
    from transformers import LlamaConfig

    return mlp_class(LlamaConfig(hidden_size=2 * width, intermediate_size=width, hidden_act="silu", mlp_bias=False,
                                 num_attention_heads=1, num_key_value_heads=1))


def _swiglu_path(module_name: str, attribute: str,
                 build: Callable[[Any, int], Any] = _llama_mlp) -> Callable[[Any, Task, str], Callable[..., Any]]:
    """``build``: (the MLP class, intermediate size) -> the MLP of hidden size 2 x intermediate, as
    the stack's class is constructed."""
    def model_path(module: Any, task: Task, device: str) -> Callable[..., Any]:
        import importlib

        import torch

        mlp_class = _reached(importlib.import_module(module_name), attribute, "forward")

        def through_the_model(x: Any) -> Any:
            """The MLP with hidden size 2 x intermediate, gate and up weights that pick the two halves
            of its input and down_proj left out: its output is the activation of x, exactly."""
            width = x.shape[-1] // 2
            with torch.device("meta"):
                mlp = build(mlp_class, width)
            mlp = mlp.to_empty(device=x.device).to(x.dtype)
            with torch.no_grad():
                identity = torch.eye(width, dtype=x.dtype, device=x.device)
                mlp.gate_proj.weight.zero_()[:, :width].copy_(identity)
                mlp.up_proj.weight.zero_()[:, width:].copy_(identity)
                del identity
                mlp.down_proj = torch.nn.Identity()
                return mlp(x.unsqueeze(0)).squeeze(0)

        return through_the_model

    return model_path


def _reached(module: Any, attribute: str, method: str) -> Any:
    owner = getattr(module, attribute)
    if not hasattr(getattr(owner, method), "__apex_solution__"):
        raise LookupError(f"{attribute}.{method} is not the patched adapter")
    return owner


TRANSFORMERS = "transformers.models.llama.modeling_llama"
LIGER = "liger_kernel.transformers"
LIGER_IMPORTER = "liger_kernel.transformers.monkey_patch"
"""Where apply_liger_kernel_to_llama finds Liger's classes and functions: the model path goes
through that module's names, so a rebinding the importer missed fails the check."""

POINTS = (
    PatchPoint(id="transformers.llama.rms_norm", stack="transformers", kernels=("rms_norm", "rms_norm_hip"), models=MODELS,
               module=TRANSFORMERS, description="transformers' LlamaRMSNorm.forward calls the solution on (tokens, hidden) rows",
               body=_rms_norm_body("LlamaRMSNorm", "False"), model_path=_rms_norm_path("LlamaRMSNorm")),
    PatchPoint(id="liger.llama.rms_norm", stack="liger", kernels=("rms_norm", "rms_norm_hip"), models=MODELS,
               module=f"{LIGER}.rms_norm",
               description="Liger's LigerRMSNorm.forward (what --kernels liger puts in Llama) calls the solution on rows",
               body=_rms_norm_body("LigerRMSNorm", 'self.offset != 0.0 or self.casting_mode != "llama" or self.weight is None'),
               model_path=_rms_norm_path("LigerRMSNorm")),
    PatchPoint(id="transformers.llama.rope", stack="transformers", kernels=("rope",), models=MODELS, module=TRANSFORMERS,
               description="transformers' apply_rotary_pos_emb (called by LlamaAttention) calls the solution on (tokens, heads, dim)",
               body=_rope_body("apply_rotary_pos_emb"), model_path=_rope_path(TRANSFORMERS, "apply_rotary_pos_emb")),
    PatchPoint(id="liger.llama.rope", stack="liger", kernels=("rope",), models=MODELS, module=f"{LIGER}.rope",
               description="Liger's liger_rotary_pos_emb (what --kernels liger puts in Llama) calls the solution",
               body=_rope_body("liger_rotary_pos_emb"), model_path=_rope_path(LIGER_IMPORTER, "liger_rotary_pos_emb")),
    PatchPoint(id="transformers.llama.silu_and_mul", stack="transformers", kernels=("silu_and_mul", "silu_and_mul_hip"),
               models=MODELS, module=TRANSFORMERS,
               description="transformers' LlamaMLP.forward: one GEMM on the fused gate/up weights, then the solution",
               body=_swiglu_body("LlamaMLP"), model_path=_swiglu_path(TRANSFORMERS, "LlamaMLP")),
    PatchPoint(id="liger.llama.silu_and_mul", stack="liger", kernels=("silu_and_mul", "silu_and_mul_hip"), models=MODELS,
               module=f"{LIGER}.swiglu",
               description="Liger's LigerSwiGLUMLP.forward (what --kernels liger puts in Llama): fused gate/up GEMM, then the solution",
               body=_swiglu_body("LigerSwiGLUMLP"), model_path=_swiglu_path(LIGER_IMPORTER, "LigerSwiGLUMLP")),
)

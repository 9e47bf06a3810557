"""Gemma 2's patch point: the GeGLU of its MLP (``gelu_tanh_and_mul``), in transformers' own
``Gemma2MLP``.

transformers computes ``down_proj(act_fn(gate_proj(x)) * up_proj(x))`` with two GEMMs and the
tanh-approximated GELU (``hidden_activation = "gelu_pytorch_tanh"``). The adapter is the one the
SwiGLU points use (``llama._swiglu_body``): the gate and up weights become two views of one
(2 x intermediate, hidden) tensor, one GEMM fills (rows, 2 x intermediate), the solution turns it
into (rows, intermediate), and down_proj follows. A config with another activation keeps the
stack's MLP. Written against transformers 5.24's ``modeling_gemma2``; checked on the CPU in CI (a
tiny Gemma 2 through the patched MLP, Triton interpreter, the task's CPU shapes); not yet run on a
GPU.
"""

from __future__ import annotations

from typing import Any

from apex_core.patcher.points.llama import _swiglu_body, _swiglu_path
from apex_core.patcher.points.point import PatchPoint, models_of_family

MODELS = models_of_family("gemma2")
TRANSFORMERS = "transformers.models.gemma2.modeling_gemma2"
GELU_TANH = "gelu_pytorch_tanh"


def _gemma2_mlp(mlp_class: Any, width: int) -> Any:
    from transformers import Gemma2Config

    return mlp_class(Gemma2Config(hidden_size=2 * width, intermediate_size=width, hidden_activation=GELU_TANH,
                                  num_attention_heads=1, num_key_value_heads=1, head_dim=2 * width))


POINTS = (
    PatchPoint(id="transformers.gemma2.gelu_tanh_and_mul", stack="transformers", kernels=("gelu_tanh_and_mul",),
               models=MODELS, module=TRANSFORMERS,
               description="transformers' Gemma2MLP.forward: one GEMM on the fused gate/up weights, then the solution (GeGLU)",
               body=_swiglu_body("Gemma2MLP", activations=(GELU_TANH,), act_key="hidden_activation", default_act=GELU_TANH),
               model_path=_swiglu_path(TRANSFORMERS, "Gemma2MLP", _gemma2_mlp)),
)

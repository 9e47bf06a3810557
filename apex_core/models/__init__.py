"""The registry of model architectures that tasks are shaped by."""

from apex_core.models.registry import MODELS, ModelConfig, get_model, model_slug

__all__ = ["MODELS", "ModelConfig", "get_model", "model_slug"]

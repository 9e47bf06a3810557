"""The registry of model architectures that tasks and workloads are shaped by."""

from apex_core.models.config import ModelConfig, model_slug
from apex_core.models.registry import MODELS, get_model

__all__ = ["MODELS", "ModelConfig", "get_model", "model_slug"]

"""The registry: every model of the catalogue by slug, and the one way to look one up."""

from __future__ import annotations

from apex_core.errors import UnknownNameError
from apex_core.models.catalog import CATALOGUE
from apex_core.models.config import ModelConfig, model_slug

MODELS: dict[str, ModelConfig] = {m.slug: m for m in CATALOGUE}
if len(MODELS) != len(CATALOGUE):  # two ids with one slug would make task ids ambiguous
    raise RuntimeError("the model catalogue has two entries with one slug")


def get_model(name: str) -> ModelConfig:
    """Look a model up by slug (``llama-3-1-8b-instruct``) or Hugging Face id."""
    if name in MODELS:
        return MODELS[name]
    slug = model_slug(name)
    if slug in MODELS:
        return MODELS[slug]
    raise UnknownNameError("model", name, MODELS)

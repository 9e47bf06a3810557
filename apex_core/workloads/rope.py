"""transformers' rope parameters from a registry entry's theta and scaling text."""

from __future__ import annotations

import re
from typing import Any

from apex_core.models import ModelConfig


def rope_parameters(model: ModelConfig) -> dict[str, Any]:
    """transformers' ``rope_parameters`` from the registry's theta and scaling text, e.g.
    'llama3 (factor 8, low_freq_factor 1, high_freq_factor 4, original 8192)'."""
    parameters: dict[str, Any] = {"rope_type": "default", "rope_theta": model.rope_theta or 10000.0}
    match = re.fullmatch(r"\s*(\w+)\s*(?:\((.*)\))?\s*", model.rope_scaling)
    if match and match.group(1) != "none":
        parameters["rope_type"] = match.group(1)
        for item in (match.group(2) or "").split(","):
            words = item.split()
            if len(words) != 2:
                continue
            key, value = words
            if key == "original":
                parameters["original_max_position_embeddings"] = int(value)
            else:
                parameters[key] = float(value)
    if "partial_rotary_factor" in model.extra:
        parameters["partial_rotary_factor"] = float(model.extra["partial_rotary_factor"])  # type: ignore[arg-type]
    return parameters

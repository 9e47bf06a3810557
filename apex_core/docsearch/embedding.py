"""Sentence embeddings from a model that a PyPI wheel ships, loaded without any network.

The model is WordLlama's ``l2_supercat`` at 256 dimensions: a static token-embedding table (16 MB)
and its tokenizer, both inside the ``wordllama`` wheel. Embedding a text is a tokenizer pass, a
table look-up and an average: about a millisecond for a query on one CPU core, which is why a
static model was chosen over a transformer (and why chromadb's default embedding function, which
downloads an ONNX model on first use, is not used at all).

``WordLlama.load()`` itself is not used: in 0.4.0.post1 it looks for the bundled tokenizer in a
folder named ``tokenizer`` while the wheel puts it in ``tokenizers``, misses it, and downloads it
from Hugging Face. The files are opened here by their place in the installed package instead, and
nothing else is ever tried: a missing file is an error, not a download.
"""

from __future__ import annotations

import importlib.util
import logging
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from apex_core.errors import ApexUserError

if TYPE_CHECKING:
    from wordllama.inference import WordLlamaInference

MODEL_NAME = "wordllama-l2_supercat-256"
"""Recorded in the index: vectors made by another model cannot be compared, so a change rebuilds."""
WEIGHTS_FILE = "weights/l2_supercat_256.safetensors"
TOKENIZER_FILE = "tokenizers/l2_supercat_tokenizer_config.json"
DIMENSIONS = 256


def bundled_model_files() -> tuple[Path, Path]:
    """The weights and tokenizer files inside the installed ``wordllama`` package."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ApexUserError("the embedding model's package is missing; install it with: pip install -e . (wordllama)")
    root = Path(next(iter(spec.submodule_search_locations)))
    weights, tokenizer = root / WEIGHTS_FILE, root / TOKENIZER_FILE
    for path in (weights, tokenizer):
        if not path.is_file():
            raise ApexUserError(f"{path} is missing from the wordllama package; reinstall it: pip install --force-reinstall wordllama")
    return weights, tokenizer


def _import_inference() -> type[WordLlamaInference]:
    """WordLlama's inference class; its module calls ``logging.basicConfig(level=INFO)`` on import,
    which would make every library's INFO messages appear on stderr, so the root logger is put
    back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from wordllama.inference import WordLlamaInference
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    return WordLlamaInference


class Embedder:
    """Unit-length vectors for texts (cosine similarity is then a dot product)."""

    name = MODEL_NAME
    dimensions = DIMENSIONS

    def __init__(self) -> None:
        from safetensors import safe_open
        from tokenizers import Tokenizer

        weights, tokenizer_file = bundled_model_files()
        with safe_open(str(weights), framework="np", device="cpu") as tensors:
            table = tensors.get_tensor("embedding.weight")
        self._model = _import_inference()(table, Tokenizer.from_file(str(tokenizer_file)))

    def embed(self, texts: list[str]) -> np.ndarray:
        """One row per text, float32, each of unit length (an empty text gives a zero row)."""
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        vectors = np.asarray(self._model.embed(texts, norm=False), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)


@lru_cache(maxsize=1)
def embedder() -> Embedder:
    """The process's one embedder: loading the table takes a few tenths of a second, so it is kept."""
    return Embedder()

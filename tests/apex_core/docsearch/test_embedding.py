import os
import subprocess
import sys

import numpy as np

from apex_core.docsearch.embedding import MODEL_NAME, bundled_model_files, embedder


def test_the_model_files_are_inside_the_installed_wheel():
    weights, tokenizer = bundled_model_files()
    assert "site-packages" in str(weights) or "dist-packages" in str(weights)
    assert weights.stat().st_size > 1_000_000 and tokenizer.stat().st_size > 100_000
    assert MODEL_NAME == "wordllama-l2_supercat-256"


def test_loading_the_model_fails_if_it_tries_the_network(tmp_path):
    """Sockets refuse, no HF_* variable and an empty home: a download attempt would raise."""
    script = (
        "import socket\n"
        "def refuse(*a, **k): raise RuntimeError('network use')\n"
        "socket.socket.connect = socket.create_connection = socket.getaddrinfo = refuse\n"
        "try:\n    socket.create_connection(('127.0.0.1', 9))\n    raise SystemExit('the guard is not in place')\n"
        "except RuntimeError:\n    pass\n"
        "from apex_core.docsearch.embedding import Embedder\n"
        "print(Embedder().embed(['matrix cores']).shape)\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("HF_")}
    env["HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "(1, 256)"


def test_vectors_have_unit_length_and_related_texts_are_closer_than_unrelated_ones():
    vectors = embedder().embed(["matrix multiplication kernel", "a kernel that multiplies matrices", "weather forecast for tomorrow", ""])
    assert vectors.shape == (4, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert embedder().embed([]).shape == (0, 256)


def test_loading_the_model_leaves_the_root_logger_as_it_was():
    script = ("import logging\nfrom apex_core.docsearch.embedding import Embedder\nEmbedder()\n"
              "print(len(logging.getLogger().handlers), logging.getLogger().level)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "0 30", done.stderr[-1000:]


def test_a_token_in_every_text_weighs_less_than_a_rare_one_and_weights_steer_the_query_vector():
    model = embedder()
    texts = ["the swizzle of tiles", "the occupancy of waves", "the bank conflicts"]
    weights = model.token_weights(texts)
    common = model._token_ids(["the"])[0][0]
    rare = model._token_ids(["swizzle"])[0][0]
    assert weights[common] < weights[rare]
    plain = model.embed_query("the the the swizzle", None)
    weighted = model.embed_query("the the the swizzle", weights)
    swizzle = model.embed(["swizzle"])
    assert (weighted @ swizzle.T).item() > (plain @ swizzle.T).item()
    assert np.isclose(np.linalg.norm(weighted), 1.0, atol=1e-5)

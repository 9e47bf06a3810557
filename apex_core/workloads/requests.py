"""What one request mix asks and what it produced: prompts drawn from a request seed, and a digest
of the greedy tokens.

A request seed fixes the prompts' token ids and nothing else: the batch and the lengths come from
the workload's spec, so two seeds give different prompts of identical shapes (the same kernels at
the same sizes), and a benchmark worker can be handed a fresh seed each step without changing what
is timed. The seed is mixed through SHA-256 before it seeds the generator, so request seed ``s``
never draws the same stream as ``torch.manual_seed(s)``, which drew the model's weights.

The digest is the proof of work a step hands back: SHA-256 over the greedy token ids as
little-endian int64, row-major ``(batch, 1 + decode_tokens)`` (the prefill's token, then one per
decode step). Equal seeds on an equal model give equal digests; a worker that skipped the work
cannot produce it without running the model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

PROMPT_SEED_DOMAIN = b"apex-workload-prompt:"


def generator_seed(request_seed: int) -> int:
    """The 63-bit seed of the prompt generator for a request seed (any int, negative included)."""
    digest = hashlib.sha256(PROMPT_SEED_DOMAIN + str(int(request_seed)).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def prompt_ids(vocab_size: int, batch: int, prompt_tokens: int, request_seed: int) -> Any:
    """``(batch, prompt_tokens)`` int64 token ids in ``[0, vocab_size)`` on the CPU, drawn from the seed."""
    import torch

    if vocab_size < 1 or batch < 1 or prompt_tokens < 1:
        raise ValueError(f"prompt_ids needs a vocabulary, batch and length of 1 or more, not {vocab_size}, {batch}, {prompt_tokens}")
    generator = torch.Generator(device="cpu").manual_seed(generator_seed(request_seed))
    return torch.randint(0, vocab_size, (batch, prompt_tokens), generator=generator, dtype=torch.int64)


def prompt_lists(vocab_size: int, batch: int, prompt_tokens: int, request_seed: int) -> list[list[int]]:
    """The same prompts as plain lists (what a server's completions request carries)."""
    return [[int(t) for t in row] for row in prompt_ids(vocab_size, batch, prompt_tokens, request_seed).tolist()]


def token_digest(tokens: Any) -> str:
    """SHA-256 (hex) of greedy token ids: a 2-D tensor or nested sequences ``(batch, tokens)``,
    hashed as little-endian int64 in row-major order."""
    import numpy as np

    if hasattr(tokens, "detach"):
        array = tokens.detach().to("cpu").numpy()
    else:
        array = np.asarray(tokens)
    if array.ndim != 2:
        raise ValueError(f"token_digest takes (batch, tokens) ids, not an array of shape {tuple(array.shape)}")
    return hashlib.sha256(np.ascontiguousarray(array, dtype="<i8").tobytes()).hexdigest()


def combined_digest(digests: Sequence[str | None]) -> str | None:
    """One digest for several request mixes run back to back: SHA-256 over their digests in order
    (None when any mix has none, e.g. a server's)."""
    if not digests or any(d is None for d in digests):
        return None
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("".join(d for d in digests if d is not None).encode()).hexdigest()

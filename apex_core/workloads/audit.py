"""The token audit: whether greedy tokens another worker reported are the ones this model would choose.

The final benchmark times each arm's steps and must know that the timed work was the model's: a
worker whose patched kernel skips work runs faster and answers tokens it never computed. Comparing
the arms' tokens with each other fails honest kernels: in bf16 a greedy token flips wherever two
logits nearly tie, and from there the two sequences decode different inputs. With random weights
the next-token distributions are nearly uniform, so near-ties are everywhere: our correct Llama
references shared only 18% of the control's greedy prefix on the H200 (docs/benchmarks.md, Fourth
attempt), and the same baseline code in two processes 41%.

So the audit asks a question an honest kernel always passes and a skipping one cannot: fed the
sequence the arm itself produced (teacher forcing, one forward pass over prompt and generated
tokens, no cache), does the unpatched model rank each of the arm's tokens within a near-tie of its
own top choice at that position? Every position is checked, not only those before a first
difference, and the work is the same whatever tokens were chosen (fixed decode length, dense
shapes), so a flip at a near-tie costs nothing. A token drawn without computing the model lands
within the margin with the odds of a random vocabulary entry (about 3 in 100,000 at Llama's width).

The margin is the accuracy gate's (``accuracy_compare.Thresholds.tie``): the lead of the position's
top logit over the token's, at most ``tie`` times the position's largest absolute logit. This
module measures the leads; the parent (``pipeline.stages.final.rounds``) judges them.
"""

from __future__ import annotations

from typing import Any

AUDIT_CHUNK = 2
"""Sequences per forward pass: a batch of Llama-width logits for 129 positions is 0.5 GB in float32."""


def token_leads(workload: Any, request_seed: int, rows: list[list[int]]) -> list[list[float]]:
    """Per sequence, per generated token: the lead of the model's top logit over that token's at the
    position that predicted it, over the position's largest absolute logit (0.0: the model's own
    choice). ``workload``: an ``EmbeddedWorkload``; ``rows``: ``(batch, 1 + decode_tokens)`` greedy
    tokens answered for ``request_seed``'s prompts; a token outside the vocabulary leads by infinity.
    One line when the rows are not of the step's shape."""
    import torch

    spec = workload.spec
    steps = spec.decode_tokens + 1
    if len(rows) != spec.batch or any(len(row) != steps for row in rows):
        raise ValueError(f"the audit needs {spec.batch} rows of {steps} tokens, got {len(rows)} row(s)")
    prompt = workload.prompt(request_seed)
    vocab = workload.vocab_size
    outside = torch.tensor([[not 0 <= t < vocab for t in row] for row in rows], device=prompt.device)
    # Outside tokens are fed as token 0 (the forward needs real ids) and fail the margin by infinity.
    generated = torch.tensor([[t if 0 <= t < vocab else 0 for t in row] for row in rows], dtype=torch.long,
                             device=prompt.device)
    leads: list[list[float]] = []
    with torch.inference_mode(), workload.threads_set():
        for start in range(0, spec.batch, AUDIT_CHUNK):
            part = slice(start, start + AUDIT_CHUNK)
            # The last token predicted nothing yet: the inputs end one before it.
            inputs = torch.cat([prompt[part], generated[part, :-1]], dim=1)
            logits = workload.teacher_forced_logits(inputs, steps).float()
            chosen = logits.gather(-1, generated[part].unsqueeze(-1)).squeeze(-1)
            top = logits.max(dim=-1).values
            scale = logits.abs().max(dim=-1).values.clamp_min(torch.finfo(torch.float32).tiny)
            lead = ((top - chosen) / scale).masked_fill(outside[part], float("inf"))
            leads.extend(lead.cpu().tolist())
    return leads


def within_ties(leads: list[list[float]], tie: float) -> float | None:
    """The fraction of audited tokens whose lead is within the near-tie margin ``tie`` (None: none)."""
    flat = [lead for row in leads for lead in row]
    if not flat:
        return None
    return sum(1 for lead in flat if lead <= tie) / len(flat)

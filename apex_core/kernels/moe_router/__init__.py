"""MoE routers: from a token's router logits to the experts it visits and their weights.

Two routing rules, one module each, because the models disagree on everything but the shape of
the answer (weights float32 and expert ids int32, both (tokens, top_k), best expert first):

- ``softmax_topk``: GPT-OSS picks the top-k logits and takes a softmax over just those.
- ``grouped_topk``: DeepSeek-V3/R1 ("noaux_tc") scores experts by sigmoid, adds a load-balancing
  bias for the choice only, keeps the best expert groups, picks the top-k experts inside them and
  weights them by their unbiased scores, renormalized and scaled.

Expert ids are compared exactly, so the input generators keep every decision (which expert is
k-th, which group is kept) clear of near-ties that rounding in a correct kernel could flip.
"""

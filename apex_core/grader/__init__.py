"""Grading: run a candidate out of process, check it against the reference, time it, score it.

``judge`` orchestrates one grading; ``worker`` is the child that runs a solution (under
``reaper``, with ``process`` as the judge's handle and ``pool`` keeping workers warm); ``wire`` is
their channel; ``compare``, ``stats``, ``trace_checks``, ``prescan`` and ``integrity`` decide;
``native`` builds HIP/CUDA/C++ solutions; ``service`` is what the CLI and MCP server call.
"""

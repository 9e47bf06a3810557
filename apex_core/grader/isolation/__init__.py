"""Isolation: a candidate runs in a confined child process, and the judge only talks to it over a
checked channel.

Why: a solution is code an agent wrote to get a reward. In the judge's process it could patch the
timer, read the expected outputs or rewrite the verdict; with the judge's rights it could edit
Apex or the installed libraries. So it never runs there. ``process`` starts a worker (``worker``)
under a reaper (``reaper``: limits, and every descendant killed with it) inside a sandbox
(``sandbox``: its own user, namespaces and read-only view, with ``scratch`` its only writable
folder), and ``pool`` keeps started ones warm. The two sides speak typed requests (``protocol``)
over a private pipe pair and a sealed shared file (``wire``, ``payload``); every reply must carry
its request's nonce, and what the judge believes it checks itself: outputs against its own
reference, inputs by keyed checksums (``digest``), timed buffers by its own copy of the input
schedule (``rotation``). ``native`` builds HIP/CUDA/C++ sources inside the worker
(``hip_on_cuda/`` maps HIP names onto CUDA). ``confined`` starts other children of ours that
import agent code (the patcher's checks and benchmarks) the same way.

Nothing here imports the rest of the grader: the children start from these modules alone, and
this file imports nothing, so that ``python -m apex_core.grader.isolation.reaper`` stays cheap.
"""

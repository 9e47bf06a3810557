"""The final benchmark (``apex benchmark-final``, the benchmark-final stage: ``../benchmark_final.py``):
the workload's original stack, the control and the candidate interleaved in one session, and only
what the kernels earned credited. One concept a module:

- ``benchmark.py``: the entry (``benchmark_final``), crediting what the rounds measured
  (``credit_rounds``), the model reward, ``final.json``;
- ``credit.py``: gains between arms, each kernel's leave-one-out share, the Amdahl bound (why three arms);
- ``rounds.py``: the measurement: every arm loaded in its worker, stepped in rounds, audited;
- ``arms.py``: which patches each arm holds, and the handle on the worker that runs one;
- ``worker.py``: that worker, a confined child (``python -m apex_core.pipeline.stages.final.worker``).

Holding exactly an arm's patches in the environment is the patcher's (``apex_core.patcher.hold``).
This module imports nothing: every worker child imports it before its own module.
"""

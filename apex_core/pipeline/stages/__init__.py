"""The stages of ``apex run``, in order: each a module of this package named after its stage
(``benchmark-final`` is ``benchmark_final.py``) whose ``run(state, progress)`` does the stage's work
with the packages below it and returns its one-line summary.

A stage reads what earlier stages left in the run's state and writes its own results there; the
runner saves the state after each. A stage that finds nothing to do raises ``common.Skip`` with the
reason, so the stages after it are never run on nothing. Adding a stage is its module here and its
name in ``STAGES`` (and the report's section for what it records).

A stage's module is its logic's one home, which its own command calls too (``identify_run`` of
``apex identify``, ``integrate`` of ``apex integrate``); the final benchmark, too big for one module,
is ``benchmark_final.py`` with its parts in the package ``final``.

This module holds only the order, so ``state`` can import it: a stage module is loaded by name
when the runner first runs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

STAGES: tuple[str, ...] = ("benchmark", "identify", "optimize", "grade", "integrate", "benchmark-final", "score", "report")


def stage_function(name: str) -> Callable[..., str]:
    """The ``run(state: RunState, progress: Progress | None) -> str`` of stage ``name`` (one of ``STAGES``)."""
    if name not in STAGES:
        raise KeyError(name)
    return importlib.import_module(f"{__name__}.{name.replace('-', '_')}").run

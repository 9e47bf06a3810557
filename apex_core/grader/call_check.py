"""One call of a task's entry point (or anything with its contract) at one shape, against the
reference, under the grader's rules: seeded inputs, outputs compared within the task's
tolerance, inputs left unchanged. In-process: for trusted code (our baselines and references
under the Triton interpreter) and for the patcher's check of a patched model path, which runs
in a child process of its own, never in the process that decides a verdict.
"""

from __future__ import annotations

from typing import Any

from apex_core.grader.compare import Comparison, as_output_list, compare_all, inputs_unchanged
from apex_core.kernels import seeded
from apex_core.tasks.schema import Shape, Task, load_reference


def argument_copy(value: Any) -> Any:
    """A copy of a tensor or an array argument (anything else as is), so a reference cannot change
    the inputs a call is then given or compared with."""
    return value.clone() if hasattr(value, "clone") else value.copy() if hasattr(value, "copy") else value


def on_cpu(value: Any) -> Any:
    """A tensor brought to host memory for comparison; arrays and numbers as they are."""
    return value.detach().cpu() if hasattr(value, "detach") else value


def check_call(task: Task, function: Any, shape: Shape, seed: int, device: str = "cpu", strided: bool = False) -> Comparison:
    """One call of ``function`` at ``shape`` against the reference, under the grader's rules
    (``strided``: the task's strided_args as row-strided views, as hidden shapes pass them)."""
    make_inputs = load_reference(task.inputs)
    reference = load_reference(task.reference)
    args = seeded.draw(make_inputs, shape, task.dtype, seed, device, task.params, task.strided_args if strided else ())
    expected = [on_cpu(v) for v in as_output_list(reference(*[argument_copy(a) for a in args]))]
    before = [argument_copy(a).cpu() if hasattr(a, "cpu") else a for a in args]
    returned = function(*args)
    if task.output_args:
        if returned is not None:
            return Comparison(passed=False, message=f"an in-place call returned {type(returned).__name__}, not None")
        outputs = [args[i] for i in task.output_args]
    else:
        outputs = as_output_list(returned)
    comparison = compare_all([o.detach().cpu() for o in outputs], expected, task)
    after = [a.cpu() if hasattr(a, "cpu") else a for a in args]
    if comparison.passed and not inputs_unchanged(before, after, skip=task.output_args):
        return comparison.model_copy(update={"passed": False, "message": "the call modified its inputs"})
    return comparison

"""Checking an applied patch inside the model: the child half runs here
(``python -m apex_core.patcher.check``), the verdict is the parent's (``verify_in_model``).

The parent draws the task's test inputs from fixed seeds and writes them into the child's scratch
directory. The child, confined as a grading worker is (``apex_core.grader.isolation.confined``: read-only
site-packages with the patched files in it, no home, no network), imports the patched module
(which runs the adapter and loads the solution), makes sure the stack's call now reaches the
solution, runs every input set through the model's own module (not through the solution directly)
and saves the outputs as plain tensors. The parent loads them with torch's tensors-only loader and
compares them with the reference it computes itself, under the task's tolerances. The child's
reply, on a private channel and never its stdout, is only read for a failure's reason: a solution
that reports "passed" gains nothing, and the process that patches never imports the solution.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from pydantic import BaseModel

from apex_core.tasks.schema import Shape, Task

SEED_BASE = 7000
INPUTS_FILE = "inputs.pt"
OUTPUTS_FILE = "outputs.pt"


class PatchCheck(BaseModel):
    passed: bool
    stage: str
    """build, import, path or correctness: where it stopped."""
    message: str = ""
    shapes_checked: int = 0


def check_shapes(task: Task, device: str) -> list[Shape]:
    """The task's test shapes; for a GPU task checked on the CPU (Triton's interpreter), its CPU
    shapes, which run the same code paths at sizes the interpreter finishes."""
    if device == "cpu" and task.array_library == "torch" and task.cpu_shapes:
        return list(task.cpu_shapes)
    return list(task.test_shapes)


def run_model_path(point_id: str, task_id: str, inputs_file: str, outputs_file: str, device: str) -> PatchCheck:
    """In the child: import the patched module, run every input set through the model's own
    module, save the outputs as plain tensors. The verdict is the parent's, not this process's."""
    import torch

    from apex_core.grader import as_output_list
    from apex_core.patcher.points import get_point
    from apex_core.tasks import get_task

    task = get_task(task_id)
    point = get_point(point_id)
    try:
        module = importlib.import_module(point.module)
    except BaseException as error:  # noqa: BLE001 - the solution's import may raise anything
        return PatchCheck(passed=False, stage="import", message=f"{type(error).__name__}: {error}"[:500])
    try:
        function = point.model_path(module, task, device)
    except LookupError as error:
        return PatchCheck(passed=False, stage="path", message=str(error))
    outputs = []
    for index, args in enumerate(torch.load(inputs_file, weights_only=False)):  # written by the parent
        try:
            returned = function(*args)
        except BaseException as error:  # noqa: BLE001
            return PatchCheck(passed=False, stage="correctness", shapes_checked=index,
                              message=f"input set {index}: {type(error).__name__}: {error}"[:500])
        outputs.append([_as_tensor(value) for value in as_output_list(returned)])
    torch.save(outputs, outputs_file)
    return PatchCheck(passed=True, stage="correctness", shapes_checked=len(outputs))


def _as_tensor(value: Any) -> Any:
    import numpy as np
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().contiguous()
    raise TypeError(f"an output of type {type(value).__name__}, not an array or tensor")


def main(argv: list[str] | None = None) -> int:
    """The child: one 'check' request (task, point, device), one reply, then exit."""
    import os

    from apex_core.grader import ParentChannel

    channel, _ = ParentChannel.from_argv(list(sys.argv[1:] if argv is None else argv))
    request = channel.receive()
    if request is None:
        return 1
    folder = os.environ["HOME"]  # the scratch directory: the only one this process can write
    result = run_model_path(request["point"], request["task"], os.path.join(folder, INPUTS_FILE),
                            os.path.join(folder, OUTPUTS_FILE), request["device"])
    channel.reply(result.model_dump())
    return 0


if __name__ == "__main__":
    sys.exit(main())


def verify_in_model(task_id: str, point_id: str, device: str | None, timeout_s: float, *,
                    unconfined: bool = False) -> PatchCheck:
    """The parent: inputs out, the confined child run, outputs back, compared with our own reference."""
    import torch

    from apex_core.grader import ChildFailed, ConfinedChild, argument_copy, as_output_list, compare_all, grading_device, on_cpu
    from apex_core.kernels import seeded
    from apex_core.tasks import get_task
    from apex_core.tasks.schema import load_reference

    task = get_task(task_id)
    chosen = grading_device(task, device)
    make_inputs, reference = load_reference(task.inputs), load_reference(task.reference)
    shapes = check_shapes(task, chosen)
    input_sets = [seeded.draw(make_inputs, shape, task.dtype, SEED_BASE + i, chosen, task.params, ())
                  for i, shape in enumerate(shapes)]
    with ConfinedChild("apex_core.patcher.check", unconfined=unconfined) as child:
        inputs_file, outputs_file = child.scratch / INPUTS_FILE, child.scratch / OUTPUTS_FILE
        torch.save([tuple(args) for args in input_sets], inputs_file)
        child.give(inputs_file)
        try:
            said = PatchCheck.model_validate(child.request({"op": "check", "task": task.id, "point": point_id,
                                                            "device": chosen}, timeout_s))
        except ChildFailed as failure:
            if failure.kind == "timeout":
                return PatchCheck(passed=False, stage="correctness", message=f"the patched model did not finish in {timeout_s:g} s")
            stage = "import" if failure.kind in ("infra", "forged") else "correctness"
            return PatchCheck(passed=False, stage=stage, message=str(failure)[:500])
        except ValueError:
            return PatchCheck(passed=False, stage="correctness", message="the check process replied with something that is not a check")
        if not said.passed:
            return said  # the child's own account of its failure: a reason, never a pass
        if not outputs_file.is_file() or outputs_file.is_symlink():
            return PatchCheck(passed=False, stage="correctness", message="the check process left no outputs")
        try:
            outputs = torch.load(outputs_file, weights_only=True)
        except Exception as error:  # noqa: BLE001 - an unreadable file is a failure, whatever it holds
            return PatchCheck(passed=False, stage="correctness", message=f"the outputs could not be read: {error}"[:500])
    if not isinstance(outputs, list) or len(outputs) != len(input_sets):
        return PatchCheck(passed=False, stage="correctness", message="the check returned a wrong number of output sets")
    for index, (args, produced) in enumerate(zip(input_sets, outputs)):
        expected = [on_cpu(v) for v in as_output_list(reference(*[argument_copy(a) for a in args]))]
        comparison = compare_all([on_cpu(v) for v in produced], expected, task)
        if not comparison.passed:
            return PatchCheck(passed=False, stage="correctness", shapes_checked=index,
                              message=f"shape {shapes[index]}: {comparison.message}"[:500])
    return PatchCheck(passed=True, stage="correctness", shapes_checked=len(input_sets))

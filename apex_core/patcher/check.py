"""Checking an applied patch inside the model: the child half runs here
(``python -m apex_core.patcher.check``), the verdict is the parent's (``verify_in_model``).

The parent draws the task's test inputs from fixed seeds and writes them to a file. The child
imports the patched module (which runs the adapter and loads the solution), makes sure the
stack's call now reaches the solution, runs every input set through the model's own module (not
through the solution directly) and saves the outputs as plain tensors. The parent loads them
with torch's tensors-only loader and compares them with the reference it computes itself, under
the task's tolerances. What the child prints is only read for a failure's reason: a solution
that prints "passed" gains nothing, and the process that patches never imports the solution.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from pydantic import BaseModel

from apex_core.tasks.schema import Shape, Task

SEED_BASE = 7000


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

    from apex_core.grader.compare import as_output_list
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--point", required=True)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--outputs", required=True)
    parser.add_argument("--device", required=True)
    args = parser.parse_args(argv)
    result = run_model_path(args.point, args.task, args.inputs, args.outputs, args.device)
    sys.stdout.write("\n" + result.model_dump_json() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def verify_in_model(task_id: str, point_id: str, device: str | None, timeout_s: float) -> PatchCheck:
    """The parent: inputs out, the child run, outputs back, compared with our own reference."""
    import subprocess
    import tempfile
    from pathlib import Path

    import torch

    from apex_core.grader.call_check import argument_copy, on_cpu
    from apex_core.grader.compare import as_output_list, compare_all
    from apex_core.grader.devices import grading_device
    from apex_core.kernels import seeded
    from apex_core.tasks import get_task
    from apex_core.tasks.schema import load_reference

    task = get_task(task_id)
    chosen = grading_device(task, device)
    make_inputs, reference = load_reference(task.inputs), load_reference(task.reference)
    shapes = check_shapes(task, chosen)
    input_sets = [seeded.draw(make_inputs, shape, task.dtype, SEED_BASE + i, chosen, task.params, ())
                  for i, shape in enumerate(shapes)]
    with tempfile.TemporaryDirectory(prefix="apex-patch-check-") as folder:
        inputs_file, outputs_file = Path(folder) / "inputs.pt", Path(folder) / "outputs.pt"
        torch.save([tuple(args) for args in input_sets], inputs_file)
        command = [sys.executable, "-m", "apex_core.patcher.check", "--task", task.id, "--point", point_id,
                   "--inputs", str(inputs_file), "--outputs", str(outputs_file), "--device", chosen]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return PatchCheck(passed=False, stage="correctness", message=f"the patched model did not finish in {timeout_s:g} s")
        if done.returncode < 0:
            return PatchCheck(passed=False, stage="correctness", message=f"the patched model crashed (signal {-done.returncode})")
        said = _last_json(done.stdout)
        if said is not None and not said.passed:
            return said  # the child's own account of its failure: a reason, never a pass
        if not outputs_file.is_file():
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return PatchCheck(passed=False, stage="import", message=f"the check process failed (exit {done.returncode}): {tail}"[:500])
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


def _last_json(stdout: str) -> PatchCheck | None:
    lines = stdout.strip().splitlines()
    try:
        return PatchCheck.model_validate_json(lines[-1]) if lines else None
    except ValueError:
        return None

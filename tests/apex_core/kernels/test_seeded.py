"""Every task's inputs are drawn on the device they are for, the same for one seed in any process."""

import pytest
import torch

from apex_core.kernels import seeded
from apex_core.tasks import all_tasks
from apex_core.tasks.schema import load_reference

TORCH_TASKS = [t for t in all_tasks().values() if t.array_library == "torch"]


def _same(first: list, second: list) -> bool:
    return all(
        torch.equal(a.view(torch.uint8) if a.is_floating_point() else a, b.view(torch.uint8) if b.is_floating_point() else b)
        if isinstance(a, torch.Tensor) else a == b
        for a, b in zip(first, second)
    )


@pytest.mark.parametrize("task", TORCH_TASKS, ids=lambda t: t.id)
def test_on_the_cpu_one_seed_draws_the_same_inputs_twice(task):
    make = load_reference(task.inputs)
    shape = (task.cpu_shapes or task.test_shapes)[0]
    first = seeded.draw(make, shape, task.dtype, 7, "cpu", task.params)
    assert _same(first, seeded.draw(make, shape, task.dtype, 7, "cpu", task.params))
    assert not _same(first, seeded.draw(make, shape, task.dtype, 8, "cpu", task.params))


def test_outside_a_gpu_block_the_generator_is_on_the_cpu():
    with seeded.drawing_on("cpu"):
        assert seeded.generator(1).device.type == "cpu"


@pytest.mark.gpu
@pytest.mark.parametrize("task", TORCH_TASKS, ids=lambda t: t.id)
def test_on_the_gpu_every_tensor_is_drawn_there_and_one_seed_repeats(task):
    make = load_reference(task.inputs)
    shape = task.test_shapes[-1]
    first = seeded.draw(make, shape, task.dtype, 7, "cuda", task.params)
    assert all(a.device.type == "cuda" for a in first if isinstance(a, torch.Tensor))
    assert _same(first, seeded.draw(make, shape, task.dtype, 7, "cuda", task.params))

"""Which device a grading runs on, and the one-line refusals of devices that cannot be used."""

import pytest

from apex_core.errors import ApexUserError
from apex_core.grader.devices import device_from_option, gpu_count, grading_device, require_device
from apex_core.tasks import get_task


@pytest.mark.parametrize(("given", "meant"), [("0", "cuda:0"), ("3", "cuda:3"), ("cuda", "cuda"), ("cuda:1", "cuda:1"),
                                              ("cpu", "cpu"), (None, None)])
def test_a_command_line_device_is_read_in_torchs_spelling(given, meant):
    assert device_from_option(given) == meant


@pytest.mark.parametrize("given", ["gpu0", "cuda:x", "cuda:1x", "-1", "CUDA:0"])
def test_what_is_not_a_device_is_refused_with_what_would_be_one(given):
    with pytest.raises(ApexUserError, match="is not a device; give a GPU index"):
        device_from_option(given)


def test_a_gpu_this_machine_does_not_have_is_refused_with_the_number_it_has():
    with pytest.raises(ApexUserError, match=r"device cuda:99 does not exist here \((no GPU is visible|\d+ GPU\(s\) are visible)\)"):
        require_device("cuda:99")
    assert require_device("cpu") == "cpu"


def test_a_cpu_task_runs_on_the_cpu_and_refuses_a_gpu():
    task = get_task("cpu-mini__rms_norm")
    assert grading_device(task, None) == grading_device(task, "cpu") == "cpu"
    with pytest.raises(ApexUserError, match="is a CPU task; leave out --device or give --device cpu"):
        grading_device(task, "cuda:0")


def test_a_torch_task_runs_on_the_first_gpu_by_default_else_on_the_cpu():
    task = get_task("llama-3-1-8b-instruct__rms_norm")
    assert grading_device(task, None) == ("cuda" if gpu_count() else "cpu")
    with pytest.raises(ApexUserError, match="does not exist here"):
        grading_device(task, "cuda:99")

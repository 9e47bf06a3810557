"""Measured rates come from the device asked for, and stay below its datasheet peaks."""

import pytest
import torch

from apex_core.hardware import resolve_target
from apex_core.hardware.measured import measured_rates


@pytest.mark.gpu
@pytest.mark.parametrize("index", range(max(torch.cuda.device_count(), 1)))
def test_every_visible_gpu_measures_a_copy_bandwidth_below_its_peak(index):
    if index >= torch.cuda.device_count():
        pytest.skip("no such GPU here")
    spec = resolve_target(None).spec
    if spec is None:
        pytest.skip("this GPU is not in the hardware model")
    rates = measured_rates(f"cuda:{index}", dtypes=("bfloat16",))
    assert 0.3 * spec.peak_bandwidth_bytes_per_s < rates.copy_bandwidth_bytes_per_s < 1.05 * spec.peak_bandwidth_bytes_per_s
    assert rates.matmul_flops_per_s["bfloat16"] < 1.05 * spec.peak_flops("bfloat16")

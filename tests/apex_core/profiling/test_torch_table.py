"""Device kernels are tied to the op that launched them the way every torch 2.x records it
(``FunctionEvent.kernels``), and kernels no op claims still count (torch_table.gpu_table).

The events are torch's own FunctionEvent objects, built as its profiler builds them after a GPU
run: the H200's torch 2.11 has no ``linked_correlation_id`` on them, so the table must not need it.
"""

from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

from apex_core.profiling.torch_table import gpu_table


def _event(id_: int, name: str, start: float, end: float, device: DeviceType = DeviceType.CPU, parent=None) -> FunctionEvent:
    event = FunctionEvent(id=id_, name=name, thread=0, start_us=start, end_us=end, device_type=device,
                          input_shapes=[[8, 4096]] if device == DeviceType.CPU else None)
    event.cpu_parent = parent
    return event


def test_kernels_are_tied_to_their_launching_op_and_module_and_unclaimed_ones_still_count():
    module = _event(1, "nn.Module: LlamaRMSNorm", 0, 100)
    op = _event(2, "aten::mul", 10, 20, parent=module)
    op.append_kernel("elementwise_kernel", 0, 7.0)
    claimed = _event(3, "elementwise_kernel", 30, 37, device=DeviceType.CUDA)
    orphan = _event(4, "_rms_norm_forward_kernel", 40, 45, device=DeviceType.CUDA)
    # The module's range as the profiler also draws it on the GPU timeline: not a kernel.
    annotation = _event(5, "nn.Module: LlamaRMSNorm", 30, 45, device=DeviceType.CUDA)
    rows = {row.name: row for row in gpu_table([module, op, claimed, orphan, annotation])}
    assert "nn.Module: LlamaRMSNorm" not in rows
    assert rows["elementwise_kernel"].calls == 1 and rows["elementwise_kernel"].total_time_us == 7.0
    assert rows["elementwise_kernel"].module == "LlamaRMSNorm" and rows["elementwise_kernel"].launch_op == "aten::mul"
    assert rows["_rms_norm_forward_kernel"].calls == 1 and rows["_rms_norm_forward_kernel"].launch_op is None
    assert abs(sum(row.share for row in rows.values()) - 1.0) < 1e-9

"""Launches become the kernel table: one row per kernel and module, shares of the whole, hottest first."""

from apex_core.profiling.table import Launch, summarize_launches

MUL_BF16 = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&)>(int)"


def test_a_generic_kernel_run_under_two_modules_is_two_rows_each_with_its_own_time():
    launches = [
        Launch(MUL_BF16, 30.0, module="GptOssExperts", launch_op="aten::mul"),
        Launch(MUL_BF16, 30.0, module="GptOssExperts", launch_op="aten::mul"),
        Launch(MUL_BF16, 50.0, module="GptOssRMSNorm", launch_op="aten::mul"),
        Launch(MUL_BF16, 10.0),
    ]
    rows = summarize_launches(launches, "cuda")
    by_module = {row.module: (row.calls, row.total_time_us, round(row.share, 3)) for row in rows}
    assert by_module == {"GptOssExperts": (2, 60.0, 0.5), "GptOssRMSNorm": (1, 50.0, 0.417), None: (1, 10.0, 0.083)}
    assert [row.module for row in rows] == ["GptOssExperts", "GptOssRMSNorm", None]
    assert all(row.launch_op in ("aten::mul", None) for row in rows)


def test_a_kernel_keeps_the_launching_op_with_the_most_of_its_time():
    rows = summarize_launches([Launch("k", 1.0, "M", "aten::add"), Launch("k", 5.0, "M", "aten::mul"), Launch("k", 2.0, "M", "aten::add")], "cuda")
    assert len(rows) == 1 and rows[0].launch_op == "aten::mul" and rows[0].calls == 3

from pathlib import Path

import pytest

from apex_core.errors import ApexUserError
from apex_core.profiling.readers import detect_format, read_kernels

DATA = Path(__file__).parent / "data"
GEMM = "Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI16x16x1_SN_1LDSB1_AFC1_AG0_BL1_GRVWA8_GRVWB8_K1_MIWT4_4_NTn_j_PGR2_PLR1_SIA3_SU0_SVW4_TT4_64_TLDS1_UMLDSA0_WG64_4_1_WGM8"


def by_name(records):
    return {record.name: record for record in records}


def test_a_rocprofv3_kernel_trace_sums_each_kernels_dispatches():
    records = read_kernels(DATA / "rocprofv3_kernel_trace.csv")
    assert records[0].name == GEMM
    assert records[0].calls == 2 and records[0].total_time_us == pytest.approx(80.0)
    norm = by_name(records)["_rms_norm_forward_kernel"]
    assert norm.calls == 2 and norm.mean_time_us == pytest.approx(5.0)
    assert sum(record.share for record in records) == pytest.approx(1.0)
    assert {record.device for record in records} == {"cuda"}


def test_a_mangled_rocprofv3_kernel_name_is_demangled_and_kept():
    rope = next(record for record in read_kernels(DATA / "rocprofv3_kernel_trace.csv") if "rope" in record.name)
    assert rope.mangled_name == "_ZN12_GLOBAL__N_120rope_kernel_bf16_vecEPvS0_PKvi"
    assert rope.name == "(anonymous namespace)::rope_kernel_bf16_vec(void*, void*, void const*, int)"


def test_rocprofv3_kernel_stats_give_the_same_ranking_as_the_trace():
    records = read_kernels(DATA / "rocprofv3_kernel_stats.csv")
    assert [record.name for record in records][:1] == [GEMM]
    assert by_name(records)["_rms_norm_forward_kernel"].total_time_us == pytest.approx(10.0)


def test_rocprofv3_json_names_dispatches_through_the_kernel_symbols():
    records = read_kernels(DATA / "rocprofv3_results.json")
    assert [(record.name, record.calls) for record in records] == [
        ("_rms_norm_forward_kernel", 2),
        ("(anonymous namespace)::rope_kernel_bf16_vec(void*, void*, void const*, int)", 1),
    ]
    assert records[0].total_time_us == pytest.approx(10.0)


def test_an_nsys_kernel_summary_is_read_after_its_progress_lines():
    records = read_kernels(DATA / "nsys_cuda_gpu_kern_sum.csv")
    assert records[0].name.startswith("void cutlass::Kernel2<cutlass_80_tensorop_bf16")
    assert records[0].calls == 64 and records[0].total_time_us == pytest.approx(1840.512)
    assert by_name(records)["_rms_norm_forward_kernel"].share == pytest.approx(663552 / 3002624)


def test_ncu_details_csv_sums_gpu_time_per_kernel_across_units_and_thousands_separators():
    records = read_kernels(DATA / "ncu_details.csv")
    norm = by_name(records)["_rms_norm_forward_kernel"]
    assert norm.calls == 2 and norm.total_time_us == pytest.approx(5.92 + 6.08)
    assert records[0].name.startswith("void gemv2T_kernel_val<")


def test_ncu_raw_page_uses_its_units_row_and_demangles_names():
    records = read_kernels(DATA / "ncu_raw.csv")
    assert records[0].total_time_us == pytest.approx(40.128)
    assert records[0].mangled_name and records[0].mangled_name.startswith("_ZN7cutlass7Kernel2")
    assert by_name(records)["_rms_norm_forward_kernel"].calls == 2


@pytest.mark.parametrize(
    ("file", "fmt"),
    [
        ("rocprofv3_kernel_trace.csv", "rocprofv3-kernel-trace"),
        ("rocprofv3_kernel_stats.csv", "rocprofv3-kernel-stats"),
        ("rocprofv3_results.json", "rocprofv3-json"),
        ("nsys_cuda_gpu_kern_sum.csv", "nsys"),
        ("ncu_details.csv", "ncu"),
        ("ncu_raw.csv", "ncu"),
    ],
)
def test_each_sample_is_recognized_by_its_content(file, fmt):
    assert detect_format(DATA / file) == fmt


def test_a_missing_file_is_a_one_line_user_error(tmp_path):
    with pytest.raises(ApexUserError, match="does not exist") as error:
        read_kernels(tmp_path / "nowhere.csv")
    assert "\n" not in str(error.value)


def test_a_file_of_another_format_is_a_one_line_user_error():
    with pytest.raises(ApexUserError, match="is not an nsys 'cuda_gpu_kern_sum' CSV") as error:
        read_kernels(DATA / "ncu_details.csv", "nsys")
    assert "\n" not in str(error.value)


def test_an_unknown_file_names_the_formats_that_are_read(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(ApexUserError, match="known formats: rocprofv3-kernel-trace"):
        read_kernels(path)


def test_an_unknown_format_name_is_refused():
    with pytest.raises(ApexUserError, match="unknown profiler format 'nvprof'"):
        read_kernels(DATA / "ncu_raw.csv", "nvprof")


def test_a_non_number_in_a_time_column_names_the_column(tmp_path):
    path = tmp_path / "1_kernel_trace.csv"
    path.write_text('"Kernel_Name","Start_Timestamp","End_Timestamp"\n"k","soon","later"\n')
    with pytest.raises(ApexUserError, match="'Start_Timestamp' holds 'soon'"):
        read_kernels(path)

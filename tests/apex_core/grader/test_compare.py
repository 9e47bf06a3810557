import numpy as np

from apex_core.grader.compare import compare_outputs, inputs_unchanged
from apex_core.tasks.schema import Tolerance

TOL = Tolerance(atol=1e-3, rtol=1e-3)


def test_the_worst_element_is_located():
    ref = np.zeros((3, 4), dtype=np.float32)
    out = ref.copy()
    out[2, 1] = 0.5
    result = compare_outputs(out, ref, TOL)
    assert not result.passed
    assert result.max_error_index == [2, 1] and result.max_abs_error == 0.5
    assert "1 of 12 elements" in result.message


def test_matching_nans_and_infs_pass_and_mismatched_ones_fail():
    ref = np.array([np.nan, np.inf, 1.0], dtype=np.float32)
    assert compare_outputs(ref.copy(), ref, TOL).passed
    assert not compare_outputs(np.array([0.0, np.inf, 1.0], dtype=np.float32), ref, TOL).passed
    assert not compare_outputs(np.array([np.nan, -np.inf, 1.0], dtype=np.float32), ref, TOL).passed


def test_relative_tolerance_scales_with_the_reference():
    ref = np.array([1000.0], dtype=np.float32)
    assert compare_outputs(np.array([1000.9], dtype=np.float32), ref, TOL).passed
    assert not compare_outputs(np.array([1002.5], dtype=np.float32), ref, TOL).passed


def test_input_mutation_is_detected_bit_for_bit():
    before = [np.array([1.0, np.nan], dtype=np.float32), 0.1]
    assert inputs_unchanged(before, [before[0].copy(), 0.1])
    changed = before[0].copy()
    changed[0] = 2.0
    assert not inputs_unchanged(before, [changed, 0.1])


def test_torch_tensors_are_compared_by_the_same_rules_as_numpy_arrays():
    import torch

    rng = np.random.default_rng(0)
    ref = rng.standard_normal((5, 7)).astype(np.float32)
    ref[0, 0], ref[1, 1] = np.nan, np.inf
    cases = [ref.copy()]
    for position, value in [((2, 3), 0.5), ((4, 6), np.nan), ((1, 1), -np.inf), ((3, 2), 1e-4)]:
        out = ref.copy()
        out[position] += value if np.isfinite(value) else 0
        if not np.isfinite(value):
            out[position] = value
        cases.append(out)
    for out in cases:
        expected = compare_outputs(out, ref, TOL)
        got = compare_outputs(torch.from_numpy(out), torch.from_numpy(ref), TOL)
        assert (got.passed, got.max_error_index, got.message) == (expected.passed, expected.max_error_index, expected.message)
        assert got.max_abs_error == expected.max_abs_error


def test_torch_inputs_compare_bit_for_bit_with_nans_and_row_strided_views():
    import torch

    from apex_core.kernels.seeded import row_strided

    x = torch.randn(4, 8, dtype=torch.bfloat16)
    x[1, 2] = float("nan")
    strided = row_strided(x)
    assert strided.stride(0) > strided.shape[1]
    assert inputs_unchanged([x.clone()], [strided])
    strided[0, 0] += 1
    assert not inputs_unchanged([x.clone()], [strided])

"""Reference solutions: one file per kernel where the code is shared, handed out as one file per task."""

import hashlib

import pytest

from apex_core.errors import TaskDefinitionError
from apex_core.tasks import all_tasks, get_task
from apex_core.tasks import reference_solutions as rs

SOURCES = {"solution.py", "solution.hip"}


def _kept_files():
    return sorted(
        p for p in rs.REFERENCE_SOLUTIONS_DIR.rglob("*")
        if p.is_file() and rs.HANDED_OUT_DIR not in p.parents and p.name != ".gitignore" and "__pycache__" not in p.parts
    )


def test_every_task_has_a_solution_and_every_kept_file_serves_a_task():
    used = {rs.reference_solution_source_path(t) for t in all_tasks().values()}
    assert None not in used
    constants = {p for p in _kept_files() if p.name == rs.CONSTANTS_FILE}
    orphans = [p for p in _kept_files() if p not in used and p not in constants]
    assert orphans == []


def test_no_two_kept_solutions_are_the_same_file():
    by_hash = {}
    for path in _kept_files():
        by_hash.setdefault(hashlib.sha256(path.read_bytes()).hexdigest(), []).append(path)
    assert [paths for paths in by_hash.values() if len(paths) > 1] == []


def test_a_model_of_its_own_is_a_file_named_for_the_model_and_the_others_share_the_kernels():
    own = rs.reference_solution_source_path(get_task("llama-3-1-8b-instruct__rms_norm"))
    shared = rs.reference_solution_source_path(get_task("gpt-oss-20b__rms_norm"))
    assert own == rs.REFERENCE_SOLUTIONS_DIR / "rms_norm" / "llama-3-1-8b-instruct.py"
    assert shared == rs.REFERENCE_SOLUTIONS_DIR / "rms_norm" / "solution.py"
    assert shared == rs.reference_solution_source_path(get_task("deepseek-r1__rms_norm"))
    paged = {rs.reference_solution_path(t) for t in all_tasks().values() if t.kernel == "paged_decode_attention"}
    assert paged == {rs.REFERENCE_SOLUTIONS_DIR / "paged_decode_attention" / "solution.py"}


def test_a_variant_of_the_kernel_takes_the_variants_solution_whichever_model_it_is_for():
    gemma, qwen = get_task("gemma-2-9b-it__rms_norm"), get_task("qwen3-5-27b__rms_norm")
    assert rs.baseline_variant(gemma) == "zero_centered" and rs.baseline_variant(get_task("llama-3-1-8b-instruct__rms_norm")) is None
    assert rs.reference_solution_source_path(gemma) == rs.reference_solution_source_path(qwen) \
        == rs.REFERENCE_SOLUTIONS_DIR / "rms_norm" / "solution_zero_centered.py"
    assert rs.reference_solution_source_path(get_task("gemma-2-27b-it__fused_add_rms_norm")).name == "solution_zero_centered.py"


def test_every_constants_table_names_a_task_that_takes_it():
    for constants in (p for p in _kept_files() if p.name == rs.CONSTANTS_FILE):
        kernel = constants.parent.name
        tables = rs.tomllib.loads(constants.read_text())
        takers = {t.model for t in all_tasks().values()
                  if t.kernel == kernel and rs.reference_solution_source_path(t) == constants.parent / "solution.py"}
        assert set(tables) == takers, constants


def test_per_model_constants_are_written_into_one_self_contained_file():
    gpt, llama = get_task("gpt-oss-20b__per_token_quant_fp8"), get_task("llama-3-1-8b-instruct__per_token_quant_fp8")
    text = rs.reference_solution_source(gpt)
    assert rs.CONSTANTS_MARKER not in text
    assert "DECODE_TILE = (1, 8)\nPREFILL_TILE = (1, 2)\n" in text and "llama" not in text
    compile(text, "solution.py", "exec")
    path = rs.reference_solution_path(gpt)
    assert path.read_text() == text and path.name == "solution.py" and rs.HANDED_OUT_DIR in path.parents
    assert rs.reference_solution_path(gpt) == path  # written once per content
    assert "DECODE_TILE = (1, 4)\n" in rs.reference_solution_source(llama)


def test_a_shared_file_without_constants_is_handed_out_as_kept():
    task = get_task("qwen3-5-27b__gemm_bf16")
    assert rs.reference_solution_path(task) == rs.REFERENCE_SOLUTIONS_DIR / "gemm_bf16" / "solution.py"


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """A reference_solutions tree of one kernel (per_token_quant_fp8) under tmp_path."""
    root = tmp_path / "reference_solutions"
    (root / "per_token_quant_fp8").mkdir(parents=True)
    monkeypatch.setattr(rs, "REFERENCE_SOLUTIONS_DIR", root)
    monkeypatch.setattr(rs, "HANDED_OUT_DIR", root / ".handed-out")
    return root / "per_token_quant_fp8"


def test_a_missing_model_table_or_marker_is_one_line(kept):
    task = get_task("qwen3-5-27b__per_token_quant_fp8")
    (kept / "solution.py").write_text("# apex:model-constants\nX = TILE\n")
    (kept / "constants.toml").write_text("[gpt-oss-20b]\nTILE = [1, 2]\n")
    with pytest.raises(TaskDefinitionError, match=r"has no \[qwen3-5-27b\] table") as caught:
        rs.reference_solution_source(task)
    assert "\n" not in str(caught.value)
    (kept / "constants.toml").write_text("[qwen3-5-27b]\nTILE = [1, 2]\n")
    assert rs.reference_solution_source(task).endswith("TILE = (1, 2)\nX = TILE\n")
    (kept / "solution.py").write_text("X = TILE\n")
    with pytest.raises(TaskDefinitionError, match="has 0 '# apex:model-constants' lines"):
        rs.reference_solution_source(task)
    (kept / "solution.py").write_text("# apex:model-constants\n")
    (kept / "constants.toml").write_text("[qwen3-5-27b]\ntile = 1\n")
    with pytest.raises(TaskDefinitionError, match="not an UPPER_CASE constant name"):
        rs.reference_solution_source(task)


def test_a_model_file_wins_over_the_shared_one_and_takes_no_constants(kept):
    task = get_task("qwen3-5-27b__per_token_quant_fp8")
    (kept / "solution.py").write_text("# apex:model-constants\n")
    (kept / "constants.toml").write_text("[gpt-oss-20b]\nTILE = 1\n")
    (kept / "solution_per_token.py").write_text("VARIANT = 1\n")  # baseline_per_token_triton.py's variant
    assert rs.reference_solution_path(task) == kept / "solution_per_token.py"
    (kept / "qwen3-5-27b.py").write_text("OWN = 1\n")
    assert rs.reference_solution_path(task) == kept / "qwen3-5-27b.py"
    assert rs.reference_solution_source(task) == "OWN = 1\n"

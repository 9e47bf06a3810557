"""benchmarks/identify_table.py turns recorded identify results (an H200 run of 2026-12-01) into
docs/tasks.md's table: kinds summed over their kernels, the task that covers each or why none does."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
RECORDED = BENCHMARKS / "results" / "workloads-h200-2026-12-01"


def _script():
    spec = importlib.util.spec_from_file_location("identify_table", BENCHMARKS / "identify_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_kinds_kernels_are_summed_and_each_row_names_its_task_or_why_there_is_none():
    table = _script()
    (case,) = table.read_cases([RECORDED / "deepseek-r1.json"])
    rows = table.kind_rows(case)
    kinds = [kind for kind, _, _ in rows]
    assert kinds[0] == "fused_moe" and len(kinds) == len(set(kinds))
    assert [share for _, share, _ in rows] == sorted((share for _, share, _ in rows), reverse=True)
    gemm = sum(k["share"] for k in case["top"] if k["kind"] == "gemm_bf16")
    assert dict((k, s) for k, s, _ in rows)["gemm_bf16"] == gemm
    covered = {kind: why for kind, _, why in rows}
    assert covered["fused_moe"] == "`deepseek-r1__fused_moe`" and covered["other"].startswith("no task: not one of our")


def test_a_kind_without_a_task_here_says_so_and_small_kinds_are_left_out():
    table = _script()
    case = {"case": "gemma-2-9b-it", "layers": 8, "device": "cuda", "share_mapped_to_tasks": 0.0,
            "top": [{"kind": "gelu_and_mul", "share": 0.2, "task_id": None}, {"kind": "rms_norm", "share": 0.005, "task_id": None}]}
    assert table.kind_rows(case) == [("gelu_and_mul", 0.2, "no task yet at this model's shapes")]


def test_the_command_renders_every_case_once_with_the_later_file_winning(tmp_path, capsys):
    table = _script()
    first = json.loads((RECORDED / "gpt-oss-20b.json").read_text())
    again = [dict(first[0], layers=4)]
    (tmp_path / "again.json").write_text(json.dumps(again))
    assert table.main([str(RECORDED / "gpt-oss-20b.json"), str(tmp_path / "again.json")]) == 0
    printed = capsys.readouterr().out
    assert printed.count("gpt-oss-20b (4, cuda)") == 1 and "gpt-oss-20b (2, cuda)" not in printed


def test_a_missing_results_file_is_a_one_line_error(tmp_path, capsys):
    assert _script().main([str(tmp_path / "nope.json")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_case_that_failed_is_one_row_saying_so():
    table = _script()
    rendered = table.render([{"case": "kimi-k2-thinking", "error": "OutOfMemoryError: CUDA out of memory.\nTried to allocate"}])
    assert rendered.splitlines()[2] == "| kimi-k2-thinking | failed | | OutOfMemoryError: CUDA out of memory. Tried to allocate |"

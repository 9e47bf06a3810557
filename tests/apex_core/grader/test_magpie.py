"""The Magpie backend: the config it writes, the inputs it builds, the reports it trusts and the process it runs.

Reports come from tests/apex_core/grader/recorded/magpie/ (written from Magpie's source, see the README
there); the end-to-end runs use a small fake ``Magpie`` package that stands in for Magpie at the true edge.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import statistics
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from apex_core.errors import ApexUserError
from apex_core.grader import magpie as mb
from apex_core.grader.magpie import MagpieError, MagpieLatency
from apex_core.tasks import get_task

RECORDED = Path(__file__).resolve().parent / "recorded" / "magpie"
CANNED = Path(__file__).resolve().parents[3] / "apex_core" / "agents" / "canned" / "cpu-mini__rms_norm.py"
TWO_SHAPES = [{"tokens": 8192, "hidden": 4096}, {"tokens": 4, "hidden": 4096}]
ONE_SHAPE = TWO_SHAPES[:1]
CUDA_GRAPH = MagpieLatency(method="cuda_graph")
BOTH = MagpieLatency(method="both")


@pytest.fixture
def task():
    return get_task("cpu-mini__rms_norm")


def recorded(name: str) -> dict:
    return json.loads((RECORDED / f"compare_report_{name}.json").read_text())


def parse(data: dict | str | bytes, shapes=TWO_SHAPES, method="cuda_graph") -> mb.MagpieReport:
    raw = data if isinstance(data, (str, bytes)) else json.dumps(data)
    return mb.parse_compare_report(raw, mb.plan_entries(shapes), method)


def timing(name: str, shapes, latency=CUDA_GRAPH) -> mb.MagpieTiming:
    return mb.timing_from_report(parse(recorded(name), shapes, latency.method), "t__k", latency)


# --- finding Magpie -----------------------------------------------------------------------------


def make_magpie_root(path: Path, main_body: str = "", runner: bool = True) -> Path:
    package = path / "Magpie"
    (package / "bench").mkdir(parents=True)
    (package / "__init__.py").write_text('"""Fake Magpie for Apex tests."""\n')
    (package / "bench" / "__init__.py").write_text("")
    if runner:
        (package / "bench" / "_runner.py").write_text("")
    (package / "__main__.py").write_text(textwrap.dedent(main_body) or "raise SystemExit(0)\n")
    return path


def test_an_unset_magpie_root_is_a_one_line_user_error_naming_the_variable():
    assert mb.magpie_root({}) is None
    with pytest.raises(ApexUserError, match="MAGPIE_ROOT") as raised:
        mb.require_magpie_root({})
    assert "not set" in str(raised.value) and "\n" not in str(raised.value)


def test_a_magpie_root_without_the_package_says_what_is_missing(tmp_path):
    with pytest.raises(mb.MagpieNotInstalledError, match="no 'Magpie' package"):
        mb.require_magpie_root({"MAGPIE_ROOT": str(tmp_path)})
    with pytest.raises(mb.MagpieNotInstalledError, match="not a directory"):
        mb.require_magpie_root({"MAGPIE_ROOT": str(tmp_path / "nowhere")})


def test_a_magpie_without_the_latency_stage_is_refused_with_the_reason(tmp_path):
    root = make_magpie_root(tmp_path, runner=False)
    with pytest.raises(mb.MagpieNotInstalledError, match="no Latency stage"):
        mb.require_magpie_root({"MAGPIE_ROOT": str(root)})


def test_a_complete_magpie_checkout_is_found(tmp_path):
    root = make_magpie_root(tmp_path)
    assert mb.magpie_root({"MAGPIE_ROOT": str(root)}) == root.resolve()
    assert mb.require_magpie_root({"MAGPIE_ROOT": str(root)}) == root.resolve()


def test_asking_for_magpie_timing_without_magpie_fails_before_anything_runs(task, tmp_path):
    with pytest.raises(mb.MagpieNotInstalledError):
        mb.run_magpie_timing(task, task.baseline_path, CANNED, task.timed_shapes, 10, tmp_path, environ={})
    assert not list(tmp_path.iterdir())


def test_magpie_only_times_gpu_tasks(task):
    assert "CPU task" in mb.magpie_supports(task)
    assert mb.magpie_supports(get_task("llama-3-1-8b-instruct__rms_norm")) is None


# --- the workspace: kernel config, inputs, entries ----------------------------------------------


@pytest.fixture
def workspace(task, tmp_path):
    root = make_magpie_root(tmp_path / "magpie")
    shapes = [*task.timed_shapes, {"rows": 3, "hidden": 100}]
    return mb.write_magpie_workspace(task, task.baseline_path, CANNED, shapes, tmp_path / "scratch", magpie_root=root, seed=11)


def test_every_kernel_entry_has_its_own_directory_source_and_commands(workspace, task):
    config = yaml.safe_load(Path(workspace.kernel_config).read_text())
    kernels = config["kernels"]
    assert [k["id"] for k in kernels] == ["baseline_s0", "baseline_s1", "solution_s0", "solution_s1"]
    assert len({k["working_dir"] for k in kernels}) == len(kernels)
    assert len({tuple(k["testcase_command"]) for k in kernels}) == len(kernels)
    assert len({tuple(k["compile_command"]) for k in kernels}) == len(kernels)
    for kernel in kernels:
        work = Path(kernel["working_dir"])
        assert work.is_dir() and work.name == kernel["id"]
        assert [Path(p).parent for p in kernel["source_files"]] == [work]
        assert Path(kernel["testcase_command"][2]).parent == work and kernel["testcase_command"][3] == "--check"
        assert Path(kernel["compile_command"][2]).parent == work and kernel["compile_command"][3] == "--compile"
        assert (work / f"{kernel['bench_target']['module']}.py").is_file()
        assert kernel["bench_target"]["callable"] == task.entry_point
        assert kernel["bench_target"]["get_inputs"] == f"get_inputs_{kernel['id'][-1]}"
        assert kernel["env"]["TRITON_CACHE_DIR"].endswith(kernel["id"])
    assert "$" not in Path(workspace.kernel_config).read_text()


def test_the_copies_are_the_baseline_and_the_solution_untouched(workspace, task):
    by_role = {e.role: Path(e.source) for e in workspace.entries}
    assert by_role["baseline"].read_bytes() == task.baseline_path.read_bytes()
    assert by_role["solution"].read_bytes() == CANNED.read_bytes()


def test_the_latency_block_pins_the_method_and_the_seed_and_the_framework_config_disables_hardware_control(workspace):
    config = yaml.safe_load(Path(workspace.kernel_config).read_text())
    assert config["latency"]["method"] == "cuda_graph" and config["latency"]["seed"] == 11
    assert config["latency"]["pythonpath"][:2] == [workspace.root, workspace.magpie_root]
    assert config["correctness"] == {"backend": "testcase"}
    framework = yaml.safe_load(Path(workspace.framework_config).read_text())
    assert framework["gpu"]["hardware"]["enabled"] is False
    assert framework["scheduler"]["environment"] == "local"


def test_the_command_line_is_magpie_compare_with_the_baseline_first_and_our_own_configs(workspace):
    argv = workspace.argv("python")
    assert argv[:4] == ["python", "-s", "-m", "Magpie"]
    assert argv[argv.index("--config") + 1] == workspace.framework_config
    compare = argv[argv.index("compare") :]
    assert compare[compare.index("--kernel-config") + 1] == workspace.kernel_config
    assert compare[compare.index("--baseline") + 1] == "0" and "--no-perf" in compare
    assert compare[compare.index("--type") + 1] == "pytorch"
    assert "--testcase" not in argv and "-t" not in argv


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_inputs_module_builds_exactly_the_tasks_inputs_for_each_shape_and_seed(workspace, task):
    from apex_core.kernels.rms_norm import make_inputs_numpy

    module = _import(Path(workspace.inputs_module), "apex_magpie_inputs_under_test")
    for index, shape in enumerate([*task.timed_shapes, {"rows": 3, "hidden": 100}]):
        args, kwargs = getattr(module, f"get_inputs_{index}")()
        expected = make_inputs_numpy(shape, task.dtype, 11 + index, "cpu", task.params)
        assert kwargs == {} and len(args) == len(expected) == 3
        assert args[0].shape == (shape["rows"], shape["hidden"]) and args[0].dtype == np.float32
        for got, want in zip(args, expected):
            np.testing.assert_array_equal(got, want)


def test_gpu_tasks_draw_their_inputs_on_the_gpu_device(tmp_path):
    gpu_task = get_task("llama-3-1-8b-instruct__rms_norm")
    root = make_magpie_root(tmp_path / "magpie")
    ws = mb.write_magpie_workspace(gpu_task, gpu_task.baseline_path, gpu_task.baseline_path, gpu_task.timed_shapes, tmp_path, magpie_root=root)
    assert ws.device == "cuda" and ws.magpie_type == "triton"
    spec = _import(Path(ws.inputs_module), "apex_magpie_inputs_gpu_under_test").SPEC
    assert spec["device"] == "cuda" and spec["inputs"] == gpu_task.inputs and spec["shapes"] == gpu_task.timed_shapes


# --- reading recorded reports -------------------------------------------------------------------


def test_a_recorded_cuda_graph_report_gives_per_shape_medians_from_the_raw_samples():
    result = timing("cuda_graph", TWO_SHAPES)
    raw = recorded("cuda_graph")["results"]["kernel_results"]
    assert [s.shape for s in result.shapes] == TWO_SHAPES
    for index, shape in enumerate(result.shapes):
        base, sol = raw[index]["latency_result"]["wall_stats"], raw[2 + index]["latency_result"]["wall_stats"]
        assert shape.baseline_median_ns == pytest.approx(statistics.median(base["samples_ms"]) * 1e6)
        assert shape.solution_median_ns == pytest.approx(statistics.median(sol["samples_ms"]) * 1e6)
        assert shape.speedup == pytest.approx(shape.baseline_median_ns / shape.solution_median_ns)
        assert len(shape.baseline_samples_ns) == len(base["samples_ms"]) == 7
    assert result.method == "cuda_graph" and result.metric == "wall"
    assert all(k.compiling_state == "SUCCESS" and k.method == "cuda_graph" for k in result.kernels)


def test_with_method_both_the_kernel_only_median_is_the_headline_and_the_wall_clock_is_kept():
    result = timing("both", ONE_SHAPE, BOTH)
    base = recorded("both")["results"]["kernel_results"][0]["latency_result"]
    assert result.metric == "kernel"
    assert result.shapes[0].baseline_median_ns == pytest.approx(base["kernel_stats"]["median_ms"] * 1e6)
    assert result.kernels[0].wall_median_ns == pytest.approx(base["wall_stats"]["median_ms"] * 1e6)
    assert result.shapes[0].speedup > 1


def test_a_solution_that_does_not_compile_under_magpie_is_a_compile_error_with_the_compilers_line():
    with pytest.raises(MagpieError, match="SyntaxError at solution.py, line 14") as raised:
        timing("solution_compile_failed", ONE_SHAPE)
    assert raised.value.kind == "compile_failed" and raised.value.role == "solution"
    assert raised.value.outcome == "compile_error"


def test_a_solution_magpie_cannot_time_is_a_runtime_error_with_magpies_reason():
    with pytest.raises(MagpieError, match="stream is capturing") as raised:
        timing("solution_latency_failed", ONE_SHAPE)
    assert raised.value.kind == "run_failed" and raised.value.outcome == "runtime_error"


def test_a_baseline_failure_is_never_blamed_on_the_solution():
    data = recorded("solution_compile_failed")
    kernels = data["results"]["kernel_results"]
    kernels[0], kernels[1] = copy.deepcopy(kernels[1]), copy.deepcopy(kernels[0])
    kernels[0]["extra"]["kernel_id"], kernels[1]["extra"]["kernel_id"] = "baseline_s0", "solution_s0"
    with pytest.raises(MagpieError, match="could not compile the baseline") as raised:
        mb.timing_from_report(parse(data, ONE_SHAPE), "t__k", CUDA_GRAPH)
    assert raised.value.role == "baseline" and raised.value.outcome == "infra_error"


def test_a_magpie_without_the_latency_stage_yields_no_timing_and_says_why():
    with pytest.raises(MagpieError, match="no Latency stage") as raised:
        timing("without_latency_stage", ONE_SHAPE)
    assert raised.value.kind == "no_latency" and raised.value.outcome == "infra_error"


def test_with_method_both_a_missing_kernel_only_timing_is_the_solutions_failure_not_a_fallback():
    data = mutate(recorded("both"), ("results", "kernel_results", 1, "latency_result", "kernel_stats"), delete=True)
    with pytest.raises(MagpieError, match="no kernel-only latency for the solution") as raised:
        mb.timing_from_report(parse(data, ONE_SHAPE, "both"), "t__k", BOTH)
    assert raised.value.role == "solution"


def test_a_report_timed_with_another_method_than_asked_is_refused():
    with pytest.raises(MagpieError, match="not the 'both'"):
        mb.timing_from_report(parse(recorded("cuda_graph"), TWO_SHAPES, "both"), "t__k", BOTH)


# --- hostile and malformed reports --------------------------------------------------------------

WALL = ("results", "kernel_results", 2, "latency_result", "wall_stats")


def mutate(data: dict, path: tuple, value=None, delete: bool = False) -> dict:
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        ((*WALL, "median_ms"), float("nan"), "median_ms: is NaN"),
        ((*WALL, "median_ms"), -0.004, "must be a latency above 0"),
        ((*WALL, "median_ms"), 0.0, "must be a latency above 0"),
        ((*WALL, "median_ms"), "0.037", "must be a number, got str"),
        ((*WALL, "median_ms"), True, "must be a number, got bool"),
        ((*WALL, "median_ms"), 10**400, "too large"),
        ((*WALL, "median_ms"), 1e12, "at most 3.6e+06 ms"),
        ((*WALL, "median_ms"), float("inf"), "is infinite"),
        ((*WALL, "samples_ms"), [0.037, float("nan")], "samples_ms.1: is NaN"),
        ((*WALL, "samples_ms"), "0.037", "samples_ms: Input should be a valid list"),
        ((*WALL, "n_retries"), "7", "n_retries: Input should be a valid integer"),
        ((*WALL, "median_ms"), 0.001, "not the median of its samples"),
        ((*WALL, "n_retries"), 9, "n_retries is 9 but 7 samples"),
        (("results", "kernel_results", 2, "latency_result", "success"), "true", "success: Input should be a valid boolean"),
        (("results", "kernel_results", 2, "latency_result", "method"), "magic", "is no Magpie latency method"),
        (("results", "kernel_results", 2, "compiling_state"), "PASSED", "compiling_state: Input should be"),
        (("results", "kernel_results", 2, "extra", "kernel_id"), "solution_s9", "lists kernels"),
        (("results", "kernel_results"), [], "lists kernels [] but Apex configured"),
        (("mode",), "analyze", "mode: Input should be 'compare'"),
    ],
)
def test_hostile_values_in_a_report_are_rejected_with_a_clear_reason(path, value, reason):
    with pytest.raises(MagpieError) as raised:
        parse(mutate(recorded("cuda_graph"), path, value))
    assert raised.value.kind == "malformed_report"
    assert reason in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        (("results",), "results: Field required"),
        (("results", "kernel_results", 1, "extra", "kernel_id"), "kernel_id: Field required"),
        (("results", "kernel_results", 3, "compiling_state"), "compiling_state: Field required"),
        ((*WALL, "median_ms"), "median_ms: Field required"),
        (("timestamp",), "timestamp: Field required"),
    ],
)
def test_missing_keys_make_a_report_malformed(path, reason):
    with pytest.raises(MagpieError, match=reason) as raised:
        parse(mutate(recorded("cuda_graph"), path, delete=True))
    assert raised.value.kind == "malformed_report"


def test_a_kernel_reported_twice_or_out_of_order_is_refused():
    data = recorded("cuda_graph")
    kernels = data["results"]["kernel_results"]
    swapped = mutate(data, ("results", "kernel_results"), [kernels[2], kernels[3], kernels[0], kernels[1]])
    with pytest.raises(MagpieError, match="in that order"):
        parse(swapped)
    with pytest.raises(MagpieError, match="lists kernels"):
        parse(mutate(data, ("results", "kernel_results"), [*kernels, kernels[3]]))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("{not json", "not valid JSON"),
        ("", "not valid JSON"),
        ("[1, 2, 3]", "holds a JSON list, not an object"),
        ('"compare"', "holds a JSON str"),
        (b"\xff\xfe{}", "not UTF-8"),
        ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
        ('{"mode": "compare", "timestamp": "x", "results": {"kernel_results": [' + "1" * 5000 + "]}}", "not valid JSON"),
    ],
)
def test_undecodable_reports_are_failures_never_passes(raw, reason):
    with pytest.raises(MagpieError, match=reason) as raised:
        parse(raw)
    assert raised.value.kind == "malformed_report"


def test_magpies_winner_rankings_and_scores_are_not_read():
    data = mutate(recorded("cuda_graph"), ("results", "winner"), "solution wins!")
    data = mutate(data, ("results", "rankings"), {"evil": True})
    data = mutate(data, ("results", "kernel_results", 2, "score"), 1e308)
    assert timing_of(data).shapes[0].speedup == pytest.approx(timing("cuda_graph", TWO_SHAPES).shapes[0].speedup)


def timing_of(data: dict) -> mb.MagpieTiming:
    return mb.timing_from_report(parse(data), "t__k", CUDA_GRAPH)


def test_a_report_must_be_one_regular_file_in_one_compare_workspace(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(MagpieError, match="no compare_<timestamp> workspace") as raised:
        mb.find_report(out)
    assert raised.value.kind == "missing_report"
    (out / "compare_20260301_101512").mkdir()
    with pytest.raises(MagpieError, match="wrote no compare_report.json"):
        mb.find_report(out)
    (out / "compare_20260301_101513").mkdir()
    with pytest.raises(MagpieError, match="holds 2 compare workspaces"):
        mb.find_report(out)
    (out / "compare_20260301_101513").rmdir()
    report = out / "compare_20260301_101512" / "compare_report.json"
    report.symlink_to(RECORDED / "compare_report_cuda_graph.json")
    with pytest.raises(MagpieError, match="cannot be opened as a plain file"):
        mb.read_report(mb.find_report(out))
    report.unlink()
    os.mkfifo(report)
    with pytest.raises(MagpieError, match="not a regular file"):
        mb.read_report(mb.find_report(out))
    report.unlink()
    report.write_text((RECORDED / "compare_report_cuda_graph.json").read_text())
    assert json.loads(mb.read_report(mb.find_report(out)))["mode"] == "compare"


def test_an_oversized_report_is_refused_without_being_read(tmp_path, monkeypatch):
    monkeypatch.setattr(mb.run, "MAX_REPORT_BYTES", 1000)
    path = tmp_path / "compare_report.json"
    path.write_text(" " * 2000)
    with pytest.raises(MagpieError, match="above the 1000 allowed"):
        mb.read_report(path)


# --- the sandboxed run, end to end against a fake Magpie ----------------------------------------

FAKE_MAGPIE = r'''
"""A stand-in for ``python -m Magpie``: same CLI, same kernel config, same report format.

Per kernel it runs the compile and testcase commands in the kernel's working directory, then a
latency runner as Magpie does (cwd=working_dir, PYTHONPATH=latency.pythonpath, MAGPIE_BENCH_* env),
timing with perf_counter instead of CUDA graphs, and writes compare_<ts>/compare_report.json.
"""
import argparse, json, os, statistics, subprocess, sys
from datetime import datetime
from pathlib import Path

import yaml

RUNNER = """
import importlib, json, os, time
module = importlib.import_module(os.environ["MAGPIE_BENCH_MODULE"])
fn = getattr(module, os.environ["MAGPIE_BENCH_CALLABLE"])
args, kwargs = getattr(module, os.environ["MAGPIE_BENCH_INPUTS_FUNC"])()
for _ in range(int(os.environ["MAGPIE_BENCH_WARMUP_ITERS"])):
    fn(*args, **kwargs)
samples = []
for _ in range(int(os.environ["MAGPIE_BENCH_N_RETRIES"])):
    start = time.perf_counter()
    fn(*args, **kwargs)
    samples.append((time.perf_counter() - start) * 1e3)
print("MAGPIE_LATENCY_JSON: " + json.dumps({"mode": "cuda_graph", "stats": {"samples_ms": samples}}))
"""

parser = argparse.ArgumentParser(prog="Magpie")
parser.add_argument("--config", "-c", type=Path)
parser.add_argument("--environment", "-e", choices=["local", "container", "ray"])
parser.add_argument("--workers", "-w", type=int)
sub = parser.add_subparsers(dest="mode")
compare = sub.add_parser("compare")
compare.add_argument("kernels", type=Path, nargs="*")
compare.add_argument("--kernel-config", "-k", type=Path)
compare.add_argument("--testcase", "-t")
compare.add_argument("--type", default="hip", choices=["hip", "cuda", "pytorch", "triton"])
compare.add_argument("--baseline", type=int, default=0)
compare.add_argument("--no-perf", action="store_true")
compare.add_argument("--output-dir", "-o", type=Path, default=Path("./results"))
args = parser.parse_args()
assert args.mode == "compare" and args.kernel_config and not args.kernels and args.testcase is None
framework = yaml.safe_load(args.config.read_text())
assert framework["gpu"]["hardware"]["enabled"] is False
config = yaml.safe_load(args.kernel_config.read_text())
latency = config["latency"]
ws = (args.output_dir / ("compare_" + datetime.now().strftime("%Y%m%d_%H%M%S"))).resolve()
(ws / "performance").mkdir(parents=True)
BEHAVIOUR

def run(cmd, kernel, extra=None):
    env = {**os.environ, **(kernel.get("env") or {}), **(extra or {})}
    return subprocess.run(cmd, cwd=kernel["working_dir"], env=env, capture_output=True, text=True, timeout=latency["timeout_seconds"])

results = []
for kernel in config["kernels"]:
    state = {"compiling_state": "SUCCESS", "correctness_state": "SUCCESS", "performance_state": "SKIPPED",
             "latency_state": "SKIPPED", "errors": [], "score": 0.0, "compiling_result": None, "correctness_result": None,
             "performance_result": None, "latency_result": None,
             "extra": {"kernel_id": kernel["id"], "kernel_type": kernel["type"].upper()}}
    results.append(state)
    done = run(kernel["compile_command"], kernel)
    state["compiling_result"] = {"success": done.returncode == 0, "errors": done.stderr.strip() or None}
    if done.returncode != 0:
        state["compiling_state"] = "FAILED"
        state["errors"].append(done.stderr.strip())
        continue
    done = run(kernel["testcase_command"], kernel)
    state["correctness_result"] = {"success": done.returncode == 0, "errors": done.stderr.strip() or None}
    if done.returncode != 0:
        state["correctness_state"] = "FAILED"
        state["errors"].append(done.stderr.strip())
        continue
    target = kernel["bench_target"]
    bench_env = {"MAGPIE_BENCH_MODULE": target["module"], "MAGPIE_BENCH_CALLABLE": target["callable"],
                 "MAGPIE_BENCH_INPUTS_FUNC": target["get_inputs"], "MAGPIE_BENCH_N_RETRIES": str(latency["n_retries"]),
                 "MAGPIE_BENCH_WARMUP_ITERS": str(latency["warmup_iters"]), "MAGPIE_BENCH_SEED": str(latency["seed"]),
                 "PYTHONPATH": ":".join(latency["pythonpath"])}
    done = run([sys.executable, "-c", RUNNER], kernel, bench_env)
    marker = [line for line in done.stdout.splitlines() if line.startswith("MAGPIE_LATENCY_JSON:")]
    if done.returncode != 0 or not marker:
        state["latency_state"] = "FAILED"
        error = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no marker"
        state["latency_result"] = {"success": False, "method": latency["method"], "primary_metric": latency["primary_metric"],
                                   "primary_value_ms": None, "config": latency, "command": "runner", "output_dir": None, "errors": error}
        state["errors"].append("Latency: " + error)
        continue
    samples = json.loads(marker[-1].split(":", 1)[1])["stats"]["samples_ms"]
    ordered = sorted(samples)
    stats = {"median_ms": statistics.median(samples), "p50_ms": statistics.median(samples), "p99_ms": ordered[-1],
             "min_ms": ordered[0], "max_ms": ordered[-1], "std_ms": statistics.stdev(samples), "samples_ms": samples,
             "n_repeat": 1, "n_retries": len(samples), "estimate_ms": samples[0]}
    state["latency_state"] = "SUCCESS"
    state["score"] = 1.0
    state["latency_result"] = {"success": True, "method": latency["method"], "primary_metric": latency["primary_metric"],
                               "primary_value_ms": stats["median_ms"], "config": latency, "command": "runner",
                               "output_dir": None, "errors": None, "wall_stats": stats}
report = {"mode": "compare", "timestamp": ws.name[len("compare_"):], "summary": [],
          "results": {"kernel_results": results, "comparison_metrics": {}, "winner": 0, "rankings": [], "summary": ""}}
(ws / "compare_report.json").write_text(json.dumps(report, indent=2))
print("Workspace:", ws)
'''


def fake_magpie(tmp_path: Path, behaviour: str = "") -> dict[str, str]:
    root = make_magpie_root(tmp_path / "fake-magpie", FAKE_MAGPIE.replace("BEHAVIOUR", textwrap.dedent(behaviour)))
    return {"MAGPIE_ROOT": str(root)}


SMALL = [{"rows": 4, "hidden": 256}]
"""A shape at which the naive baseline is still clearly slower than NumPy, yet quick to run."""


@pytest.mark.slow
def test_magpie_times_baseline_and_solution_end_to_end_through_the_sandboxed_child(task, tmp_path):
    fast = MagpieLatency(method="cuda_graph", n_retries=5, warmup_iters=1)
    result = mb.run_magpie_timing(task, task.baseline_path, CANNED, SMALL, 120, tmp_path / "scratch", seed=3, latency=fast, environ=fake_magpie(tmp_path))
    assert [s.shape for s in result.shapes] == SMALL
    shape = result.shapes[0]
    assert shape.baseline_median_ns > shape.solution_median_ns > 0
    assert len(shape.baseline_samples_ns) == len(shape.solution_samples_ns) == 5
    assert [k.id for k in result.kernels] == ["baseline_s0", "solution_s0"]
    assert all(k.compiling_state == k.correctness_state == k.latency_state == "SUCCESS" for k in result.kernels)
    assert Path(result.report_path).name == "compare_report.json" and result.seed == 3
    assert result.command[result.command.index("--kernel-config") + 1].endswith("kernels.yaml")


@pytest.mark.slow
def test_a_solution_that_does_not_compile_comes_back_as_the_solutions_compile_error(task, tmp_path):
    broken = tmp_path / "solution.py"
    broken.write_text("def rms_norm(x, weight, eps)\n    return x\n")
    with pytest.raises(MagpieError, match="SyntaxError at solution.py, line 1") as raised:
        mb.run_magpie_timing(task, CANNED, broken, SMALL, 120, tmp_path / "scratch", environ=fake_magpie(tmp_path))
    assert raised.value.outcome == "compile_error"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_hanging_magpie_times_out_and_its_whole_tree_dies_including_detached_children(task, tmp_path):
    hang = """
        import time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
        (ws / "grandchild.pid").write_text(str(child.pid))
        time.sleep(300)
    """
    started = time.monotonic()
    with pytest.raises(MagpieError, match="did not finish within 3 s") as raised:
        mb.run_magpie_timing(task, task.baseline_path, CANNED, task.timed_shapes, 3, tmp_path / "scratch", environ=fake_magpie(tmp_path, hang))
    assert raised.value.kind == "timeout" and raised.value.outcome == "timeout"
    assert time.monotonic() - started < 30
    pid_files = list((tmp_path / "scratch").glob("magpie-*/out/compare_*/grandchild.pid"))
    assert len(pid_files) == 1
    pid = int(pid_files[0].read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def test_a_magpie_that_crashes_is_a_crash_with_its_last_words(task, tmp_path):
    crash = "raise ModuleNotFoundError(\"No module named 'ray'\")\n"
    with pytest.raises(MagpieError, match="exited with code 1: .*No module named 'ray'") as raised:
        mb.run_magpie_timing(task, task.baseline_path, CANNED, task.timed_shapes, 60, tmp_path / "scratch", environ=fake_magpie(tmp_path, crash))
    assert raised.value.kind == "crash" and raised.value.outcome == "infra_error"


def test_a_magpie_that_exits_cleanly_without_a_report_is_a_failure_not_a_pass(task, tmp_path):
    silent = "raise SystemExit(0)\n"
    with pytest.raises(MagpieError, match="wrote no compare_report.json") as raised:
        mb.run_magpie_timing(task, task.baseline_path, CANNED, task.timed_shapes, 60, tmp_path / "scratch", environ=fake_magpie(tmp_path, silent))
    assert raised.value.kind == "missing_report"


def test_magpie_runs_with_a_minimal_environment(task, tmp_path, monkeypatch):
    monkeypatch.setenv("APEX_SECRET_FOR_TEST", "leak")
    spy = """
        (ws / "env.json").write_text(json.dumps(dict(os.environ)))
        raise SystemExit(0)
    """
    with pytest.raises(MagpieError):
        mb.run_magpie_timing(task, task.baseline_path, CANNED, task.timed_shapes, 60, tmp_path / "scratch", environ=fake_magpie(tmp_path, spy))
    env = json.loads(next((tmp_path / "scratch").glob("magpie-*/out/compare_*/env.json")).read_text())
    assert "APEX_SECRET_FOR_TEST" not in env
    assert env["HOME"].endswith("/home") and str(tmp_path / "fake-magpie") in env["PYTHONPATH"]

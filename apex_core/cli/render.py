"""Human-readable views (rich tables) of hardware, tasks and grade results for the CLI."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from apex_core.evaluation import EvalReport
from apex_core.grader import NOT_TIMED, GradeResult
from apex_core.hardware.specs import SOURCED_FIELDS
from apex_core.hardware.target import HardwareTarget
from apex_core.hardware.measured import MeasuredRates
from apex_core.tasks.schema import Task, load_reference
from apex_core.suite.verify import TaskVerification


def _ns(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.3f} ms"
    return f"{value / 1e3:.2f} us"


def hardware(console: Console, target: HardwareTarget) -> None:
    detected = target.detected
    table = Table(title="This machine", show_header=False)
    table.add_row("vendor", detected.vendor)
    table.add_row("product", detected.product_name)
    table.add_row("arch", detected.arch or "-")
    table.add_row("compute units", str(detected.compute_units or "-"))
    table.add_row("memory", f"{detected.memory_bytes / 1024**3:.1f} GiB" if detected.memory_bytes else "-")
    table.add_row("devices", str(detected.device_count))
    table.add_row("driver", detected.driver_version or "-")
    table.add_row("runtime", detected.runtime or "-")
    table.add_row("torch", detected.torch_version or "-")
    table.add_row("detected by", ", ".join(detected.detected_by))
    console.print(table)
    spec = target.spec
    if spec is None:
        console.print(f"Target: {target.arch} ({target.origin}); not in the hardware model, so no peak numbers.")
        return
    specs = Table(title=f"Target: {spec.product_name} ({spec.arch}, {spec.family}; {target.origin})")
    specs.add_column("quantity")
    specs.add_column("value", justify="right")
    specs.add_column("source")
    for field in SOURCED_FIELDS:
        value = getattr(spec, field)
        if value is None:
            continue
        specs.add_row(field, f"{value:g}" if isinstance(value, float) else str(value), spec.sources[field])
    console.print(specs)
    if spec.notes:
        console.print(spec.notes)


def task_list(console: Console, tasks: list[Task]) -> None:
    table = Table(title=f"{len(tasks)} tasks")
    for column in ("id", "model", "kernel", "language", "dtype", "difficulty"):
        table.add_column(column)
    for task in tasks:
        models = task.model + (f" (also {', '.join(task.also_models)})" if task.also_models else "")
        table.add_row(task.id, models, task.kernel, task.language, task.dtype, str(task.difficulty))
    console.print(table)


def task_detail(console: Console, task: Task, target: HardwareTarget) -> None:
    table = Table(title=task.id, show_header=False)
    table.add_row("description", task.description)
    table.add_row("model", task.architecture.hf_id)
    table.add_row("kernel / language", f"{task.kernel} / {task.language}")
    table.add_row("entry point", task.signature)
    table.add_row("contract", task.contract.strip())
    table.add_row("baseline", f"apex_core/kernels/{task.baseline}")
    table.add_row("reference", task.reference)
    table.add_row("correctness mode", task.correctness_mode)
    table.add_row("dtype / tolerance", f"{task.dtype}: atol {task.tolerance.atol:g}, rtol {task.tolerance.rtol:g}")
    table.add_row("test shapes", ", ".join(str(s) for s in task.test_shapes))
    table.add_row("hidden shapes", f"{len(task.hidden_shapes)} (not shown)")
    table.add_row("difficulty", str(task.difficulty))
    if task.library:
        table.add_row("library kernel", f"{task.library.module}.{task.library.function} ({task.library.package})")
    roofline = load_reference(task.roofline)
    for shape in task.timed_shapes:
        model = roofline(shape, task.dtype, task.params)
        floor = ""
        if target.spec is not None and task.needs_gpu:
            floor = f", floor {model.floor_seconds(target.spec, task.dtype) * 1e6:.2f} us on {target.spec.key}"
        table.add_row(f"roofline {shape}", f"{model.bytes_moved:,} B, {model.flops:,} FLOP{floor}")
    table.add_row("solution path", f"output/{task.id}/{task.solution_filename}")
    console.print(table)


def grade_result(console: Console, result: GradeResult, title: str | None = None) -> None:
    table = Table(title=title or f"Grade: {result.task_id}", show_header=False)
    table.add_row("solution", result.solution_path)
    table.add_row("outcome", result.outcome.value + (f": {result.reason}" if result.reason else ""))
    table.add_row("compiled / correct", f"{result.compiled} / {result.correct}")
    passed = sum(c.passed for c in result.checks)
    table.add_row("correctness cases", f"{passed} of {len(result.checks)} passed" + (
        f", max abs error {result.max_abs_error:.3g}" if result.max_abs_error is not None else ""))
    for timing in result.timings:
        low, high = timing.speedup_ci95
        table.add_row(
            f"timing {timing.shape}",
            f"baseline {_ns(timing.baseline_median_ns)}, solution {_ns(timing.solution_median_ns)}, "
            f"{timing.speedup:.2f}x (95% CI {low:.2f}-{high:.2f}; {len(timing.solution_samples_ns)} samples)",
        )
    if result.speedup is not None:
        table.add_row("speedup credited", f"{result.speedup:.3f}x" + (
            f" (measured {result.measured_speedup:.3f}x)" if result.measured_speedup != result.speedup else ""))
    for flag in result.flags:
        table.add_row("flag", flag)
    score = result.score
    table.add_row("score", f"{score.total:.1f} = {score.compiled_points:.0f} compiled + {score.correct_points:.0f} correct "
                  f"+ {score.speedup_points:.1f} speedup")
    table.add_row("normalized", f"{score.normalized:.3f}")
    method = result.provenance.timing_method
    if method.startswith(NOT_TIMED):
        table.add_row("timing", method)
    else:
        table.add_row("timing method", method)
    table.add_row("graded on", result.provenance.device)
    console.print(table)


def grade_summary(console: Console, results: list[GradeResult]) -> None:
    """Several gradings of one task side by side, best score first: what a folder of candidates
    comes down to, under the tables of each."""
    ranked = sorted(enumerate(results, start=1), key=lambda pair: -pair[1].score.total)
    table = Table(title=f"{len(results)} solutions of {results[0].task_id}, best score first")
    for column in ("#", "solution", "outcome", "correct", "speedup (95% CI)", "score", "flags"):
        table.add_column(column, justify="right" if column in ("#", "score") else "left")
    for number, result in ranked:
        speedup = "–"
        if result.speedup is not None:
            speedup = f"{result.speedup:.3f}x"
            if result.speedup_ci95 is not None:
                speedup += f" ({result.speedup_ci95[0]:.2f}-{result.speedup_ci95[1]:.2f})"
        table.add_row(str(number), Path(result.solution_path).name, result.outcome.value, "yes" if result.correct else "no",
                      speedup, f"{result.score.total:.1f}", ", ".join(f.split(":")[0] for f in result.flags) or "–")
    console.print(table)


def eval_report(console: Console, report: EvalReport) -> None:
    agent = report.agent
    console.print(
        f"agent {agent.backend}: {'wrote' if agent.wrote_solution else 'did not write'} {agent.solution_path} "
        f"in {agent.elapsed_s:.1f} s" + (f" ({agent.summary})" if agent.summary else "")
    )
    console.print(f"prompt: {report.prompt_path}")
    grade_result(console, report.grade, title=f"Score report: {report.task_id} (target {report.target_arch})")


def verification(console: Console, results: list[TaskVerification], rates: MeasuredRates | None) -> None:
    if rates is not None:
        matmul = ", ".join(f"{k} {v / 1e12:.0f} TFLOP/s" for k, v in rates.matmul_flops_per_s.items())
        console.print(f"measured here: copy {rates.copy_bandwidth_bytes_per_s / 1e12:.2f} TB/s (read+write); matmul {matmul}")
    table = Table(title=f"{sum(r.passed for r in results)} of {len(results)} tasks verified")
    for column in ("task", "verdict", "speedup", "largest shape", "baseline", "solution", "of measured"):
        table.add_column(column)
    for r in results:
        largest = r.shapes[-1] if r.shapes else None
        table.add_row(
            r.task_id,
            "ok" if r.passed else "; ".join(r.problems)[:160],
            f"{r.speedup:.2f}x" if r.speedup else ("-" if r.timed else "not timed"),
            str(largest.shape) if largest else "-",
            f"{largest.baseline_us:.2f} us" if largest else "-",
            f"{largest.solution_us:.2f} us" if largest else "-",
            f"{100 * largest.fraction_of_measured:.0f}% ({largest.bound})" if largest and largest.fraction_of_measured else "-",
        )
    console.print(table)

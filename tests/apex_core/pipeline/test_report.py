"""The run report: report.md and one self-contained report.html with four inline SVG plots, written
for a finished run and for one whose stages were skipped or failed, from real grader result files."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from apex_core.agents.base import AgentRun
from apex_core.grader.result import GradeResult
from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.optimize import summarize
from apex_core.pipeline.report import device_times, load_result, write_reports
from apex_core.pipeline.report_svg import make_axis
from apex_core.pipeline.state import GradeSummary, IterationRecord, KernelRecord, RunState, StageRecord
from apex_core.score import kernel_score, rl_reward

DATA = Path(__file__).parent / "data"
REAL_GRADING = DATA / "cpu-mini__rms_norm.grade.json"
"""What ``apex grade --task cpu-mini__rms_norm --solution apex_core/agents/canned/cpu-mini__rms_norm.py --json`` printed."""
VOID = {"meta", "link", "br", "hr", "img", "input", "col", "area", "base", "wbr", "source", "track", "embed"}


class TagChecker(HTMLParser):
    """Every element that is opened is closed, in order (void elements and ``<x/>`` aside)."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.errors: list[str] = []
        self.svgs = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.svgs += tag == "svg"
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        pass

    def handle_endtag(self, tag: str) -> None:
        if self.open and self.open[-1] == tag:
            self.open.pop()
        else:
            self.errors.append(f"</{tag}> closes {self.open[-1] if self.open else 'nothing'}")


def checked_html(text: str) -> TagChecker:
    checker = TagChecker()
    checker.feed(text)
    checker.close()
    assert checker.errors == [] and checker.open == [], (checker.errors, checker.open)
    return checker


def grading(task_id: str, shapes: list[tuple[float, float]], ci: tuple[float, float], *, credited: float | None = None,
            outcome: str = "ok") -> GradeResult:
    """A grader result as the judge writes it: per-shape medians, the geometric-mean speedup, the real score."""
    correct = outcome == "ok"
    timings = [{"shape": {"rows": 4096 * (i + 1), "hidden": 4096}, "baseline_median_ns": b, "solution_median_ns": s,
                "speedup": b / s, "speedup_ci95": [b / s * 0.97, b / s * 1.03],
                "baseline_samples_ns": [int(b)] * 5, "solution_samples_ns": [int(s)] * 5} for i, (b, s) in enumerate(shapes)] if correct else []
    measured = math.prod(b / s for b, s in shapes) ** (1 / len(shapes)) if correct else None
    speedup = credited if credited is not None else measured
    return GradeResult.model_validate({
        "task_id": task_id, "solution_path": f"/runs/output/{task_id}/solution.py", "outcome": outcome, "compiled": True,
        "correct": correct, "reason": "" if correct else "output differs at [3, 17] by 0.41", "speedup": speedup,
        "measured_speedup": measured, "speedup_ci95": list(ci) if correct else None, "timings": timings,
        "score": kernel_score(True, correct, speedup).model_dump(), "rl_reward": rl_reward(outcome, correct, speedup),
        "provenance": {"task_hash": "a" * 64, "solution_hash": "b" * 64, "grader": "apex", "grader_version": "0.1.0",
                       "environment": {"device": "NVIDIA H200", "arch": "sm_90", "driver": "570.124", "runtime": "12.8",
                                       "python": "3.11.7", "packages": {"torch": "2.7.0"}},
                       "environment_key": "0123456789abcdef", "timing_method": "cuda events, interleaved A/B", "public_seed": 7},
        "elapsed_s": 41.2})


def iteration(folder: Path, index: int, result: GradeResult, model: str) -> IterationRecord:
    path = folder / f"grade_iter{index}.json"
    path.write_text(result.model_dump_json(indent=2), encoding="utf-8")
    run = AgentRun(backend="claude", solution_path=str(folder / "solution.py"), wrote_solution=True, elapsed_s=300.0 + 40 * index,
                   turns=12 + index)
    return IterationRecord(iteration=index, model=model, agent=run, solution_copy=str(folder / f"solution_iter{index}.py"),
                           grade=summarize(result, path), feedback="")


def fresh_grading(folder: Path, result: GradeResult) -> GradeSummary:
    """The grade stage's file: a one-element list, as ``grade_stage`` writes it."""
    path = folder / "gradings" / f"{result.task_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([result.model_dump(mode="json")]), encoding="utf-8")
    return summarize(result, path)


def stage(status: str, elapsed: float, summary: str = "", error: str = "") -> StageRecord:
    return StageRecord(status=status, started_at="2025-03-01T10:15:00+00:00", finished_at="2025-03-01T10:20:00+00:00",
                       elapsed_s=elapsed, summary=summary, error=error)


def new_state(tmp_path: Path) -> RunState:
    config = RunConfig(workload="llama-3-1-8b-instruct", kernels=("liger",), agent="claude", agent_model="claude-sonnet-4-5",
                       agent_model_complex="claude-opus-4-1", iterations=3, top_k=2)
    folder = tmp_path / "runs" / "20250301-101500-llama-3-1-8b-instruct-a1b2c3"
    folder.mkdir(parents=True)
    state = RunState(run_id=folder.name, created_at="2025-03-01T10:15:00+00:00", results_dir=str(folder), config=config)
    state.baseline = {"tokens_per_s": 2412.5, "cv": 0.0121, "runs": [2398.0, 2405.2, 2412.5, 2420.9, 2431.0], "cached": False,
                      "file": str(folder / "benchmark" / "benchmark.json")}
    return state


def realistic_state(tmp_path: Path) -> RunState:
    """Two kernels: rms_norm patched in at 1.33x, the rope kernel (a name with ``<b>`` in it) not significant."""
    state = new_state(tmp_path)
    folder = state.folder
    rms, rope = folder / "output" / "llama__rms_norm", folder / "output" / "llama__rope"
    rms.mkdir(parents=True)
    rope.mkdir(parents=True)
    rms_best = grading("llama__rms_norm", [(40_000, 30_000), (90_000, 68_000)], (1.24, 1.41))
    rope_best = grading("llama__rope", [(52_000, 51_000)], (0.97, 1.04), credited=1.0)
    state.kernels = [
        KernelRecord(task_id="llama__rms_norm", kernel="rms_norm", language="triton", difficulty=1, rank=2,
                     kernel_name="void at::native::vectorized_layer_norm_kernel<float, float>", device_time_share=0.183,
                     iterations=[iteration(rms, 1, grading("llama__rms_norm", [], (1, 1), outcome="wrong_answer"), "claude-sonnet-4-5"),
                                 iteration(rms, 2, grading("llama__rms_norm", [(40_000, 34_000)], (1.1, 1.25)), "claude-sonnet-4-5"),
                                 iteration(rms, 3, rms_best, "claude-sonnet-4-5")],
                     best_iteration=3, best_solution=str(rms / "solution_best.py"), stop_reason="all 3 iterations used",
                     final=fresh_grading(folder, rms_best), integrated=True, integration_note="patched at liger.rms_norm",
                     trajectory_id="t-rms"),
        KernelRecord(task_id="llama__rope", kernel="rope", language="triton", difficulty=3, rank=5,
                     kernel_name="_triton_rope<b>_kernel", device_time_share=0.094,
                     iterations=[iteration(rope, 1, grading("llama__rope", [(52_000, 53_000)], (0.95, 1.0), credited=1.0), "claude-opus-4-1"),
                                 iteration(rope, 2, rope_best, "claude-opus-4-1")],
                     best_iteration=2, best_solution=str(rope / "solution_best.py"),
                     stop_reason="stalled: two iterations changed the score by less than 5%", final=fresh_grading(folder, rope_best),
                     integrated=False, integration_note="credited speedup 1.000x is under the 1.05x needed", trajectory_id="t-rope"),
    ]
    state.kernels[1].iterations[1].grade.rl_reward = None  # an infrastructure error: the line breaks there
    state.final = three_arm_final(folder)
    state.accuracy = gate_figures(folder)
    state.summary = {"model_reward": 0.7098, "kernel_score": 1.0, "final_ratio": 1.0327}
    summaries = {"benchmark": "2,412 tokens/s over 5 runs, CV 1.2%", "identify": "2 kernel(s) to optimize",
                 "optimize": "llama__rms_norm: best iteration 3 of 3", "grade": "llama__rms_norm ok 1.320x",
                 "integrate": "patched in: llama__rms_norm", "benchmark-final": "faster by 3.3%", "score": "model reward 0.710"}
    state.stages.update({name: stage("done", 60.0 * (i + 1), said) for i, (name, said) in enumerate(summaries.items())})
    state.stages["report"] = StageRecord(status="running", started_at="2025-03-01T12:00:00+00:00")
    return state


def gain(median: float, low: float, high: float, significant: bool) -> dict:
    ratios = [low, low, median, median, high, high]
    return {"ratios": ratios, "median": median, "interval": [low, high], "interval_method": "order statistics",
            "interval_confidence": 0.969, "significant": significant}


def three_arm_final(folder: Path) -> dict:
    """The final benchmark's figures as ``FinalBenchmark`` dumps them: 6 rounds, one winner."""
    arms = {"original": [2410.0, 2398.5, 2421.0, 2405.3, 2415.8, 2409.9],
            "control": [2650.2, 2640.1, 2661.7, 2644.0, 2655.3, 2649.8],
            "candidate": [2730.5, 2719.0, 2745.1, 2722.9, 2736.4, 2731.7]}
    return {"tokens_per_s": arms, "kernel_gain": gain(1.0304, 1.0291, 1.0314, True),
            "integration_gain": gain(1.0996, 1.0979, 1.1003, True),
            "credits": [{"task_id": "llama__rms_norm", "point": "liger.rms_norm", "share": 0.183, "bound": 1.3197,
                         "gain": gain(1.0304, 1.0291, 1.0314, True), "implausible": False}],
            "bound": 1.3197, "token_agreement": 0.97, "flags": [], "credited": True, "original_cv": 0.0033, "drift": 0.0041,
            "excluded": [], "verdict": "kernel gain 1.030x (95% interval 1.029-1.031x, 6 rounds, significant)",
            "run_id": "final-20250301-a1b2", "runs": 6, "drift_flagged": False, "confined": True, "graph_fallbacks": {},
            "patches": [{"task_id": "llama__rms_norm", "solution": str(folder / "output" / "llama__rms_norm" / "solution_best.py"),
                         "point": "liger.rms_norm", "sha256": "0" * 64}],
            "control": [{"task_id": "llama__rms_norm", "solution": "apex_core/kernels/rms_norm/baseline_triton.py",
                         "point": "liger.rms_norm", "sha256": "1" * 64}],
            "kernel_score": 1.0, "throughput_term": 0.0304, "reward_note": "kernel score 1.000, kernel gain 1.030x credited",
            "results_dir": str(folder / "final"), "created_at": "2025-03-01T10:40:00+00:00",
            "model_reward": 0.7091, "file": str(folder / "final" / "final.json")}


def gate_figures(folder: Path) -> dict:
    """The accuracy gate's report as ``AccuracyReport`` dumps it: the winner passed."""
    figures = {"logits": {"positions": 96, "max_abs": 0.004, "max_abs_ratio": 0.0011, "relative": 0.0031, "kl_max": 2.1e-6,
                          "kl_mean": 8e-7, "worst": "prompt 2, decode step 4"},
               "tokens": {"sequences": 4, "compared": 68, "agreed": 68, "near_ties": 0, "flip": None}}
    patch = {"task_id": "llama__rms_norm", "solution": str(folder / "output" / "llama__rms_norm" / "solution_best.py"),
             "point": "liger.rms_norm", "sha256": "0" * 64}
    return {"prompts": 4, "prompt_tokens": 512, "tokens": 16, "thresholds": {"dtype": "bfloat16", "relative": 0.02, "max_abs": 0.04,
                                                                               "kl": 0.0018, "tie": 0.04},
            "trials": [{"patches": [patch], "comparison": {**figures, "passed": True, "reason": "within every threshold"},
                        "passed": True, "reason": "within every threshold"}],
            "culprits": [], "kept": [patch], "passed": True, "verdict": "every patch passed: llama__rms_norm",
            "file": str(folder / "accuracy" / "accuracy.json")}


def stopped_state(tmp_path: Path) -> RunState:
    """Identify found nothing to optimize, so the stages after it were skipped, and benchmark-final failed."""
    state = new_state(tmp_path)
    why = "none of the 14 profiled kernels has a task to optimize here"
    state.stages.update({"benchmark": stage("done", 95.0, "2,412 tokens/s over 5 runs"), "identify": stage("skipped", 40.0, why),
                         "optimize": stage("skipped", 0.0, "no kernel was identified to optimize"),
                         "grade": stage("skipped", 0.0, "no iteration left a correct solution"),
                         "integrate": stage("skipped", 0.0, "nothing was graded to integrate"),
                         "benchmark-final": stage("failed", 3.0, error="the patched model runs at 900 tokens/s, under half"),
                         "score": stage("done", 0.1, "0 kernel(s) graded; no model reward (nothing was integrated)")})
    return state


def test_a_finished_run_writes_both_reports_with_four_plots_and_nothing_external(tmp_path):
    state = realistic_state(tmp_path)
    paths = write_reports(state)
    assert paths == [state.folder / "report.md", state.folder / "report.html"]
    html = paths[1].read_text(encoding="utf-8")
    assert checked_html(html).svgs == 4
    assert html.count("<figcaption>") == 4 and "no data:" not in html
    assert "http://" not in html and "https://" not in html and "<script" not in html.lower()
    assert "<style>" in html and "<link" not in html.lower()
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html  # readable on a phone too


def test_the_speedup_plots_value_labels_fit_inside_the_canvas():
    from apex_core.pipeline import report_svg as svg

    rows = [svg.IntervalRow("cpu-mini__rms_norm", 185.5, 170.123, 200.456, "integrated")]
    plot = svg.interval_rows("Speedup per kernel", rows, 1.0, "credited speedup", "caption")
    label = "185.500x [170.123, 200.456] integrated"
    x = float(plot.html.split(label)[0].rsplit('<text x="', 1)[1].split('"')[0])
    assert x + len(label) * 6.6 <= 760, x


def test_a_kernel_name_with_markup_is_escaped_in_both_reports(tmp_path):
    paths = write_reports(realistic_state(tmp_path))
    markdown, html = (p.read_text(encoding="utf-8") for p in paths)
    assert "<b>" not in html and "_triton_rope&lt;b&gt;_kernel" in html
    assert "`_triton_rope<b>_kernel`" in markdown  # a code span: shown as written, never rendered


def test_the_markdown_has_a_row_per_kernel_with_its_grading_and_integration(tmp_path):
    markdown = write_reports(realistic_state(tmp_path))[0].read_text(encoding="utf-8")
    rows = [line for line in markdown.splitlines() if line.startswith("| 2 | `llama__rms_norm`") or line.startswith("| 5 | `llama__rope`")]
    assert len(rows) == 2
    assert "18.3%" in rows[0] and "| 3 | 3 |" in rows[0] and "1.328x (1.240-1.410x)" in rows[0]
    assert "yes: patched at liger.rms_norm (restored when the run ended)" in rows[0]
    assert "1.000x (0.970-1.040x)" in rows[1] and "no: credited speedup 1.000x is under the 1.05x needed" in rows[1]
    assert "- **Model reward:** 0.710" in markdown
    assert "- **Kernel gain (candidate / control, credited):** 1.030x (95% interval 1.029-1.031x, order statistics; significant)" in markdown
    assert "never credited):** 1.100x" in markdown and "| 1 | 2,410.0 | 2,650.2 | 2,730.5 |" in markdown
    assert "| llama__rms_norm | 0.0031 | 0.0011 | 2.1e-06 | 68/68 | passed |" in markdown  # the accuracy gate's figures
    assert "| `report` | done (this report) |" in markdown


def test_a_kernel_integrated_by_a_run_that_stopped_before_benchmark_final_reads_as_rolled_back(tmp_path):
    state = realistic_state(tmp_path)
    state.stages["benchmark-final"].status, state.stages["benchmark-final"].error = "failed", "interrupted"
    state.final = None
    markdown = write_reports(state)[0].read_text(encoding="utf-8")
    row = next(line for line in markdown.splitlines() if line.startswith("| 2 | `llama__rms_norm`"))
    assert "yes: patched at liger.rms_norm; rolled back when the run stopped, before benchmark-final measured it" in row


def test_a_run_from_before_the_control_arm_still_shows_its_two_arms(tmp_path):
    state = realistic_state(tmp_path)
    state.final = {"median_ratio": 1.0327, "interval": [1.0281, 1.0352], "interval_method": "order statistics",
                   "significant": True, "original_tokens_per_s": [2410.0, 2398.5], "patched_tokens_per_s": [2489.1, 2470.2],
                   "drift": 0.0041, "verdict": "faster by 3.3%", "excluded": [], "file": str(state.folder / "final.json")}
    markdown = write_reports(state)[0].read_text(encoding="utf-8")
    assert "original vs patched; before the control arm" in markdown and "| 1 | 2,410.0 | 2,489.1 | 1.033x |" in markdown
    assert "it includes what the patch adapters do by themselves" in markdown


def test_the_device_time_plot_takes_geometric_means_of_the_graders_timings(tmp_path):
    state = realistic_state(tmp_path)
    html = write_reports(state)[1].read_text(encoding="utf-8")
    # rms_norm: sqrt(40 us x 90 us) = 60 us before, sqrt(30 us x 68 us) = 45.17 us after
    assert "60 µs → 45.17 µs" in html and "52 µs → 51 µs" in html
    assert "From the grader&#x27;s timings" in html
    assert "1.328x [1.240, 1.410] integrated" in html and "0.5 = parity (1.0x)" in html


def test_a_run_that_stopped_early_says_why_each_part_is_missing(tmp_path):
    state = stopped_state(tmp_path)
    markdown_path, html_path = write_reports(state)
    html, markdown = html_path.read_text(encoding="utf-8"), markdown_path.read_text(encoding="utf-8")
    assert checked_html(html).svgs == 0
    assert html.count("no data: ") == 4
    for text in (html, markdown):
        assert "identify skipped: none of the 14 profiled kernels has a task to optimize here" in text
        assert "benchmark-final failed: the patched model runs at 900 tokens/s, under half" in text
        assert "score" in text and "none: 0 kernel(s) graded; no model reward" in text
    assert "- **Tokens/s:** 2,412.5 (median of 5 runs)" in markdown and "- **CV:** 1.21%" in markdown


def test_a_run_that_never_started_its_stages_says_not_run(tmp_path):
    state = new_state(tmp_path)
    state.baseline = {}
    markdown = write_reports(state)[0].read_text(encoding="utf-8")
    assert "benchmark not run" in markdown and "benchmark-final not run" in markdown and "score not run" in markdown


def test_a_missing_result_file_is_named_and_the_report_still_written(tmp_path):
    state = realistic_state(tmp_path)
    Path(state.kernels[1].final.result_file).unlink()
    html = write_reports(state)[1].read_text(encoding="utf-8")
    assert checked_html(html).svgs == 4
    assert "Left out: llama__rope: result file" in html and "unreadable" in html


def test_the_real_graders_output_is_read_and_spans_a_log_axis(tmp_path):
    result, why = load_result(str(REAL_GRADING))
    assert why == "" and result is not None and result.task_id == "cpu-mini__rms_norm"
    timing = result.timings[0]
    assert device_times(result) == pytest.approx((timing.baseline_median_ns, timing.solution_median_ns))
    state = new_state(tmp_path)
    state.kernels = [KernelRecord(task_id="cpu-mini__rms_norm", kernel="rms_norm", language="python", difficulty=1, rank=1,
                                  kernel_name="rms_norm", device_time_share=0.4, best_iteration=1,
                                  final=summarize(result, REAL_GRADING), integrated=True, integration_note="patched at cpu_mini")]
    html = write_reports(state)[1].read_text(encoding="utf-8")
    assert "credited speedup (log scale)" in html  # 204x beside the 1.0x line
    assert checked_html(html).svgs == 2  # speedup and device time; no iterations, no final benchmark


def test_a_value_axis_picks_round_linear_ticks_or_a_log_scale():
    assert make_axis([0.93, 1.41], 0, 100, zero=False).ticks == (0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5)
    wide = make_axis([22_013, 4_502_427], 0, 100, zero=True)
    assert wide.log and wide.ticks[0] <= 22_013 and wide.ticks[-1] >= 4_502_427
    assert make_axis([2410, 2502], 300, 40, zero=True).ticks[0] == 0


def browser_command(html: Path, png: Path, debian_binary) -> list[str] | None:
    """A headless Chromium that screenshots ``html``: the system's (Debian's, installed where CI
    can), else Playwright's through npx."""
    names = ("chromium", "chromium-browser", "google-chrome", "chrome-headless-shell")
    binary = next(filter(None, map(shutil.which, names)), None)
    if binary is None:
        try:
            binary = debian_binary("chromium", ["chromium"], "report test")
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            print(f"no system Chromium: {error}")
    if binary:
        return [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,3600",
                f"--screenshot={png}", html.as_uri()]
    if shutil.which("npx"):
        return ["npx", "-y", "playwright@1", "screenshot", "--full-page", "--viewport-size=1200,900", html.as_uri(), str(png)]
    return None


def png_colors(png: bytes) -> int:
    """Distinct RGB(A) pixel values of an 8-bit PNG (filters undone), to tell a render from a blank page."""
    width, height, depth, kind = struct.unpack(">IIBB", png[16:26])
    assert depth == 8 and kind in (2, 6), (depth, kind)
    step = 3 if kind == 2 else 4
    chunks, at = [], 8
    while at < len(png):
        length, name = struct.unpack(">I4s", png[at:at + 8])
        if name == b"IDAT":
            chunks.append(png[at + 8:at + 8 + length])
        at += 12 + length
    raw, stride, previous, colors = zlib.decompress(b"".join(chunks)), width * step, bytearray(width * step), set()
    for row in range(height):
        line = raw[row * (stride + 1):(row + 1) * (stride + 1)]
        kind_of_filter, data = line[0], bytearray(line[1:])
        for i in range(stride):
            a, b = data[i - step] if i >= step else 0, previous[i]
            c = previous[i - step] if i >= step else 0
            p = a + b - c
            paeth = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c
            data[i] = (data[i] + (0, a, b, (a + b) // 2, paeth)[kind_of_filter]) & 0xFF
        colors.update(bytes(data[i:i + step]) for i in range(0, stride, step * 7))  # every 7th pixel is plenty
        previous = data
    return len(colors)


@pytest.mark.slow
def test_a_real_browser_renders_the_report_with_its_plots(tmp_path, debian_binary):
    html = write_reports(realistic_state(tmp_path))[1]
    png = Path(os.environ.get("APEX_REPORT_SCREENSHOT", tmp_path / "report.png"))
    command = browser_command(html, png, debian_binary)
    if command is None:
        pytest.skip("no headless browser: neither a Chromium on PATH nor npx for Playwright's")
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    if command[0] == "npx" and done.returncode != 0 and re.search(r"Executable doesn't exist|ENOTFOUND|EAI_AGAIN|ECONNREFUSED", done.stderr):
        pytest.skip(f"Playwright's Chromium is not installed and cannot be fetched: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0 and png.is_file(), done.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 30_000
    assert png_colors(data) > 50  # text, plot colours and antialiasing: not one blank colour

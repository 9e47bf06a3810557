"""The report of a pipeline run: ``report.md`` to read in a terminal or a repository, and
``report.html``, one self-contained file (inline CSS and SVG, no script, nothing fetched) with the
plots of ``report_svg``.

Both are rendered from one list of sections, so they never disagree. A run that stopped half-way
is the one people most need explained, so every part whose stage produced nothing says why: "not
run", "skipped: <reason>" or "failed: <error>", taken from the stage's record. Figures come from
the state and from the grader result files it points at; a result file that is gone or unreadable
is named in the report instead of stopping it.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from apex_core.grader import GradeResult
from apex_core.storage import atomic_write
from apex_core.pipeline import report_svg as svg
from apex_core.pipeline.figures import FinalFigures, ScoreSummary, TwoArmFinal
from apex_core.pipeline.grading_facts import error_class
from apex_core.pipeline.stages.final.benchmark import DRIFT_THRESHOLD
from apex_core.pipeline.stages.final.credit import Gain
from apex_core.pipeline.state import KernelRecord, RunState

REPORT_MD, REPORT_HTML = "report.md", "report.html"


class Code(str):
    """An identifier cell (kernel name, task id, path): code-formatted, never read as markup."""


class LongCode(Code):
    """An identifier that may be long enough to wrap anywhere (a demangled kernel name)."""


class Status(str):
    """A stage status cell, coloured in HTML."""


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass
class Section:
    title: str
    parts: list[list[tuple[str, str]] | str | Table | svg.Plot] = field(default_factory=list)
    """Facts (label, value), a note, a table or a plot (HTML only), in reading order."""


def write_reports(state: RunState) -> list[Path]:
    """Write report.md and report.html into the run's folder; returns their paths."""
    sections = build_sections(state)
    title = f"apex run {state.run_id}"
    paths = [state.folder / REPORT_MD, state.folder / REPORT_HTML]
    atomic_write(paths[0], render_markdown(title, sections).encode("utf-8"))
    atomic_write(paths[1], render_html(title, sections).encode("utf-8"))
    return paths


def absent(state: RunState, stage: str) -> str:
    """Why ``stage`` left nothing behind ("" when it is done)."""
    record = state.stages.get(stage)
    if record is None or record.status == "pending":
        return f"{stage} not run"
    if record.status == "skipped":
        return f"{stage} skipped: {record.summary}"
    if record.status == "failed":
        return f"{stage} failed: {record.error or 'no error recorded'}"
    if record.status == "running":
        return f"{stage} did not finish (the run stopped during it)"
    return ""


def load_result(path: str) -> tuple[GradeResult | None, str]:
    """The grader result in ``path`` (the grade stage writes a one-element list, iterations a bare
    object), or None and why not."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return GradeResult.model_validate(data[0] if isinstance(data, list) else data), ""
    except (OSError, ValueError, IndexError) as error:
        return None, f"result file {path} unreadable: {str(error).splitlines()[0]}"


def device_times(result: GradeResult) -> tuple[float, float] | None:
    """Geometric means over the timed shapes of the baseline's and the solution's median ns per call."""
    if not result.timings:
        return None
    mean = statistics.geometric_mean
    return mean(t.baseline_median_ns for t in result.timings), mean(t.solution_median_ns for t in result.timings)


def build_sections(state: RunState) -> list[Section]:
    return [_run(state), _baseline(state), _kernels(state), _accuracy(state), _final(state), _reward(state)]


def _run(state: RunState) -> Section:
    config = state.config
    used = sorted({i.model for k in state.kernels for i in k.iterations if i.model})
    models = ", ".join(f"{label} {name}" for label, name in (("default", config.agent_model), ("simple tasks", config.agent_model_simple),
                                                              ("complex tasks", config.agent_model_complex)) if name)
    total = sum(r.elapsed_s or 0.0 for r in state.stages.values())
    rows = []
    for name, record in state.stages.items():
        status = "done (this report)" if name == "report" and record.status == "running" else record.status
        said = f"error: {record.error}" if record.error else record.summary
        rows.append([Code(name), Status(status), _duration(record.elapsed_s), said or "–"])
    facts = [("Run", Code(state.run_id)), ("Created", state.created_at),
             ("Workload", config.workload + (f" with {', '.join(config.kernels)}" if config.kernels else "")
              + (f", {config.layers} layers" if config.layers else "")),
             ("Agent", f"{config.agent}; models: {models or 'the agent default'}"
              + (f"; used: {', '.join(used)}" if used else "")),
             ("Asked for", f"top {config.top_k} kernels ({', '.join(config.languages)}), {config.iterations} iterations "
                           f"each, score threshold {config.score_threshold:g}, {config.runs} benchmark runs"),
             ("Elapsed", f"{_duration(total)} over all stages"), ("Folder", Code(state.results_dir))]
    return Section("Run", [facts, Table(["Stage", "Status", "Elapsed", "Summary or error"], rows)])


def _baseline(state: RunState) -> Section:
    baseline = state.baseline
    if baseline is None or baseline.tokens_per_s is None:
        return Section("Baseline benchmark", [absent(state, "benchmark") or "the benchmark stage left no figures"])
    values = [v for v in (_num(r) for r in baseline.runs) if v is not None]
    return Section("Baseline benchmark", [[
        ("Tokens/s", f"{baseline.tokens_per_s:,.1f} (median of {len(values)} runs)"),
        ("Per run", ", ".join(f"{v:,.1f}" for v in values) or "–"),
        ("CV", f"{baseline.cv:.2%}" if baseline.cv is not None else "not computed"),
        ("Cached", "yes: an earlier benchmark was reused" if baseline.cached else "no: measured in this run"),
        ("File", Code(baseline.file or "–"))]])


def _kernels(state: RunState) -> Section:
    if not state.kernels:
        return Section("Kernels", [absent(state, "identify") or "no kernel was chosen"] + _plots(state))
    in_place = _patched_tasks() if any(k.integrated for k in state.kernels) else set()
    rows = [[str(k.rank), Code(k.task_id), LongCode(k.kernel_name), f"{k.device_time_share:.1%}", str(len(k.iterations)),
             str(k.best_iteration) if k.best_iteration else "none correct" if k.iterations else "–",
             k.stop_reason or absent(state, "optimize") or "–", *_fresh(state, k), _integrated(state, k, in_place),
             _credit(state, k)] for k in state.kernels]
    table = Table(["Rank", "Task", "Profiled kernel", "Device-time share", "Iterations", "Best", "Stop reason", "Fresh grading",
                   "Speedup (95% interval)", "Score", "Integrated", "End-to-end credit"], rows,
                  "The kernels chosen by device time, and the grade stage's fresh grading of each best solution")
    steps = [[Code(k.task_id), str(i.iteration), i.model or "default", i.grade.outcome,
              f"{i.grade.speedup:.3f}x" if i.grade.speedup is not None else "–", f"{i.grade.score:.0f}",
              f"{i.grade.rl_reward:.3f}" if i.grade.rl_reward is not None else "none (infra error)",
              f"{i.agent.elapsed_s:.0f} s" + (f", {i.agent.turns} turns" if i.agent.turns else "")]
             for k in state.kernels for i in k.iterations]
    parts: list[Table | svg.Plot | str] = [table]
    if steps:
        parts.append(Table(["Task", "Iteration", "Model", "Outcome", "Speedup", "Score", "RL reward", "Agent"], steps,
                           "Every iteration of the agents' loop"))
    return Section("Kernels", parts + _plots(state))


def _fresh(state: RunState, k: KernelRecord) -> list[str]:
    """Outcome, speedup with interval, and score of the grade stage's fresh grading of ``k``."""
    if k.final is None:
        why = absent(state, "grade") or ("no correct solution to grade" if k.iterations else "not optimized")
        return [f"not graded: {why}", "–", "–"]
    grade = k.final
    # The reason holds text the solution chose (its exception message): the report names only the
    # error class Apex recognizes; the full reason stays in the grading's file.
    known = error_class(grade.reason) if grade.reason and grade.outcome != "ok" else None
    outcome = grade.outcome + (f" ({known})" if known else "")
    speedup = "–" if grade.speedup is None else f"{grade.speedup:.3f}x" + (
        f" ({grade.speedup_ci95[0]:.3f}-{grade.speedup_ci95[1]:.3f}x)" if grade.speedup_ci95 else "")
    return [outcome, speedup, f"{grade.score:.0f} ({grade.normalized_score:.2f})"]


def _credit(state: RunState, k: KernelRecord) -> str:
    """The kernel's end-to-end credit (leave-one-out) from the final benchmark, with its bound."""
    credits = state.final.credits if isinstance(state.final, FinalFigures) else []
    credit = next((c for c in credits if c.task_id == k.task_id), None)
    if credit is None:
        return "–" if not k.integrated else (absent(state, "benchmark-final") or "not measured")
    median, interval, bound = _num(credit.gain.median), _floats(list(credit.gain.interval)), _num(credit.bound)
    if median is None:
        return "not measured"
    text = f"{median:.3f}x" + (f" ({interval[0]:.3f}-{interval[1]:.3f}x)" if len(interval) == 2 else "")
    text += f"; bound {bound:.3f}x" if bound is not None else "; no profiled share"
    return text + ("; IMPLAUSIBLE, not credited" if credit.implausible else "")


def _integrated(state: RunState, k: KernelRecord, in_place: set[str]) -> str:
    """Integrated, and whether it still is: a whole run restores its patches when it ends or stops,
    so a report read later must not suggest the patch is in the stack (one stopped before
    benchmark-final had its patches rolled back unmeasured)."""
    if not k.integrated:
        return f"no: {k.integration_note or absent(state, 'integrate') or 'no reason recorded'}"
    said = f"yes: {k.integration_note}" if k.integration_note else "yes"
    if k.task_id in in_place:
        return f"{said} (in the installed stack now)"
    if state.stages["benchmark-final"].status in ("done", "skipped"):
        return f"{said} (restored when the run ended)"
    return f"{said}; rolled back when the run stopped, before benchmark-final measured it"


def _patched_tasks() -> set[str]:
    """The tasks whose patches are applied in this environment now."""
    from apex_core.patcher import status

    journal = status()
    return {p.task_id for p in journal.active() if p.task_id} if journal is not None else set()


def _plots(state: RunState) -> list[svg.Plot]:
    return [_speedup_plot(state), _device_time_plot(state), _reward_plot(state)]


def _why_ungraded(state: RunState) -> str:
    if not state.kernels:
        return absent(state, "identify") or "no kernel was chosen"
    return absent(state, "grade") or "no kernel had a correct solution to grade"


def _speedup_plot(state: RunState) -> svg.Plot:
    rows = [svg.IntervalRow(k.task_id, k.final.speedup, *(k.final.speedup_ci95 or (k.final.speedup, k.final.speedup)),
                            "integrated" if k.integrated else "")
            for k in state.kernels if k.final is not None and k.final.speedup is not None]
    if not rows:
        graded = any(k.final for k in state.kernels)
        return svg.no_data("Speedup per kernel", "no fresh grading timed a speedup" if graded else _why_ungraded(state))
    return svg.interval_rows(
        "Speedup per kernel (fresh grading)", rows, 1.0, "credited speedup",
        "Credited speedup of each kernel's best solution in the grade stage's fresh grading (geometric mean over shapes; "
        "1.0x when the change is not significant), whiskers its 95% interval, dashed line 1.0x. Green: faster for sure; "
        "red: slower for sure; grey: the interval includes 1.0x.")


def _device_time_plot(state: RunState) -> svg.Plot:
    rows, left_out = [], []
    for k in state.kernels:
        if k.final is None:
            continue
        result, why = load_result(k.final.result_file)
        found = device_times(result) if result else None
        if found:
            rows.append(svg.PairRow(k.task_id, *found))
        else:
            left_out.append(f"{k.task_id}: {why or 'nothing was timed'}")
    if not rows:
        return svg.no_data("Device time per call", "; ".join(left_out) or _why_ungraded(state))
    return svg.before_after_rows(
        "Device time per call, before and after", rows, svg.duration_ns, "time per call", ("baseline (before)", "solution (after)"),
        "From the grader's timings of the fresh grading: geometric mean over the timed shapes of the baseline's and the "
        "solution's median time per call." + (f" Left out: {'; '.join(left_out)}." if left_out else ""))


def _reward_plot(state: RunState) -> svg.Plot:
    series = [(k.task_id, [(i.iteration, i.grade.rl_reward) for i in k.iterations]) for k in state.kernels if k.iterations]
    if not series:
        why = absent(state, "identify") or "no kernel was chosen" if not state.kernels else (
            absent(state, "optimize") or "no iteration was recorded")
        return svg.no_data("RL reward per iteration", why)
    return svg.line_chart(
        "RL reward per iteration", series, "iteration", "RL reward", (0.5, "0.5 = parity (1.0x)"),
        "RL reward of each iteration's grading (0.5 + 0.5 log2 speedup for a correct solution, clipped to [0, 2]; "
        "fixed penalties below 0 for failures; an infrastructure error has none and breaks the line).")


def _accuracy(state: RunState) -> Section:
    gate, title = state.accuracy, "Accuracy gate (the patched model against the original)"
    if "trials" not in gate:
        return Section(title, [absent(state, "integrate") or "the gate did not run (nothing was integrated, or a run "
                                                            "from before the gate)"])
    limits = gate.get("thresholds") if isinstance(gate.get("thresholds"), dict) else {}
    culprits = gate.get("culprits") if isinstance(gate.get("culprits"), list) else []
    facts = [("Verdict", str(gate.get("verdict", "–"))),
             ("Compared", f"{gate.get('prompts', '?')} prompts of {gate.get('prompt_tokens', '?')} tokens, then "
                          f"{gate.get('tokens', '?')} greedy tokens each"),
             ("Thresholds", f"{limits.get('dtype', '?')}: relative L2 {_num(limits.get('relative')) or 0:.2g}, max abs over "
                            f"the largest logit {_num(limits.get('max_abs')) or 0:.2g}, KL {_num(limits.get('kl')) or 0:.2g} nats"),
             ("Rolled back", "; ".join(f"{c.get('task_id', '?')}: {c.get('reason', '')}" for c in culprits
                                       if isinstance(c, dict)) or "none"),
             ("File", Code(str(gate.get("file", "–"))))]
    rows = []
    for trial in gate.get("trials", []) if isinstance(gate.get("trials"), list) else []:
        if not isinstance(trial, dict):
            continue
        names = ", ".join(str(p.get("task_id", "?")) for p in trial.get("patches", []) if isinstance(p, dict)) or "none"
        figures = trial.get("comparison") if isinstance(trial.get("comparison"), dict) else {}
        logits = figures.get("logits") if isinstance(figures.get("logits"), dict) else {}
        tokens = figures.get("tokens") if isinstance(figures.get("tokens"), dict) else {}
        number = (lambda key, d=logits: f"{_num(d.get(key)):.3g}" if _num(d.get(key)) is not None else "–")
        rows.append([names, number("relative"), number("max_abs_ratio"), number("kl_max"),
                     f"{tokens.get('agreed', '–')}/{tokens.get('compared', '–')}" if tokens else "–",
                     "passed" if trial.get("passed") else "FAILED", str(trial.get("reason", ""))[:300]])
    table = Table(["Patch set", "Relative L2", "Max abs / largest logit", "KL max (nats)", "Tokens agreed", "Result", "Why"],
                  rows, "Every patch set the gate compared, in order (bisection when a set failed)")
    return Section(title, [facts, table])


def _final(state: RunState) -> Section:
    final, title = state.final, "Final benchmark (original, control, candidate)"
    if not isinstance(final, FinalFigures):
        return _final_two_arms(state)
    arms, kernel = final.tokens_per_s, final.kernel_gain
    drift, cv, agreement = _num(final.drift), _num(final.original_cv), _num(final.token_agreement)
    facts = [("Kernel gain (candidate / control, credited)", _gain_text(kernel)),
             ("Integration gain (control / original, the adapters with the task baselines; never credited)",
              _gain_text(final.integration_gain)),
             ("Amdahl bound of the winners", f"{final.bound:.3f}x" if _num(final.bound) is not None
              else "none: no profiled share of device time"),
             ("Flags", "; ".join(final.flags) or "none"),
             ("Throughput credited", "yes" if final.credited else "no"),
             ("Token audit", "; ".join(f"{name} {fraction:.1%}" for name, fraction in final.token_audit.items())
              + " of each patched arm's greedy tokens (worst round) within a near-tie of the unpatched model's choice"
              if final.token_audit else "not measured (the workload answers no tokens)"),
             ("Token agreement", f"{agreement:.1%} (the candidate's greedy tokens in common prefix with the control's; "
              "reported, not judged: correct kernels part at near-ties)" if agreement is not None else "not measured"),
             ("Original's CV over the rounds", f"{cv:.2%}" if cv is not None else "–"),
             ("Drift", "not measured" if drift is None else f"{drift:+.1%} (original tokens/s after the rounds over before)"
              + (f", beyond {DRIFT_THRESHOLD:.0%}: the machine changed while it was measured" if abs(drift) > DRIFT_THRESHOLD else "")),
             ("Excluded winners", "; ".join(f"{e.get('task_id', '?')}: {e.get('reason', '')}" for e in final.excluded) or "none"),
             ("Verdict", final.verdict or "–"), ("File", Code(final.file or "–"))]
    names = list(arms)
    rounds = max((len(v) for v in arms.values()), default=0)
    table = Table(["Round", *[f"{n} tokens/s" for n in names]],
                  [[str(i + 1), *[f"{_floats(arms[n])[i]:,.1f}" if i < len(_floats(arms[n])) else "–" for n in names]]
                   for i in range(rounds)], "Tokens/s of each arm, round by round (every arm on the same request seed)")
    pairs = list(zip(_floats(arms.get("control")), _floats(arms.get("candidate"))))
    plot = svg.paired_bars(
        "Tokens/s, control vs candidate", ("control", "candidate"), pairs, "tokens/s",
        "Each round ran the control (task baselines at the winners' points) and the candidate (the winners) on one "
        f"request seed (points, joined per round); bars are the medians. Kernel gain {_gain_text(kernel)}."
    ) if pairs else svg.no_data("Tokens/s, control vs candidate", "the final benchmark recorded no rounds")
    return Section(title, [facts, table, plot])


def _gain_text(gain: Gain) -> str:
    median, (low, high) = _num(gain.median), gain.interval
    if median is None:
        return "not measured"
    spread = f"95% interval {low:.3f}-{high:.3f}x, {gain.interval_method}"
    return f"{median:.3f}x ({spread}; " + ("significant)" if gain.significant else "not significant: includes 1.0)")


def _final_two_arms(state: RunState) -> Section:
    """A run from before the control arm (2026-12-03): original against patched only."""
    final, title = state.final, "Final benchmark (original vs patched; before the control arm)"
    ratio = _num(final.median_ratio) if isinstance(final, TwoArmFinal) else None
    if not isinstance(final, TwoArmFinal) or ratio is None:
        why = absent(state, "benchmark-final") or "the benchmark-final stage left no figures"
        return Section(title, [why, svg.no_data("Tokens/s before and after", why)])
    originals, patcheds = _floats(final.original_tokens_per_s), _floats(final.patched_tokens_per_s)
    low, high = (_floats(list(final.interval or ())) + [math.nan, math.nan])[:2]
    method = final.interval_method or "bootstrap of the median"  # runs before 2026-12-02 recorded none
    spread = f"95% interval {low:.3f}-{high:.3f}x, {method}" if math.isfinite(low + high) else "no interval recorded"
    facts = [("Median ratio", f"{ratio:.3f}x ({spread}); it includes what the patch adapters do by themselves"),
             ("Significant", "yes: the interval excludes 1.0" if final.significant else "no: the interval includes 1.0"),
             ("Verdict", final.verdict or "–"), ("File", Code(final.file or "–"))]
    table = Table(["Pair", "Original tokens/s", "Patched tokens/s", "Ratio"],
                  [[str(n), f"{a:,.1f}", f"{b:,.1f}", f"{b / a:.3f}x" if a else "–"]
                   for n, (a, b) in enumerate(zip(originals, patcheds), 1)])
    return Section(title, [facts, table])


def _reward(state: RunState) -> Section:
    summary = state.summary or ScoreSummary()
    reward, kernel_score, ratio = _num(summary.model_reward), _num(summary.kernel_score), _num(summary.final_ratio)
    formula = "0.7 x kernel score + 0.3 x clip(kernel gain - 1, -0.5, 1.0); the integration gain is never credited"
    if reward is not None:
        credited = summary.throughput_credited
        gain = "–" if ratio is None else f"{ratio:.3f}x" + ("" if credited else " (not credited: flagged or unbounded)")
        return Section("Model reward", [[("Model reward", f"{reward:.3f}"), ("Kernel score", f"{kernel_score:.3f} (mean normalized "
                       "score of the integrated kernels)" if kernel_score is not None else "–"),
                       ("Kernel gain", gain), ("Formula", formula)]])
    score = state.stages["score"]
    why = absent(state, "score") or f"none: {score.summary}"
    from_final = _num(state.final.model_reward) if state.final is not None else None
    if from_final is not None:
        why += f"; benchmark-final reported {from_final:.3f} from the patches' gradings ({formula})"
    return Section("Model reward", [why])


def render_markdown(title: str, sections: list[Section]) -> str:
    lines = [f"# {_md(title)}", "", "Plots are in report.html beside this file.", ""]
    for section in sections:
        lines += [f"## {_md(section.title)}", ""]
        for part in section.parts:
            if isinstance(part, svg.Plot):
                continue
            if isinstance(part, Table):
                lines += [f"**{_md(part.caption)}**", ""] if part.caption else []
                lines += ["| " + " | ".join(_md(h) for h in part.header) + " |", "|" + "---|" * len(part.header)]
                lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in part.rows]
            elif isinstance(part, list):
                lines += [f"- **{_md(label)}:** {_md(value)}" for label, value in part]
            else:
                lines.append(_md(part))
            lines.append("")
    return "\n".join(lines)


def _md(text: str) -> str:
    """Markdown of a plain text: markup characters escaped, identifiers as code spans."""
    flat = " ".join(str(text).split())
    if isinstance(text, Code):  # a pipe ends a table cell even inside a code span
        code = flat.replace("|", "\\|")
        return f"`` {code} ``" if "`" in code else f"`{code}`"
    for char in "\\`*<>|[]":
        flat = flat.replace(char, "\\" + char)
    return flat


CSS = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1f2328; margin: 0 auto; max-width: 1100px; padding: 24px; }
h1 { font-size: 22px; } h2 { font-size: 18px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; margin-top: 32px; }
table { border-collapse: collapse; margin: 12px 0; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } caption { text-align: left; font-weight: 600; padding: 4px 0; }
code { font-size: 12px; background: #f6f8fa; padding: 1px 3px; overflow-wrap: anywhere; }
td code { white-space: nowrap; } td code.wrap { white-space: normal; display: inline-block; min-width: 16em; }
div.wide { overflow-x: auto; }
ul.facts { list-style: none; padding: 0; } ul.facts li { margin: 2px 0; }
p.note { background: #fff8e6; border-left: 4px solid #d9822b; padding: 6px 10px; }
.status { padding: 1px 6px; border-radius: 8px; font-size: 12px; color: #ffffff; background: #6b7280; }
.status-done { background: #2e8b57; } .status-skipped { background: #b7791f; } .status-failed { background: #c0392b; }
.status-running { background: #2f6db5; }
figure { margin: 20px 0; } figcaption { font-size: 12px; color: #57606a; max-width: 760px; }
figure.nodata { border: 1px dashed #d0d7de; padding: 10px 14px; max-width: 732px; }
p.plot-title { font-weight: 600; margin: 0 0 4px; }
svg.plot { max-width: 100%; height: auto; }
"""


def render_html(title: str, sections: list[Section]) -> str:
    body = [f"<h1>{escape(title)}</h1>"]
    for section in sections:
        body.append(f"<h2>{escape(section.title)}</h2>")
        for part in section.parts:
            if isinstance(part, svg.Plot):
                body.append(part.html)
            elif isinstance(part, Table):
                head = "".join(f"<th>{escape(h)}</th>" for h in part.header)
                rows = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in part.rows)
                caption = f"<caption>{escape(part.caption)}</caption>" if part.caption else ""
                body.append(f'<div class="wide"><table>{caption}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>')
            elif isinstance(part, list):
                body.append('<ul class="facts">' + "".join(f"<li><strong>{escape(label)}:</strong> {_cell(value)}</li>"
                                                           for label, value in part) + "</ul>")
            else:
                body.append(f'<p class="note">{escape(part)}</p>')
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>{escape(title)}</title>'
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def _cell(value: str) -> str:
    if isinstance(value, Code):
        wrap = ' class="wrap"' if isinstance(value, LongCode) else ""
        return f"<code{wrap}>{escape(value)}</code>"
    if isinstance(value, Status):
        return f'<span class="status status-{escape(value.split()[0])}">{escape(value)}</span>'
    return escape(value)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def _floats(value: object) -> list[float]:
    return [v for v in (_num(x) for x in value) if v is not None] if isinstance(value, (list, tuple)) else []

"""``apex patch apply|status|restore``: graded solutions into the installed stack, what is patched, undoing it.

Every apex command first rolls back what a killed patcher left open (``apex_core.patcher.recover``,
called from ``main``); these commands show and undo what was applied on purpose.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from apex_core.cli.output import JsonOption, console, print_json, progress_console, progress_reporter

app = typer.Typer(help="Show or undo the patches applied to this Python environment.", no_args_is_help=True,
                  rich_markup_mode=None)


WorkloadOption = Annotated[Optional[str], typer.Option(
    "--workload", help="The workload the patches are for: the points of its kernel stack (as its last 'apex benchmark' "
                       "or 'apex profile' ran it, e.g. with --kernels liger) are used; default: transformers' own modules.")]


def _kernel_stacks(workload: str | None, results_dir: Path) -> tuple[str, ...]:
    from apex_core.pipeline.stages.final.benchmark import workload_kernel_stacks

    return workload_kernel_stacks(workload, results_dir)


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(app, name="patch")
    main_app.command("benchmark-final")(benchmark_final_command)
    main_app.command("integrate")(integrate_command)


def integrate_command(
    results: Annotated[Path, typer.Option("--results", help="Folder of grade results (apex grade --json files), searched recursively; "
                                                           "only gradings this installation's judge signed count, and none in agents' "
                                                           "workspaces (output/<task>/).")] = Path("results"),
    min_speedup: Annotated[float, typer.Option(help="Credited speedup a winner needs (its interval's lower bound must also exceed 1.0).")] = 1.05,
    workload: WorkloadOption = None,
    as_json: JsonOption = False,
) -> None:
    """Patch the winners among graded solutions into the installed stack, each checked inside the model."""
    from apex_core.pipeline.stages.integrate import integrate

    stacks = _kernel_stacks(workload, results)
    with progress_reporter("integrate") as progress:
        report = integrate(results, min_speedup, kernel_stacks=stacks, progress=progress)
    if as_json:
        print_json(report.model_dump(mode="json"))
        return
    for candidate in report.candidates:
        mark = "winner" if candidate in report.winners else f"skipped: {candidate.why_not}"
        console.print(f"{candidate.task_id}  {candidate.solution}  {candidate.speedup or 0:.3f}x  {mark}", highlight=False)
    for patch in report.patches:
        console.print(f"{'applied' if patch.applied else 'rolled back'} {patch.patch_id} {patch.task_id}"
                      + ("" if patch.applied else f": {patch.reason}"), highlight=False)
    if not report.candidates:
        console.print(f"no grade results under {results}")


def benchmark_final_command(
    workload: Annotated[str, typer.Option("--workload", help="The workload, e.g. cpu-mini, as its last 'apex benchmark' or 'apex profile' resolved it (depth, kernel stacks).")],
    runs: Annotated[Optional[int], typer.Option(help="Rounds, each arm once per round (default: as many as the workload's last 'apex benchmark', at least 6: the fewest for a distribution-free 95% interval).")] = None,
    results_dir: Annotated[Path, typer.Option(help="Where the first benchmark's or profile's results are and final.json goes.")] = Path("results"),
    unconfined: Annotated[bool, typer.Option("--unconfined", help="Run the workers with your own rights where patched code cannot be confined (recorded in the result).")] = False,
    as_json: JsonOption = False,
) -> None:
    """The workload three ways in one session: original, control (the task baselines at the winners' patch
    points) and candidate (the winners), in rotating rounds; the kernel gain (candidate / control, what the
    kernels earned) and the integration gain (control / original, what the adapters do, never credited), each
    with a 95% interval, each winner's leave-one-out credit and Amdahl bound, drift; then every patch restored."""
    from apex_core.pipeline.stages.final.benchmark import as_first_benchmarked, benchmark_final
    from apex_core.pipeline.stages.identify import profiled_shares

    spec, count = as_first_benchmarked(workload, results_dir, runs)
    shares = profiled_shares(spec.resolved(), results_dir)
    with progress_reporter("benchmark-final") as progress:
        result = benchmark_final(spec, count, results_dir, shares=shares, unconfined=unconfined, progress=progress)
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    console.print(f"{result.workload.id}: {result.verdict}", highlight=False)
    for arm, values in result.tokens_per_s.items():
        console.print(f"{arm:<{max(map(len, result.tokens_per_s))}}  tokens/s {', '.join(f'{v:,.0f}' for v in values)}",
                      highlight=False)
    for credit in result.credits:
        bound = f"bound {credit.bound:.3f}x from a {credit.share:.1%} share" if credit.bound is not None else "no profiled share"
        console.print(f"end-to-end credit of {credit.task_id}: {credit.gain.describe()}; {bound}"
                      + ("  IMPLAUSIBLE" if credit.implausible else ""), highlight=False)
    for left_out in result.excluded:
        console.print(f"left out {left_out['task_id']}: {left_out['reason']}", highlight=False)
    for flag in result.flags:
        console.print(f"flagged {flag}", highlight=False)
    console.print(f"model reward {result.model_reward:.3f} ({result.reward_note})" if result.model_reward is not None
                  else f"model reward: none ({result.reward_note})", highlight=False)
    console.print(f"drift of the original over the session {result.drift:+.1%}" + ("  DRIFT" if result.drift_flagged else "")
                  + f"; {result.results_dir}/final.json; patches restored", highlight=False)


@app.command("apply")
def apply_command(
    task: Annotated[str, typer.Option("--task", help="The task whose solution to patch in, e.g. cpu-mini__rms_norm.")],
    solution: Annotated[Path, typer.Option("--solution", help="The graded solution file.")],
    results_dir: Annotated[Path, typer.Option(help="Where the journal and its backups go (results/patches/...).")] = Path("results"),
    device: Annotated[Optional[str], typer.Option(help="Device for the check inside the model (default: the task's).")] = None,
    point: Annotated[Optional[str], typer.Option("--point", help="Which patch point, e.g. liger.llama.rms_norm for a workload run "
                                                 "with --kernels liger (default: the first installed; docs/patching.md).")] = None,
    workload: WorkloadOption = None,
    as_json: JsonOption = False,
) -> None:
    """Patch a solution into the installed stack and check it inside the model; rolled back alone if the check fails.

    Unlike apex integrate and the MCP tool apply_patch, this takes your word for the file: it needs no grading (a
    note on stderr says when no grading of exactly this file was signed here). Exit 0 when it is applied, 1 when it
    was rolled back (the reason is printed)."""
    from apex_core.patcher.apply import apply_solutions
    from apex_core.patcher.gradings import verified_grading

    ungraded = solution.is_file() and verified_grading(task, solution) is None  # the bytes about to be patched
    with progress_reporter("patch") as progress:
        (result,) = apply_solutions([(task, solution)], results_dir, device=device, points={task: point} if point else None,
                                     kernel_stacks=_kernel_stacks(workload, results_dir), progress=progress)
    if ungraded:
        progress_console.print(f"note: no confined grading of exactly {solution} for {task} was signed here; patched on your word "
                               f"(apex integrate and the MCP apply_patch would refuse it; apex grade --task {task} --solution "
                               f"{solution} grades it)", soft_wrap=True, highlight=False)
    if as_json:
        print_json(result.model_dump(mode="json"))
    elif result.applied:
        console.print(f"applied {result.patch_id}: {result.task_id} at {result.point} ({result.target}); "
                      f"{result.check.shapes_checked} test shapes passed inside the model; undo with 'apex patch restore'",
                      highlight=False)
    else:
        console.print(f"rolled back {result.patch_id}: {result.reason}", highlight=False)
    if not result.applied:
        raise typer.Exit(1)


@app.command("status")
def status_command(as_json: JsonOption = False) -> None:
    """What is patched in this environment, and every other change since the patch session began, whoever made it
    (new, removed, replaced or edited files, .pth files and bytecode included), each with its way back."""
    from apex_core.patcher import environment_status

    shown = environment_status()
    if as_json:
        print_json(shown.model_dump(mode="json"))
        return
    if shown.problem:
        console.print(f"warning: {shown.problem}", highlight=False)
    journal = shown.journal
    if journal is not None and journal.active():
        console.print(f"journal: {journal.folder}", highlight=False)
        for record in journal.active():
            files = [e.target for e in journal.entries_of(record.id) if not e.target.endswith(".pyc")]
            owner = f"  owned by process {record.owner.pid}" if record.owner else ""
            console.print(f"{record.id}  {record.state}  task {record.task_id or '-'}  solution {record.solution or '-'}{owner}",
                          highlight=False)
            for path in files:
                console.print(f"    {path}", highlight=False)
    if shown.differences:
        console.print(f"{len(shown.differences)} change(s) since the patch session began ({shown.session_since}) that no patch "
                      "made:", highlight=False)
        for difference in shown.differences:
            console.print(f"  {difference.change:<8} {difference.path}: {difference.detail}; {difference.way_back}",
                          highlight=False)
    seen = {d.path for d in shown.differences}
    for line in shown.unaccounted:
        if line.split(":", 1)[0] not in seen:
            console.print(f"warning: {line}; reinstall the package (pip install --force-reinstall --no-deps NAME) to be sure "
                          "of what runs", highlight=False)
    if not shown.patched:
        clean = not shown.unaccounted and not shown.problem
        console.print("nothing is patched in this environment" + ("" if clean else " by apex's journal"))


@app.command("check")
def check_command(
    workload: Annotated[str, typer.Option("--workload", help="The workload whose model is compared, e.g. cpu-mini (as its "
                                                            "last 'apex benchmark' or 'apex profile' resolved it, kernel stacks included).")],
    prompts: Annotated[Optional[int], typer.Option(help="Fixed prompts run through both models (default 4).")] = None,
    tokens: Annotated[Optional[int], typer.Option(help="Greedy tokens decoded per prompt after the prefill's (default 16).")] = None,
    results_dir: Annotated[Path, typer.Option(help="Where the workload's benchmarks are and accuracy.json goes.")] = Path("results"),
    unconfined: Annotated[bool, typer.Option("--unconfined", help="Run the models with your own rights where patched code "
                                                                  "cannot be confined (recorded in the report).")] = False,
    as_json: JsonOption = False,
) -> None:
    """The accuracy gate on what is patched: the patched model against the original (same weights, seed and prompts),
    logits (relative and absolute error, KL) and greedy tokens up to the first near-tie, under thresholds per dtype.
    A failing patch set is bisected to the patches that make it fail, which are rolled back; the environment keeps
    exactly the patches that passed. Exit 0 when every patch passed, 1 when one was rolled back (the reason is printed)."""
    from apex_core.patcher.accuracy import DEFAULT_PROMPTS, DEFAULT_TOKENS, accuracy_gate
    from apex_core.pipeline.stages.final.benchmark import as_first_benchmarked

    spec, _ = as_first_benchmarked(workload, results_dir, None)
    with progress_reporter("accuracy gate") as progress:
        report = accuracy_gate(spec, results_dir, prompts=DEFAULT_PROMPTS if prompts is None else prompts,
                               tokens=DEFAULT_TOKENS if tokens is None else tokens, unconfined=unconfined, progress=progress)
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        for tried in report.trials:
            figures = tried.comparison.logits if tried.comparison else None
            numbers = (f"relative {figures.relative:.3g}, max abs {figures.max_abs:.3g}, KL {figures.kl_max:.3g}; "
                       f"tokens {tried.comparison.tokens.agreed}/{tried.comparison.tokens.compared}" if figures and tried.comparison else "")
            console.print(f"{'passed' if tried.passed else 'FAILED'}  {', '.join(p.task_id for p in tried.patches)}  "
                          f"{numbers}" + ("" if tried.passed else f"  ({tried.reason})"), highlight=False)
        for culprit in report.culprits:
            console.print(f"rolled back {culprit.task_id}: {culprit.reason}", highlight=False)
        kept = ", ".join(p.task_id for p in report.kept) or "nothing (the environment is restored)"
        console.print(f"{report.workload.id} ({report.thresholds.dtype}, {report.prompts} prompts, {report.tokens} tokens): "
                      f"kept {kept}; {report.results_dir}/accuracy.json", highlight=False)
    if not report.passed:
        raise typer.Exit(1)


@app.command("restore")
def restore_command(
    forget: Annotated[bool, typer.Option("--forget", help="Drop the patch session without writing anything, once you have "
                                                          "put back by hand what a restore reported it could not.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Undo every patch and every other change since the patch session began: each patched file put back byte for
    byte (checked by its sha256), new files removed, replaced or removed files brought back from the session's hard
    links; what cannot be brought back is listed with its way back and the session stays open."""
    from apex_core.patcher import restore

    report = restore(forget=forget)
    if as_json:
        print_json(report.model_dump(mode="json") if report else {"patches": [], "files_restored": 0, "files_unchanged": 0,
                                                                   "journal": None, "environment": [], "forgotten": False})
        return
    if report is None:
        console.print("nothing is patched in this environment")
        return
    if report.forgotten:
        console.print(f"dropped the patch session (journal {report.journal}) without writing anything", highlight=False)
        return
    for line in report.environment:
        console.print(f"undid {line}", highlight=False)
    console.print(f"restored {len(report.patches)} patch(es): {report.files_restored} file(s) put back, "
                  f"{report.files_unchanged} already original, {len(report.environment)} other change(s) undone; "
                  f"journal {report.journal}", highlight=False)

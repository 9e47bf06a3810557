"""The judge: grades one solution file against a task, never importing the solution itself.

A grading is a short sequence of stages, each in its own module, all working on one
``Grading`` (``grading.py``):

1. queue for the device (``slots``; ``Grading.on_device`` says when it is held exclusively) and
   start the solution's worker;
2. on a GPU, measure that worker's own shift on our baseline before any solution code runs
   (``calibration``);
3. load the solution (import, compile) in the worker: a failure is a compile error;
4. correctness on every test and hidden shape, several seeds each (``correctness``);
5. timing against the baseline, interleaved, with the checks on what was timed (``timing``,
   ``timed_checks``), or by an installed Magpie (``magpie.grading``);
6. the verdict: the source prescan, the integrity of Apex's files and libraries, the credited
   speedup, score and provenance (``verdict``).
"""

from __future__ import annotations

from pathlib import Path

from apex_core.errors import ApexUserError
from apex_core.grader import correctness, fingerprint, integrity, prescan, verdict
from apex_core.grader.calibration import calibrate, calibrates
from apex_core.grader.grading import Grading, GradingFailed
from apex_core.grader.options import GradeOptions
from apex_core.grader.isolation.process import WorkerFailure, confinement_problem
from apex_core.grader.result import GradeResult, Outcome
from apex_core.grader.solution_file import check_solution_file
from apex_core.grader.state import STATE
from apex_core.grader.timing import time_with_ceiling
from apex_core.progress import Progress
from apex_core.tasks.schema import Task

_WORKER_FAILURES = {"timeout": Outcome.timeout, "tampering": Outcome.tampering, "infra_error": Outcome.infra_error}


def grade(task: Task, solution: Path, options: GradeOptions | None = None, progress: Progress | None = None) -> GradeResult:
    """Grade ``solution`` for ``task``; user mistakes (a missing file) raise SolutionFileError.

    ``progress(fraction, message)`` is called as the grading moves through its stages.
    """
    options = options or GradeOptions()
    solution = check_solution_file(task, Path(solution))
    if options.backend == "magpie" and options.timing:
        _require_magpie(task)
    _require_confinement(options)
    run = Grading(task, solution, options, progress)
    if options.unconfined:
        run.flags.append("unconfined: the solution ran with the judge's own rights, outside the sandbox (--unconfined)")
    run.progress(0.0, "starting a worker and loading the solution")
    findings = prescan.scan_source(solution.read_text(encoding="utf-8", errors="replace"))
    run.flags.extend(finding.flag() for finding in findings)
    with run.phase("integrity"):
        snapshot = integrity.take_snapshot()
    # The clocks are read by a vendor tool (tens of milliseconds): alongside the work, not before it.
    clocks_before = STATE.background.submit(fingerprint.read_clocks, run.on_gpu)
    compiled = correct = False
    outcome, reason = Outcome.ok, ""
    # The device's slot is held stage by stage (``Grading.on_device``): exclusively while the grading
    # measures (calibration, timing); while its workers start, load and check, shared where it checks
    # side by side with other gradings (on the CPU), else still exclusively, from first stage to last.
    try:
        if STATE.dirty_environment:
            raise GradingFailed(
                Outcome.infra_error,
                f"an earlier solution changed installed libraries ({STATE.dirty_environment[0]}); reinstall them "
                "(bash setup.sh) and start a new grading process",
            )
        with run.on_device(), run.phase("load"):
            candidate = run.start_worker()
        with candidate:
            if calibrates(run):
                with run.on_device(exclusive=True), run.phase("calibration"):
                    try:
                        calibrate(run, candidate)
                    except (GradingFailed, WorkerFailure) as failure:  # only our own code has run there yet
                        raise GradingFailed(Outcome.infra_error, f"calibrating the solution's worker: {failure}") from None
            run.progress(0.05, "loading the solution (importing and compiling it)")
            with run.on_device():
                with run.phase("load"):
                    run.load_into(candidate, solution, run.candidate_cache())
                compiled = True
                with run.phase("correctness"):
                    failure = correctness.check(run, candidate)
            if failure:
                raise GradingFailed(*failure)
            correct = True
            if run.times:
                with run.on_device(exclusive=True), run.phase("timing"):
                    if options.backend == "magpie":
                        from apex_core.grader.magpie.grading import time_with_magpie

                        time_with_magpie(run)
                    else:
                        time_with_ceiling(run, candidate)
            elif run.interpreted:
                run.flags.append("not_timed: Triton ran in the CPU interpreter, whose speed means nothing")
    except GradingFailed as failed:
        outcome, reason = failed.outcome, failed.reason
    except WorkerFailure as failure:
        outcome, reason = _WORKER_FAILURES.get(failure.kind, Outcome.crash), str(failure)
    finally:
        run.close()

    outcome, reason = verdict.with_prescan(findings, outcome, reason)
    clocks_after = STATE.background.submit(fingerprint.read_clocks, run.on_gpu)
    run.progress(0.97, "checking that Apex's files and the libraries are as they were")
    with run.phase("integrity"):
        outcome, reason = verdict.with_integrity(run, snapshot, outcome, reason)
    return verdict.result(run, outcome, reason, compiled, correct, clocks_before.result(), clocks_after.result())


def _require_magpie(task: Task) -> None:
    """A Magpie grading that cannot happen is the user's mistake: say so before anything runs."""
    from apex_core.grader import magpie

    magpie.require_magpie_root()
    reason = magpie.magpie_supports(task)
    if reason:
        raise ApexUserError(f"--backend magpie cannot grade {task.id}: {reason}; use --backend apex")


def _require_confinement(options: GradeOptions) -> None:
    """Refuse, in one line and before anything runs, to run a solution that cannot be confined,
    unless the user asked for it (``unconfined``)."""
    if options.unconfined:
        return
    if options.backend == "magpie" and options.timing:
        raise ApexUserError(
            "--backend magpie runs the solution in Magpie's own processes, which Apex cannot confine; "
            "pass --unconfined to time with Magpie anyway (the result records it)"
        )
    problem = confinement_problem()
    if problem:
        raise ApexUserError(
            f"refusing to grade: solutions cannot be confined on this machine ({problem}); "
            "pass --unconfined to run them with your own rights (the result records it)"
        )

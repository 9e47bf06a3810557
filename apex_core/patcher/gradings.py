"""Which gradings a patch may stand on, and where result files are never read from.

A solution goes into the installed stack on a grading only when that grading is one this
installation's judge signed (``apex_core.grader.ledger``) of exactly the file's present bytes, made
confined (an unconfined solution ran with the user's rights, could read the signing key and could
have written any verdict), against the task as it is defined now, with every test and hidden shape
checked (not the ``benchmark`` tool's quick gate), and passing: ok, correct, no flag. ``apex
integrate`` adds its speedup rule on top (``integrate.judge``); the MCP tool ``apply_patch`` takes
the file's newest such grading (``require_graded``); the final benchmark takes a patched file's
kernel score from ``verified_grading``.

Result files are plain JSON and prove nothing by themselves: a file under ``--results`` only
names a grading, which the ledger must hold. Files in an agent's workspace are never taken at all
(``in_agent_workspace``): the workspace is where an agent writes, and the pipeline's own copies
there (``grade_iter*.json``) are the agent's to edit.
"""

from __future__ import annotations

from pathlib import Path

from apex_core.errors import ApexUserError
from apex_core.grader import GradeOptions, GradeResult, GradingLedger, Outcome, file_hash
from apex_core.tasks import all_tasks, get_task

WORKSPACES_FOLDER = "output"
"""Agents work in ``<folder>/output/<task id>/`` (the pipeline's ``<run>/output/``, ``apex eval
--output-dir``, the prompts' solution paths): their files, transcripts and the pipeline's copies of
each iteration's grading there are the agent's to write."""


def in_agent_workspace(path: Path) -> bool:
    """Whether ``path`` lies in an agent's workspace: below an ``output/<task id>/`` folder, as
    given or with its links resolved."""
    tasks = set(all_tasks())
    for form in (path.absolute(), path.resolve()):
        parts = form.parts
        if any(folder == WORKSPACES_FOLDER and task in tasks for folder, task in zip(parts, parts[1:-1])):
            return True
    return False


def grading_problems(result: GradeResult, ledger: GradingLedger) -> list[str]:
    """Why ``result`` cannot carry a patch of the file it names (empty when it can), one line each."""
    problems = []
    unsigned = ledger.verify(result)
    if unsigned:
        problems.append(unsigned)
    if result.provenance.unconfined:
        problems.append("graded unconfined (--unconfined): the solution ran with your rights and could have written its verdict")
    task_problem = _task_problem(result)
    if task_problem:
        problems.append(task_problem)
    if result.outcome is not Outcome.ok or not result.correct:
        problems.append(f"outcome {result.outcome.value}" + ("" if result.correct else ", not correct"))
    elif not task_problem and (partial := _partial_check(result)):
        problems.append(partial)
    if result.flags:
        problems.append(f"flagged {', '.join(result.flags)}")
    present = _present_hash(Path(result.solution_path))
    if present is None:
        problems.append("the solution file is gone")
    elif present != result.provenance.solution_hash:
        problems.append("the solution changed since it was graded")
    return [" ".join(problem.split()) for problem in problems]  # one line each, whatever a flag holds


def verified_grading(task_id: str, solution_path: Path, ledger: GradingLedger | None = None) -> GradeResult | None:
    """The grading of ``solution_path``'s present bytes as a solution of ``task_id`` that this
    installation's judge signed, made confined, against the task as defined now, with
    ``solution_path`` as its path; None when there is none (no such file, never graded here, graded
    only unconfined or for another version of the task, or the record was tampered with).

    Which one, where the file was graded several times: the newest, since the best of noisy
    measurements of one file overstates it; a failure counts whenever it came. Passes that say less
    than a full grading are passed over: one that checked fewer cases (the ``benchmark`` tool's
    quick gate) always, one that timed nothing (``check_correctness``) where a timed one exists.
    Its verdict may be any (a wrong answer too): ``grading_problems`` says whether it can carry a patch."""
    path = Path(solution_path)
    present = _present_hash(path)
    if present is None:
        return None
    usable = [signed.result for signed in (ledger or GradingLedger()).signed(task_id, present)
              if not signed.result.provenance.unconfined and _task_problem(signed.result) is None
              and not (_passed(signed.result) and _partial_check(signed.result))]
    measured = [result for result in usable if result.timings or not _passed(result)]
    chosen = (measured or usable)[:1]
    return chosen[0].model_copy(update={"solution_path": str(path)}) if chosen else None


def _present_hash(path: Path) -> str | None:
    """The sha256 of the file at ``path`` now; None where there is no readable file (a path from a
    result file may be anything: too long, a NUL byte, a folder)."""
    try:
        return file_hash(path) if path.is_file() else None
    except (OSError, ValueError):
        return None


def _passed(result: GradeResult) -> bool:
    return result.outcome is Outcome.ok and result.correct


def _task_problem(result: GradeResult) -> str | None:
    """Why ``result`` is not a grading of a task as this installation defines it now, if it is not."""
    try:
        task = get_task(result.task_id)
    except ApexUserError:
        return f"{result.task_id} is no task of this installation"
    if result.provenance.task_hash != task.content_hash():
        return f"graded against another version of {task.id} (its definition, reference or baseline changed since); grade it again"
    return None


def _partial_check(result: GradeResult) -> str | None:
    """Why a passing ``result`` checked less than a full grading does (every test and hidden shape,
    ``GradeOptions().seeds_per_shape`` seeds each), if it did."""
    task = get_task(result.task_id)
    seeds = GradeOptions().seeds_per_shape
    visible = sum(check.passed and not check.hidden for check in result.checks)
    hidden = sum(check.passed and check.hidden for check in result.checks)
    if visible >= seeds * len(task.test_shapes) and hidden >= seeds * len(task.hidden_shapes):
        return None
    return (f"a partial check ({visible + hidden} of {seeds * (len(task.test_shapes) + len(task.hidden_shapes))} cases, "
            "as the benchmark tool's quick gate): only a full grading (grade_solution, apex grade) can carry a patch")


def require_graded(task_id: str, solution_path: Path, ledger: GradingLedger | None = None) -> GradeResult:
    """The grading a patch of ``solution_path`` stands on (its newest verified one, passing), or an
    ApexUserError that says what is missing and how to get it."""
    task = get_task(task_id)
    path = Path(solution_path).expanduser()
    if _present_hash(path) is None:
        raise ApexUserError(f"solution_path {solution_path}: no such file; give the solution you graded, e.g. "
                            f"output/{task.id}/{task.solution_filename}")
    ledger = ledger or GradingLedger()
    grading = verified_grading(task.id, path, ledger)
    if grading is None:
        raise ApexUserError(f"{solution_path} has no confined grading of its present content for {task.id} by this installation; "
                            "grade exactly this file with grade_solution (or apex grade), then patch it unchanged")
    problems = grading_problems(grading, ledger)
    if problems:
        raise ApexUserError(f"{solution_path}: its newest grading here cannot carry a patch ({'; '.join(problems)}); "
                            "patch a solution whose newest full grading is ok, correct and unflagged")
    return grading

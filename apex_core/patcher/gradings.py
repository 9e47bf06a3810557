"""Which gradings a patch may stand on, and where result files are never read from.

A solution goes into the installed stack on a grading only when that grading is one this
installation's judge signed (``apex_core.grader.ledger``) of exactly the file's present bytes, made
confined (an unconfined solution ran with the user's rights, could read the signing key and could
have written any verdict), and passing: ok, correct, no flag. ``apex integrate`` adds its speedup
rule on top (``integrate.judge``); the MCP tool ``apply_patch`` takes the file's newest such
grading (``require_graded``); the final benchmark takes a patched file's kernel score from
``verified_grading``.

Result files are plain JSON and prove nothing by themselves: a file under ``--results`` only
names a grading, which the ledger must hold. Files in an agent's workspace are never taken at all
(``in_agent_workspace``): the workspace is where an agent writes, and the pipeline's own copies
there (``grade_iter*.json``) are the agent's to edit.
"""

from __future__ import annotations

from pathlib import Path

from apex_core.errors import ApexUserError
from apex_core.grader.ledger import GradingLedger
from apex_core.grader.result import GradeResult, Outcome
from apex_core.grader.solution_file import file_hash
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
    """Why ``result`` cannot carry a patch of the file it names (empty when it can), one phrase each."""
    problems = []
    unsigned = ledger.verify(result)
    if unsigned:
        problems.append(unsigned)
    if result.provenance.unconfined:
        problems.append("graded unconfined (--unconfined): the solution ran with your rights and could have written its verdict")
    if result.outcome is not Outcome.ok or not result.correct:
        problems.append(f"outcome {result.outcome.value}" + ("" if result.correct else ", not correct"))
    if result.flags:
        problems.append(f"flagged {', '.join(result.flags)}")
    solution = Path(result.solution_path)
    if not solution.is_file():
        problems.append("the solution file is gone")
    elif file_hash(solution) != result.provenance.solution_hash:
        problems.append("the solution changed since it was graded")
    return [" ".join(problem.split()) for problem in problems]  # one line each, whatever a flag holds


def verified_grading(task_id: str, solution_path: Path, ledger: GradingLedger | None = None) -> GradeResult | None:
    """The newest confined grading of ``solution_path``'s present bytes as a solution of ``task_id``
    that this installation's judge signed, with ``solution_path`` as its path; None when there is
    none (no such file, never graded here, graded only unconfined, or the record was tampered with).

    Its verdict may be any (a wrong answer too): the newest grading, not the best of several, is
    what the file is worth, since the best of noisy measurements of one file overstates it."""
    path = Path(solution_path)
    if not path.is_file():
        return None
    for signed in (ledger or GradingLedger()).signed(task_id, file_hash(path)):
        if not signed.result.provenance.unconfined:
            return signed.result.model_copy(update={"solution_path": str(path)})
    return None


def require_graded(task_id: str, solution_path: Path, ledger: GradingLedger | None = None) -> GradeResult:
    """The grading a patch of ``solution_path`` stands on (its newest verified one, passing), or an
    ApexUserError that says what is missing and how to get it."""
    task = get_task(task_id)
    path = Path(solution_path).expanduser()
    if not path.is_file():
        raise ApexUserError(f"solution_path {solution_path}: no such file; give the solution you graded, e.g. "
                            f"output/{task.id}/{task.solution_filename}")
    ledger = ledger or GradingLedger()
    grading = verified_grading(task.id, path, ledger)
    if grading is None:
        raise ApexUserError(f"{solution_path} has no confined grading of its present content for {task.id} by this installation; "
                            "grade exactly this file with grade_solution (or apex grade), then patch it unchanged")
    problems = grading_problems(grading, ledger)
    if problems:
        raise ApexUserError(f"{solution_path}: its newest grading here cannot be patched in ({'; '.join(problems)}); "
                            "patch a solution whose newest grading is ok, correct and unflagged")
    return grading

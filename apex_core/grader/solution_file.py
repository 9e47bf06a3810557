"""The solution file as the judge first meets it: a path a user or an agent gave, checked before
anything runs, and the content hash that names it in results, caches and compile caches."""

from __future__ import annotations

import hashlib
from pathlib import Path

from apex_core.errors import SolutionFileError
from apex_core.grader.isolation import native
from apex_core.tasks.schema import Task


def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes: the identity of a solution in results, caches and compile caches."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def allowed_suffixes(task: Task) -> tuple[str, ...]:
    """The file endings a solution of ``task`` may have: C++/HIP/CUDA sources for HIP tasks, else Python."""
    return native.COMPILED_SUFFIXES if task.language == "hip" else (".py",)


def check_solution_file(task: Task, solution: Path) -> Path:
    """The solution path as a readable file of the right kind, or a SolutionFileError."""
    try:
        exists = solution.exists()
    except (OSError, ValueError) as exc:  # a name over the file-name limit, a NUL byte, ...
        name = str(solution)
        shown = name if len(name) <= 100 else f"{name[:60]}...{name[-30:]} ({len(name)} characters)"
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SolutionFileError(
            f"solution path {shown} cannot be opened: {why}; give the solution's path, e.g. output/{task.id}/{task.solution_filename}"
        ) from None
    if not exists:
        raise SolutionFileError(f"solution file {solution} does not exist; write output/{task.id}/{task.solution_filename}")
    if not solution.is_file():
        raise SolutionFileError(f"solution path {solution} is not a file; expected a {task.solution_filename}")
    allowed = allowed_suffixes(task)
    if solution.suffix not in allowed:
        raise SolutionFileError(
            f"solution {solution} must be a {' or '.join(allowed)} file for the {task.language} task {task.id}"
        )
    try:
        solution.read_bytes()
    except OSError as exc:
        raise SolutionFileError(f"solution file {solution} is not readable: {exc.strerror}") from None
    return solution.resolve()


def solution_paths(task: Task, given: list[Path]) -> list[Path]:
    """``given`` with each folder replaced by its solution files for ``task`` (the folder's own
    files of an allowed ending, by name; hidden files left out): grading a folder of candidates is
    one command. A folder without any is a SolutionFileError naming what it looked for; files are
    left to ``check_solution_file``."""
    paths: list[Path] = []
    allowed = allowed_suffixes(task)
    for path in given:
        try:
            is_folder = path.is_dir()
        except (OSError, ValueError):
            is_folder = False  # check_solution_file says why in one line
        if not is_folder:
            paths.append(path)
            continue
        found = sorted(f for f in path.iterdir() if f.suffix in allowed and not f.name.startswith(".") and f.is_file())
        if not found:
            raise SolutionFileError(f"folder {path} holds no {' or '.join(allowed)} solution file for the {task.language} task "
                                    f"{task.id}; give a folder of solutions or a file, e.g. output/{task.id}/{task.solution_filename}")
        paths.extend(found)
    return paths


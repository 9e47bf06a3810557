"""Where our own optimized solution of each task lives, and how it is handed out as one file.

Every task ships with a solution we wrote: it proves the task solvable, sets the bar and is the
SFT target of ``apex tasks export``. Graded agents must never see it, so prompts and tools never
name this directory, agent runs deny reads of it, and the grader's sandboxed user cannot enter it
(see ``apex_core.grader.isolation.process``).

Solutions are kept per kernel, so that code that is the same for every model exists once:

- ``reference_solutions/<kernel>/solution.py`` (or ``.hip``): the kernel's solution, for every model
  that has no file of its own;
- ``reference_solutions/<kernel>/solution_<variant>.py``: the solution of a variant of the kernel,
  for every task whose baseline is that variant's (``baseline_triton_zero_centered.py`` ->
  ``solution_zero_centered.py``: Gemma 2's and Qwen3.5's 1 + w norms; ``baseline_grouped_topk_triton.py``
  -> ``solution_grouped_topk.py``): what differs in code follows what the task computes, not which
  model it was first written for;
- ``reference_solutions/<kernel>/<model-slug>.py``: a model whose solution differs in its code beyond
  its variant (the CPU demo task's is ``apex_core/agents/canned/<task id>.py``, public by design);
- ``reference_solutions/<kernel>/constants.toml``: where the shared code differs between models only
  in a few numbers (launch tiles tuned per model), one table per model. The shared file has one line
  ``# apex:model-constants`` where the task's model's constants are written in when it is handed
  out, so the graded or exported file is still one self-contained file with only its model's numbers.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path
from typing import Any

from apex_core.errors import TaskDefinitionError
from apex_core.tasks.schema import Task

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

REFERENCE_SOLUTIONS_DIR = Path(__file__).resolve().parents[2] / "reference_solutions"
DEMO_SOLUTIONS_DIR = Path(__file__).resolve().parents[1] / "agents" / "canned"
"""The CPU demo task's solution is the one the dry-run agent submits (it is public by design)."""
CONSTANTS_FILE = "constants.toml"
CONSTANTS_MARKER = "# apex:model-constants"
HANDED_OUT_DIR = REFERENCE_SOLUTIONS_DIR / ".handed-out"
"""Generated single files of solutions with per-model constants. Inside ``reference_solutions`` so
that the directory's seal (the sandbox user cannot enter it) covers them too; ignored by git."""
_CONSTANT_NAME = re.compile(r"[A-Z][A-Z0-9_]*")


_BASELINE_WORDS = frozenset({"baseline", "triton", "hip", "cuda", "python"})


def baseline_variant(task: Task) -> str | None:
    """The variant the task's baseline file names, the words other than "baseline" and its language
    (``baseline_triton_zero_centered.py`` -> ``zero_centered``), or None for the kernel's plain baseline."""
    words = [word for word in Path(task.baseline).stem.split("_") if word not in _BASELINE_WORDS]
    return "_".join(words) or None


def reference_solution_source_path(task: Task) -> Path | None:
    """The file our solution of ``task`` is kept in, or None: the model's own file, else its
    variant's, else the kernel's shared one."""
    suffix = Path(task.solution_filename).suffix
    kernel_dir = REFERENCE_SOLUTIONS_DIR / task.kernel
    variant = baseline_variant(task)
    candidates = [DEMO_SOLUTIONS_DIR / f"{task.id}.py", kernel_dir / f"{task.model}{suffix}"]
    if variant:
        candidates.append(kernel_dir / f"solution_{variant}{suffix}")
    for path in (*candidates, kernel_dir / task.solution_filename):
        if path.is_file():
            return path
    return None


def model_constants(task: Task, source: Path) -> dict[str, Any] | None:
    """The constants ``source`` takes for ``task``'s model, or None where it takes none."""
    constants_path = source.parent / CONSTANTS_FILE
    if source.parent.parent != REFERENCE_SOLUTIONS_DIR or source.stem != "solution" or not constants_path.is_file():
        return None
    try:
        tables = tomllib.loads(constants_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskDefinitionError(f"{constants_path} is not valid TOML: {exc}") from None
    if task.model not in tables:
        raise TaskDefinitionError(f"{constants_path} has no [{task.model}] table for task {task.id} (it has: {', '.join(sorted(tables))})")
    constants = tables[task.model]
    for name in constants:
        if not _CONSTANT_NAME.fullmatch(name):
            raise TaskDefinitionError(f"{constants_path}: [{task.model}] {name!r} is not an UPPER_CASE constant name")
    return constants


def _literal(value: Any) -> str:
    """A TOML value as Python source; arrays become tuples (constants are not meant to change)."""
    if isinstance(value, list):
        items = [_literal(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, (bool, int, float, str)):
        return repr(value)
    raise TaskDefinitionError(f"constant value {value!r} is not a number, string, boolean or array of them")


def render_solution(task: Task, source: Path) -> str:
    """The text handed out for ``task``: the source itself, with its model's constants written in."""
    text = source.read_text(encoding="utf-8")
    constants = model_constants(task, source)
    if constants is None:
        return text
    lines = text.splitlines(keepends=True)
    marks = [i for i, line in enumerate(lines) if line.strip() == CONSTANTS_MARKER]
    if len(marks) != 1:
        raise TaskDefinitionError(f"{source} takes per-model constants but has {len(marks)} '{CONSTANTS_MARKER}' lines, not 1")
    block = [f"# {task.model}'s constants (reference_solutions/{task.kernel}/{CONSTANTS_FILE}).\n"]
    block += [f"{name} = {_literal(value)}\n" for name, value in constants.items()]
    return "".join(lines[: marks[0]] + block + lines[marks[0] + 1 :])


def reference_solution_source(task: Task) -> str | None:
    """Our solution of ``task`` as the one file an agent or the grader gets, or None."""
    source = reference_solution_source_path(task)
    return None if source is None else render_solution(task, source)


def reference_solution_path(task: Task) -> Path | None:
    """A path to our solution of ``task`` as one self-contained file, or None where none is shipped.

    A solution without per-model constants is its file as kept; one with constants is written once
    per content under ``.handed-out/<task id>/`` and that copy's path is returned."""
    source = reference_solution_source_path(task)
    if source is None:
        return None
    if model_constants(task, source) is None:
        return source
    text = render_solution(task, source)
    target = HANDED_OUT_DIR / task.id / hashlib.sha256(text.encode()).hexdigest()[:16] / task.solution_filename
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.parent / f".{target.name}.{os.getpid()}.partial"  # concurrent verifiers
        partial.write_text(text, encoding="utf-8")
        partial.replace(target)
    return target

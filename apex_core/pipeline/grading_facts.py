"""The facts of a grading that may reach a later prompt: the outcome, the error class, the failing
case, the figures and the flags' names. Each one is a number or a word from a closed vocabulary.

A grading's ``reason`` and a check's ``message`` carry text the solution produced: its exception
message, the source line that raised, a compiler's echo of its code. Whoever wrote the solution
chose that text, so it can say anything its author wants the next agent to read ("IGNORE PREVIOUS
INSTRUCTIONS ..."). None of that text is kept here. An error class is kept only when Apex knows
the name (Python's built-in exceptions and a few of Triton's and torch's). A line is a number. A
flag is kept by its name, the part before the colon. A shape's keys must be identifiers. A
mismatch is one of the grader's own kinds. Prompts say what they say about a grading from these
fields alone (``reflection``, ``knowledge``). The full result, reason included, stays in the
grading's file for the agent that produced it.
"""

from __future__ import annotations

import builtins
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from apex_core.grader import GradeResult, Outcome, ShapeCheck

PYTHON_ERRORS = frozenset(name for name, value in vars(builtins).items()
                          if isinstance(value, type) and issubclass(value, BaseException))
LIBRARY_ERRORS = frozenset({
    "CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct",  # triton.compiler.errors
    "OutOfResources",  # triton.runtime.errors: too much shared memory or too many registers
    "OutOfMemoryError", "AcceleratorError",  # torch: device memory, a device-side fault
})
KNOWN_ERRORS = PYTHON_ERRORS | LIBRARY_ERRORS
"""The error classes a fact may name. A solution can raise a class it defines itself, and then
the class's name is text it chose; such a name is not kept (the error class is None)."""

Mismatch = Literal["values", "nan_inf", "shape", "dtype", "device", "output_type", "output_count", "undecodable",
                   "modified_inputs"]
"""How a wrong answer differed from the reference, in the grader's own terms (apex_core/grader/compare.py
and correctness.py word these checks; a message that matches none of them leaves the mismatch None)."""

_MISMATCHES: tuple[tuple[Mismatch, re.Pattern[str]], ...] = (
    ("values", re.compile(r"\d+ of \d+ elements outside atol")),
    ("nan_inf", re.compile(r"NaN/Inf at ")),
    ("shape", re.compile(r"shape \(")),
    ("dtype", re.compile(r"dtype \w+, expected")),
    ("device", re.compile(r"output on .*, expected on ")),
    ("output_type", re.compile(r"returned .*, expected exactly ")),
    ("output_count", re.compile(r"\d+ outputs, expected \d+")),
    ("undecodable", re.compile(r"the output could not be decoded")),
    ("modified_inputs", re.compile(r"the call modified its inputs")),
)
_OUTPUT_PREFIX = re.compile(r"output \d+: ")
_ERROR_NAME = re.compile(r"(?:^|: )([A-Za-z_][A-Za-z0-9_]*)(?=: | at )")
_FLAG_NAME = re.compile(r"(prescan:[a-z_]+|[a-z][a-z_]*)(?=$|[:( ])")
_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]{0,31}$"
MAX_FAILED_CASES = 3


def _known_error(name: str) -> str:
    if name not in KNOWN_ERRORS:
        raise ValueError(f"{name!r} is not an error class Apex knows")
    return name


ErrorClass = Annotated[str, AfterValidator(_known_error)]
FlagName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z_]{0,39}(:[a-z][a-z_]{0,39})?$")]
ShapeKey = Annotated[str, StringConstraints(pattern=_IDENTIFIER)]
Shape = dict[ShapeKey, int]


class FailedCase(BaseModel):
    """One case the solution got wrong: where (no sizes for a hidden shape) and by how much."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    shape: Shape | None = Field(description="the shape's sizes; None for a hidden shape")
    hidden: bool
    seed: int
    mismatch: Mismatch | None
    max_abs_error: float | None
    max_error_index: list[int] | None


class ShapeFigures(BaseModel):
    """The baseline's and the solution's median times at one timed shape."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    shape: Shape
    baseline_ns: float
    solution_ns: float
    speedup: float
    roofline_floor_ns: float | None


class GradingFacts(BaseModel):
    """What a later prompt may say about one grading. Every field is a number, a boolean, or a
    word from a closed vocabulary, so a solution cannot write any of it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: Outcome
    correct: bool
    error_class: ErrorClass | None = Field(description="the exception's class, when it is one Apex knows")
    error_line: int | None = Field(ge=1, description="the line of the solution file the error points at")
    failed_cases: list[FailedCase] = Field(max_length=MAX_FAILED_CASES)
    speedup: float | None
    speedup_ci95: tuple[float, float] | None
    score: float
    baseline_median_ns: float | None
    solution_median_ns: float | None
    timings: list[ShapeFigures]
    flags: list[FlagName]


def error_class(reason: str) -> str | None:
    """The exception class a failed grading's reason starts with (after the grader's "shape ...,
    seed ...: " prefix, if any), when Apex knows that class; else None."""
    found = _ERROR_NAME.search(reason)
    return found.group(1) if found and found.group(1) in KNOWN_ERRORS else None


def error_line(reason: str, solution_name: str) -> int | None:
    """The line of ``solution_name`` that a traceback (``at solution.py, line 12``) or a compiler
    (``solution.hip:12:5: error``) names first."""
    found = re.search(rf"\b{re.escape(solution_name)}(?:, line |:)(\d{{1,7}})\b", reason)
    return int(found.group(1)) if found and int(found.group(1)) >= 1 else None


def flag_name(flag: str) -> str | None:
    """A flag's name without what follows it (``tampering: <files>`` is ``tampering``)."""
    found = _FLAG_NAME.match(flag)
    return found.group(1) if found and len(found.group(1)) <= 40 else None


def mismatch(message: str) -> Mismatch | None:
    """Which of the grader's checks a wrong answer's message reports."""
    text = _OUTPUT_PREFIX.sub("", message, count=1)
    return next((kind for kind, pattern in _MISMATCHES if pattern.match(text)), None)


def shape(sizes: dict[str, int]) -> Shape | None:
    """The sizes of a shape when every name is an identifier; None otherwise (and for a hidden shape's {})."""
    if not sizes or not all(re.match(_IDENTIFIER, key) for key in sizes):
        return None
    return {key: int(value) for key, value in sizes.items()}


def _failed_case(check: ShapeCheck) -> FailedCase:
    return FailedCase(shape=None if check.hidden else shape(check.shape), hidden=check.hidden, seed=check.seed,
                      mismatch=mismatch(check.message), max_abs_error=check.max_abs_error,
                      max_error_index=None if check.hidden else check.max_error_index)


def facts_of(result: GradeResult) -> GradingFacts:
    """The facts of ``result``: everything a prompt may repeat, nothing its solution wrote."""
    failing = result.outcome in (Outcome.compile_error, Outcome.runtime_error, Outcome.wrong_answer, Outcome.crash,
                                 Outcome.timeout)
    flags = [name for name in (flag_name(f) for f in result.flags) if name]
    return GradingFacts(
        outcome=result.outcome,
        correct=result.correct,
        error_class=error_class(result.reason) if failing else None,
        error_line=error_line(result.reason, Path(result.solution_path).name) if failing else None,
        failed_cases=[_failed_case(c) for c in result.checks if not c.passed][:MAX_FAILED_CASES],
        speedup=result.speedup,
        speedup_ci95=result.speedup_ci95,
        score=result.score.total,
        baseline_median_ns=result.baseline_median_ns,
        solution_median_ns=result.solution_median_ns,
        timings=[ShapeFigures(shape=sizes, baseline_ns=t.baseline_median_ns, solution_ns=t.solution_median_ns,
                              speedup=t.speedup, roofline_floor_ns=t.roofline_floor_ns)
                 for t in result.timings if (sizes := shape(t.shape)) is not None],
        flags=list(dict.fromkeys(flags)),
    )

"""The task format: everything the grader, the prompt and the agent need to know about one task.

A task is data: a TOML file in ``definitions/`` merged over its kernel's defaults file in the kernel
family (``apex_core/kernels/<family>/<kernel>.defaults.toml``, see ``families``). Code is named one
way everywhere: by a path relative to the family directory, ``baseline_triton.py`` for a source file
and ``__init__.py:reference_torch`` for a function in a Python file. A loaded ``Task`` holds the same
addresses prefixed with the family (``rms_norm/__init__.py:reference_torch``), i.e. relative to
``apex_core/kernels``, so a task is self-describing wherever it travels (the grader's workers get
the ``inputs`` address as a string). Values written ``"@field"`` are read from the task's model
config (``"@hidden_size"``), so shapes follow the registry rather than being copied into every task.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import json
import re
from stat import S_ISREG
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from apex_core.models import ModelConfig, get_model

KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels"

Language = Literal["triton", "hip", "python"]
ArrayLibrary = Literal["torch", "numpy"]
CorrectnessMode = Literal["pytorch"]
"""How correctness is judged: the solution's outputs against the task's PyTorch (or NumPy)
reference, in the trusted judge. A mode that ran an inference library's own tests instead was
declared once and never implemented; it was removed rather than left as a promise."""
Shape = dict[str, int]

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_FILE = r"(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_.-]+"
SOURCE_ADDRESS = re.compile(rf"{_FILE}\.(?:py|hip|cu)")
"""A source file, relative to a kernel family: ``baseline_triton.py``, ``baseline.hip``."""
FUNCTION_ADDRESS = re.compile(rf"(?P<file>{_FILE}\.py):(?P<function>{_NAME})")
"""A function in a Python file, relative to a kernel family: ``__init__.py:reference_torch``."""


class Tolerance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


EXACT = Tolerance(atol=0.0, rtol=0.0)
DEFAULT_INPUT_SETS = 8


class LibraryKernel(BaseModel):
    """The installed library function a task's kernel stands for (what a winner hot-patches)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    package: str
    module: str
    function: str


NAME_AND_PROSE = frozenset({"id", "model", "also_models", "description", "contract"})
"""A task's fields that do not change what its code is checked against (``Task.behaviour_hash``)."""

ON_THE_GPU_ONLY = frozenset({
    "test_shapes", "hidden_shapes", "benchmark_shapes", "timing_input_sets", "speedup_ceiling", "difficulty",
    "allow_side_streams", "roofline",
})
"""A task's fields the CPU interpreter check never reads: it runs the task's code at ``cpu_shapes``
only, untimed (``Task.cpu_check_hash``)."""


class Task(BaseModel):
    """One optimization task: a kernel of a model, with its baseline, reference and shapes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    model: str
    kernel: str
    also_models: tuple[str, ...] = ()
    """Other models of the registry that run this kernel at exactly these shapes, parameters and
    tolerances (the 70B Llamas, a Mistral as wide as Llama 3.1 8B): one task stands for all of
    them, checked when the definition loads (``catalog``), instead of a copy per model."""
    family: str
    """The kernel family: the directory under ``apex_core/kernels`` that holds the task's code and
    its kernel's defaults file (one family can provide several kernels: ``fp8_quant`` provides
    ``per_token_quant_fp8`` and ``per_token_group_quant_fp8``)."""
    language: Language
    array_library: ArrayLibrary
    description: str
    entry_point: str
    signature: str
    contract: str
    baseline: str
    """The baseline source, ``<family>/<file>`` (relative to ``apex_core/kernels``)."""
    reference: str
    """The correctness reference, ``<family>/<file>.py:<function>``."""
    inputs: str
    """The input generator ``(shape, dtype, seed, device, params) -> args``, ``<family>/<file>.py:<function>``."""
    roofline: str
    """The roofline model ``(shape, dtype, params) -> Roofline``, ``<family>/<file>.py:<function>``."""
    dtype: str
    difficulty: int = Field(ge=1, le=3)
    correctness_mode: CorrectnessMode = "pytorch"
    params: dict[str, bool | int | float | str] = Field(default_factory=dict)
    """Task parameters from the model registry; booleans stay booleans (a flag rendered as 1.0 in a
    prompt reads as a number)."""
    tolerances: dict[str, Tolerance]
    test_shapes: list[Shape] = Field(min_length=1)
    hidden_shapes: list[Shape] = Field(default_factory=list)
    benchmark_shapes: list[Shape] = Field(default_factory=list)
    output_args: tuple[int, ...] = ()
    """Arguments the call writes in place (a KV-cache write). Empty: the call returns its output, an
    array or a tuple of arrays. Non-empty: the call returns None, its outputs are these arguments
    after the call, the reference returns their expected values in this order, and every other
    argument must stay unchanged."""
    strided_args: tuple[int, ...] = ()
    """Arguments that hidden shapes pass as row-strided views: the last dimension contiguous, rows
    further apart than their length, as a slice of a fused projection arrives in an inference
    stack. A kernel that assumes adjacent rows reads the wrong values and fails."""
    cpu_shapes: list[Shape] = Field(default_factory=list)
    """Small shapes at which CI checks Triton code under the CPU interpreter (TRITON_INTERPRET=1)."""
    timing_input_sets: int = Field(default=DEFAULT_INPUT_SETS, ge=2, le=64)
    """Distinct input sets staged per timed shape, at most. Tasks whose inputs are large (expert
    weights, long KV caches) lower it to keep the staged copies within device memory."""
    allow_side_streams: bool = False
    """Whether a solution may launch work on streams of its own (their work must then be awaited)."""
    speedup_ceiling: float = Field(default=10.0, gt=1)
    """Speedups above this are re-measured in a hardened mode before they earn anything."""
    library: LibraryKernel | None = None

    @field_validator("id")
    @classmethod
    def _id_format(cls, value: str) -> str:
        model, sep, kernel = value.partition("__")
        if not sep or not model or not kernel or "__" in kernel:
            raise ValueError(f"task id {value!r} must be '<model-slug>__<kernel>'")
        return value

    @field_validator("reference", "inputs", "roofline")
    @classmethod
    def _is_function_address(cls, value: str) -> str:
        family, _, rest = value.partition("/")
        if not FUNCTION_ADDRESS.fullmatch(rest) or not family:
            raise ValueError(f"{value!r} must be '<family>/<file>.py:<function>'")
        return value

    @field_validator("baseline")
    @classmethod
    def _is_source_address(cls, value: str) -> str:
        family, _, rest = value.partition("/")
        if not SOURCE_ADDRESS.fullmatch(rest) or not family:
            raise ValueError(f"{value!r} must be '<family>/<file>' (a .py, .hip or .cu source)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Task:
        model_part, _, kernel_part = self.id.partition("__")
        if model_part != self.model or kernel_part != self.kernel:
            raise ValueError(f"id {self.id!r} must be '{self.model}__{self.kernel}' (model '__' kernel)")
        if self.dtype not in self.tolerances:
            raise ValueError(f"no tolerance for the task's dtype {self.dtype!r}")
        for name in ("baseline", "reference", "inputs", "roofline"):
            if not getattr(self, name).startswith(f"{self.family}/"):
                raise ValueError(f"{name} {getattr(self, name)!r} is not in the task's kernel family {self.family!r}")
        if self.language == "python" and self.array_library != "numpy":
            raise ValueError("a 'python' task is a CPU task over NumPy arrays")
        dims = set(self.test_shapes[0])
        if len(set(self.output_args)) != len(self.output_args) or any(i < 0 for i in self.output_args):
            raise ValueError(f"output_args {list(self.output_args)} must be distinct argument positions")
        if len(set(self.strided_args)) != len(self.strided_args) or any(i < 0 for i in self.strided_args):
            raise ValueError(f"strided_args {list(self.strided_args)} must be distinct argument positions")
        if set(self.strided_args) & set(self.output_args):
            raise ValueError("strided_args cannot name in-place outputs: the call writes those where they are")
        for name in ("test_shapes", "hidden_shapes", "benchmark_shapes", "cpu_shapes"):
            for i, shape in enumerate(getattr(self, name)):
                if set(shape) != dims:
                    raise ValueError(f"{name}[{i}] has dimensions {sorted(shape)}, expected {sorted(dims)}")
        if not (KERNELS_DIR / self.baseline).is_file():
            raise ValueError(f"baseline file {self.baseline!r} not found under apex_core/kernels")
        return self

    # --- derived facts ---------------------------------------------------------------------

    @property
    def models(self) -> tuple[str, ...]:
        """Every model that runs this task's kernel as the task states it: its own, then ``also_models``."""
        return (self.model, *self.also_models)

    @property
    def architecture(self) -> ModelConfig:
        """The model config this task is shaped by."""
        return get_model(self.model)

    @property
    def solution_filename(self) -> str:
        return "solution.hip" if self.language == "hip" else "solution.py"

    @property
    def baseline_path(self) -> Path:
        return KERNELS_DIR / self.baseline

    @property
    def baseline_source(self) -> str:
        return self.baseline_path.read_text(encoding="utf-8")

    @property
    def timed_shapes(self) -> list[Shape]:
        return self.benchmark_shapes or self.test_shapes

    @property
    def tolerance(self) -> Tolerance:
        return self.tolerances[self.dtype]

    def tolerance_for(self, dtype: str) -> Tolerance:
        """The tolerance of one output by its dtype: integer and boolean outputs must be exact."""
        if dtype in self.tolerances:
            return self.tolerances[dtype]
        if dtype.startswith(("int", "uint", "bool")):
            return EXACT
        return self.tolerance

    @property
    def needs_gpu(self) -> bool:
        return self.language in ("triton", "hip")

    def content_hash(self) -> str:
        """Hash of the resolved definition and every file it draws on, for provenance and caching.

        The resolved definition already contains what the kernel's defaults file contributed, so
        an edit there changes the hash of every task that inherits it (the grade cache re-grades)."""
        return self._hash_of(self.model_dump())

    def behaviour_hash(self) -> str:
        """The content hash without the task's name and prose (id, model, description, contract).

        Two tasks that share it run the same code against the same reference at the same shapes,
        parameters and tolerances (the 70B Llamas, models of one width), so a check of one speaks
        for both; CI's interpreter check runs once per behaviour."""
        return self._hash_of(self.model_dump(exclude=NAME_AND_PROSE))

    def cpu_check_hash(self) -> str:
        """The behaviour hash without what only a GPU grading uses (its shapes, the timing's
        settings, the roofline).

        Tasks that share it get the same CPU interpreter check: the same code, reference, inputs,
        parameters and tolerances at the same ``cpu_shapes``. A kernel whose small shapes do not
        depend on the model (a GEMM's, a sampler's) has one such check for all its tasks: CI
        checks 144 behaviours instead of 188 tasks (2026-12-06)."""
        return self._hash_of(self.model_dump(exclude=NAME_AND_PROSE | ON_THE_GPU_ONLY))

    def _hash_of(self, fields: dict[str, Any]) -> str:
        digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode())
        digest.update(self.baseline_source.encode())
        for ref in (self.reference, self.inputs, self.roofline):
            digest.update((KERNELS_DIR / ref.partition(":")[0]).read_bytes())
        return digest.hexdigest()


def module_of(address: str) -> str:
    """The import name of the Python file a kernels-relative address names
    (``rms_norm/__init__.py:f`` -> ``apex_core.kernels.rms_norm``)."""
    path = address.partition(":")[0]
    if not path.endswith(".py"):
        raise ValueError(f"{address!r} does not name a Python file")
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["apex_core", "kernels", *parts])


def _address(ref: str) -> tuple[str, str]:
    """(path under apex_core/kernels, function name) of a ``<family>/<file>.py:<function>`` address."""
    path, sep, function_name = ref.partition(":")
    if not sep or not FUNCTION_ADDRESS.fullmatch(f"{path.partition('/')[2]}:{function_name}"):
        raise ValueError(f"{ref!r} must be '<family>/<file>.py:<function>' (relative to apex_core/kernels)")
    return path, function_name


def check_reference(ref: str) -> None:
    """Check, without importing anything, that ``ref`` names a Python file under
    ``apex_core/kernels`` that binds ``function`` at its top level; a ValueError says what is wrong.

    Loading the catalog checks every task's references so that a mistyped one fails at once, in
    one line; importing them for that pulled PyTorch into every command that lists tasks (2 of the
    3.8 s `apex tasks list` took on the CI machine). Whether the name is callable is for the
    import, when a grading or a check needs the function."""
    path, function_name = _address(ref)
    source = KERNELS_DIR / path
    try:
        info = source.stat()
    except OSError:
        info = None
    if info is None or not S_ISREG(info.st_mode):
        raise ValueError(f"{ref!r}: there is no file apex_core/kernels/{path}")
    try:
        names = _top_level_names_of(str(source), info.st_size, info.st_mtime_ns)
    except SyntaxError as exc:
        raise ValueError(f"{ref!r}: apex_core/kernels/{path} does not parse (line {exc.lineno}: {exc.msg})") from None
    if function_name not in names:
        raise ValueError(f"{ref!r}: apex_core/kernels/{path} has no function {function_name!r} at its top level")


@functools.lru_cache(maxsize=1024)
def _top_level_names_of(source: str, size: int, mtime_ns: int) -> frozenset[str]:
    """The top-level names of one kernel file, parsed once per content: the catalogue's 190 tasks
    name about 30 files some 580 times, and parsing each time was half of loading it (0.46 of
    0.83 s, CI machine, 2026-12-06). Size and modification time key it, so an edited file is read
    again."""
    return frozenset(_top_level_names(ast.parse(Path(source).read_text(encoding="utf-8"), filename=source)))


def _top_level_names(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level: definitions, assignments and imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def load_reference(ref: str) -> Callable[..., Any]:
    """Import the function a ``<family>/<file>.py:<function>`` address names (relative to
    ``apex_core/kernels``). Only the address is parsed; the import itself is an ordinary one, so
    a confined worker process needs nothing beyond Apex on its path."""
    path, function_name = _address(ref)
    module_name = module_of(ref)
    module = importlib.import_module(module_name)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(f"{ref!r}: module {module_name!r} has no function {function_name!r}")
    return function

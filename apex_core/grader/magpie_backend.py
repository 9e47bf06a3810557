"""The Magpie backend: Magpie compiles and times baseline and solution; correctness stays ours.

``--backend magpie`` hands compile and timing to an installed Magpie (``MAGPIE_ROOT``) while the
judge still decides correctness with its own reference. This module writes Magpie's kernel config,
runs ``python -m Magpie compare`` in a sandboxed child process, and reads Magpie's report back as
hostile data. The judge calls one function::

    run_magpie_timing(task, baseline_path, solution_path, shapes, timeout_s, scratch) -> MagpieTiming

which returns per-shape baseline and solution medians (ns) with Magpie's raw samples, or raises
``MagpieError`` with a one-line reason, a ``kind`` and the ``role`` to blame (``outcome`` suggests
the judge's outcome). ``require_magpie_root()`` raises a one-line ``ApexUserError`` when
``--backend magpie`` is asked for without a usable Magpie.

How Magpie is driven (and which defects of the reference system it avoids, inventory §8):

* One kernel entry per (file, shape): Magpie's ``bench_target.get_inputs`` takes no arguments, so a
  per-shape timing needs one entry per shape. Every entry has its OWN working directory, its own
  copy of its source, its own compile and testcase command and its own bench target; nothing is a
  shared ``--testcase`` (§8.3: the reference system timed the solution as its own "baseline").
* All baseline entries come first (``--baseline 0``), then the solution's: every baseline
  measurement is over before any candidate code runs, so a candidate cannot poison the
  baseline's caches or builds. Each entry also gets its own Triton cache.
* Timings come only from Magpie's Latency stage report (``do_bench_cudagraph`` wall-clock and/or
  rocprofv3 kernel traces), never from anything a kernel prints (§8.4), and Magpie's testcase exit
  status is never taken as correctness (§8.2): the ``--check`` testcase is only a smoke run so
  that Magpie proceeds to timing.
* Apex writes Magpie's framework config itself (``--config``): no editable config in the Magpie
  checkout (hardware control, winner strategy, correctness backend) decides anything (§8.1).
* Magpie imports the candidate, so it never runs in the judge's process: it runs under the reaper
  (``reaper.py``) with a minimal environment, the sandbox identity, a wall-clock timeout, resource
  limits, and the whole process tree killed afterwards.

Limits of trust. The report is written by a process that ran untrusted code as the same user, so
a candidate could rewrite it. It is therefore read as hostile data: a regular file of bounded size,
strict JSON types, positive finite latencies within range, exactly the configured kernels in the
configured order, stated wall-clock medians consistent with their raw samples, and any missing,
malformed or inconsistent report is a failure, never a pass. Magpie's winner, ranking and scores
are ignored. Magpie's harness also times one input set per shape, called again and again with no
cache flush (a CUDA-graph replay of n_repeat calls, median over n_retries replays), and the seed of
those inputs is readable by the candidate, so it cannot rule out output caching. The judge must
therefore keep its roofline floor and speedup-ceiling checks on these medians, and should pass a
fresh random ``seed`` per run.

Magpie's interface was read from AMD-AGI/Magpie (no Magpie install or AMD machine was available,
so nothing here has run against the real Magpie; the fake package in the tests stands in for it):

* ``Magpie/main.py`` @ dc8f2e68a2f7ba98256316bfd1a4f0fd69851cff: CLI (global ``--config``,
  ``--environment``, ``--workers``; ``compare --kernel-config --type --baseline --no-perf
  --output-dir``), ``load_kernel_config`` (``kernels:`` entries ``id, type, source_files,
  working_dir, env, testcase_command, compile_command, bench_target``; a top-level ``latency:``
  and ``correctness:`` block), ``_parse_command_list`` (a command is a list of strings; strings go
  through ``os.path.expandvars``, hence no ``$`` in anything we write), ``_create_workspace``
  (``<output-dir>/compare_<YYYYmmdd_HHMMSS>/``), ``_save_comparison`` and ``_build_kernel_summary``
  (the ``compare_report.json`` layout: ``mode, timestamp, summary[], results{kernel_results[],
  comparison_metrics, winner, rankings, summary}``), ``run_compare`` (exit 1 when no comparison).
* ``Magpie/main.py`` @ 8b3b96e3dca9f4c076ec8a29ee44bc2f3670295f and @
  0698eb179e7f3e7b0b2c36637f0761d6a7e92308: versions
  without the Latency stage (no ``bench_target``, no ``latency_result``); such a Magpie yields
  ``kind='no_latency'``.
* ``Magpie/eval/evaluator.py`` @ 6c956cd8d05a3f1a1005b37a3fd0c2b6da41ead8: ``EvaluationState.to_dict``
  (``compiling_state``/``correctness_state``/``performance_state``/``latency_state`` as
  ``SUCCESS|FAILED|SKIPPED``, ``errors``, ``score``, ``compiling_result``, ``correctness_result``,
  ``performance_result``, ``latency_result``, ``extra{kernel_id, kernel_type}``) and the stage order
  compile -> correctness -> performance -> latency with early return on a failed compile or
  correctness (states default to SUCCESS, latency to SKIPPED).
* ``Magpie/eval/latency.py`` @ dc8f2e68: ``LatencyResult.to_dict`` (``success, method,
  primary_metric, primary_value_ms, config, command, output_dir, errors, wall_stats, kernel_stats,
  per_kernel, dispatch_overhead_us, crosscheck_vs_rocprof_ratio, crosscheck_warning``); the runner
  is started as ``python -m Magpie.bench._runner`` with ``cwd=working_dir`` and, when
  ``latency.pythonpath`` is set, ``PYTHONPATH`` replaced by it.
* ``Magpie/bench/__init__.py`` @ dc8f2e68: ``LatencyStats`` (all times in ms: ``median_ms, p50_ms,
  p99_ms, min_ms, max_ms, std_ms, samples_ms, n_repeat, n_retries, estimate_ms``; median is
  ``statistics.median(samples_ms)``) and ``do_bench_cudagraph``.
* ``Magpie/bench/_runner.py`` @ dc8f2e68: ``get_inputs()`` is called with no arguments after
  seeding and may return ``(args, kwargs)``; the callable and ``get_inputs`` live in one module.
* ``Magpie/config/latency.py`` and ``Magpie/config/kernel.py`` @ dc8f2e68: ``LatencyConfig``
  fields and methods (``cuda_graph, kernel_trace, rocprof_timestamps, both, none, auto``),
  ``BenchTarget{module, callable, get_inputs}``; a per-kernel ``bench_target`` wins.
* ``Magpie/modes/compare_eval/comparator.py`` @ dc8f2e68: compare evaluates kernels sequentially,
  correctness by testcase when one is given.
* ``Magpie/config.yaml`` @ 6c956cd8: framework config sections (gpu.hardware, scheduler,
  correctness, compiling, performance, latency, compare).
* ``docs/latency.md`` and ``docs/analysis_compare.md`` @ dc8f2e68; ``examples/simple_triton_test/
  compare_triton_blocksize.yaml`` and ``triton_vector_add.py`` @ dc8f2e68 (a compare config with
  per-kernel ``bench_target`` and a ``latency:`` block); ``README.md`` @ 001aec11 (``python -m
  Magpie`` through ``Magpie/__main__.py``).

Assumed, not seen in source: Magpie's Compiling and Correctness stages (``eval/compiling.py``,
``eval/correctness.py`` were not available) run ``compile_command``/``testcase_command`` and judge
by exit status; our commands run the generated script by absolute path, so they work whatever the
working directory Magpie gives them.
"""

from __future__ import annotations

import json
import keyword
import math
import os
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

from apex_core.errors import ApexUserError
from apex_core.grader import process
from apex_core.tasks.schema import Shape, Task

MAGPIE_ROOT_ENV = "MAGPIE_ROOT"
MAGPIE_REQUIRED_FILES = ("Magpie/__init__.py", "Magpie/__main__.py", "Magpie/bench/_runner.py")
REPORT_NAME = "compare_report.json"
MAX_REPORT_BYTES = 32 * 1024 * 1024
MAX_SAMPLES = 100_000
MAX_LATENCY_MS = 3_600_000.0
"""One hour: a stated latency above this is not a measurement."""
MEDIAN_AGREEMENT = 1e-6
"""Relative slack between a stated wall-clock median and the median of its own samples."""

COMPILED_SUFFIXES = (".hip", ".cu", ".cpp")
TARGET_MODULE = "apex_magpie_target"
INPUTS_MODULE = "apex_magpie_inputs"

Role = Literal["baseline", "solution"]
LatencyMethod = Literal["cuda_graph", "kernel_trace", "both"]
StageState = Literal["SUCCESS", "FAILED", "SKIPPED"]
ErrorKind = Literal["timeout", "crash", "missing_report", "malformed_report", "compile_failed", "run_failed", "no_latency"]
KNOWN_LATENCY_METHODS = ("auto", "cuda_graph", "kernel_trace", "rocprof_timestamps", "both", "none")


# --- errors --------------------------------------------------------------------------------------


class MagpieNotInstalledError(ApexUserError):
    """``--backend magpie`` was asked for, but MAGPIE_ROOT names no usable Magpie."""


class MagpieError(Exception):
    """Magpie could not produce a usable timing; the message is one line.

    ``kind``: timeout, crash, missing_report, malformed_report, compile_failed, run_failed or
    no_latency. ``role``: the kernel the failure belongs to ('baseline' or 'solution'), or None
    when it cannot be attributed.
    """

    def __init__(self, kind: ErrorKind, message: str, role: Role | None = None) -> None:
        super().__init__(_one_line(message, 600))
        self.kind = kind
        self.role = role

    @property
    def outcome(self) -> str:
        """The judge's outcome this suggests: only the solution's own failures are blamed on it."""
        if self.kind == "timeout":
            return "timeout"
        if self.role == "solution" and self.kind == "compile_failed":
            return "compile_error"
        if self.role == "solution" and self.kind == "run_failed":
            return "runtime_error"
        return "infra_error"


def _one_line(text: str, limit: int = 400) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 4] + " ..."


# --- finding Magpie ------------------------------------------------------------------------------


def magpie_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why MAGPIE_ROOT names no usable Magpie (one line), or None when it does."""
    env = os.environ if environ is None else environ
    raw = env.get(MAGPIE_ROOT_ENV, "").strip()
    if not raw:
        return (
            f"--backend magpie needs {MAGPIE_ROOT_ENV} set to a Magpie checkout (the directory that "
            "holds the 'Magpie' package, e.g. a clone of AMD-AGI/Magpie); it is not set"
        )
    root = Path(raw).expanduser()
    if not root.is_dir():
        return f"{MAGPIE_ROOT_ENV}={raw} is not a directory; point it at a Magpie checkout"
    if "$" in str(root.resolve()):
        return f"{MAGPIE_ROOT_ENV}={raw} contains '$', which Magpie would expand in its config; use a path without it"
    missing = [name for name in MAGPIE_REQUIRED_FILES if not (root / name).is_file()]
    if "Magpie/__init__.py" in missing:
        return f"{MAGPIE_ROOT_ENV}={raw} holds no 'Magpie' package (no Magpie/__init__.py); point it at the checkout's top directory"
    if "Magpie/__main__.py" in missing:
        return f"{MAGPIE_ROOT_ENV}={raw}: the Magpie package has no __main__.py, so 'python -m Magpie' cannot run"
    if missing:
        return (
            f"{MAGPIE_ROOT_ENV}={raw}: this Magpie has no Latency stage (no Magpie/bench/_runner.py); "
            "Apex needs a Magpie with bench_target latency support"
        )
    return None


def magpie_root(environ: Mapping[str, str] | None = None) -> Path | None:
    """The Magpie checkout MAGPIE_ROOT names, if it holds the Magpie package; else None."""
    if magpie_problem(environ) is not None:
        return None
    env = os.environ if environ is None else environ
    return Path(env[MAGPIE_ROOT_ENV].strip()).expanduser().resolve()


def require_magpie_root(environ: Mapping[str, str] | None = None) -> Path:
    """``magpie_root()``, or a one-line MagpieNotInstalledError saying what is missing."""
    problem = magpie_problem(environ)
    if problem is not None:
        raise MagpieNotInstalledError(problem)
    root = magpie_root(environ)
    assert root is not None
    return root


def magpie_supports(task: Task) -> str | None:
    """Why Magpie cannot time this task (one line), or None when it can.

    Magpie's latency harness times CUDA/HIP devices only (``do_bench_cudagraph`` or rocprofv3),
    so CPU tasks are graded by the judge's own timing.
    """
    if not task.needs_gpu:
        return f"Magpie times GPU kernels only; {task.id} is a CPU task, grade it with the default backend"
    return None


# --- planning and writing the workspace ----------------------------------------------------------


class MagpieLatency(BaseModel):
    """How Magpie's Latency stage measures (the ``latency:`` block of the kernel config)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: LatencyMethod = "cuda_graph"
    """cuda_graph: wall-clock over CUDA/HIP graph replay (any GPU). kernel_trace: kernel-only
    rocprofv3 durations (ROCm). both: both, the kernel-only median as the headline."""
    rep_ms: int = Field(default=20, ge=1, le=10_000)
    n_retries: int = Field(default=7, ge=3, le=1000)
    estimate_reps: int = Field(default=5, ge=1, le=1000)
    warmup_iters: int = Field(default=10, ge=1, le=10_000)

    @property
    def metric(self) -> Literal["wall", "kernel"]:
        return "wall" if self.method == "cuda_graph" else "kernel"


class MagpieEntry(BaseModel):
    """One kernel entry of Magpie's config: one file at one shape, in its own directory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    role: Role
    shape_index: int
    shape: dict[str, int]
    working_dir: str = ""
    source: str = ""
    magpie_type: str = ""


def plan_entries(shapes: Sequence[Shape]) -> list[MagpieEntry]:
    """Entry ids, roles and shapes: every baseline entry first, then the solution's."""
    if not shapes:
        raise ValueError("Magpie timing needs at least one shape")
    return [
        MagpieEntry(id=f"{role}_s{index}", role=role, shape_index=index, shape=dict(shape))
        for role in ("baseline", "solution")
        for index, shape in enumerate(shapes)
    ]


class MagpieWorkspace(BaseModel):
    """Everything written for one Magpie run, by absolute path."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    root: str
    kernel_config: str
    framework_config: str
    inputs_module: str
    output_dir: str
    home: str
    log: str
    magpie_root: str
    magpie_type: str
    entries: list[MagpieEntry]
    latency: MagpieLatency
    seed: int
    device: str
    stage_timeout_s: float

    def argv(self, python: str = sys.executable) -> list[str]:
        """The Magpie command line (run with the workspace as working directory)."""
        return [
            python, "-s", "-m", "Magpie",
            "--config", self.framework_config,
            "--environment", "local",
            "--workers", "1",
            "compare",
            "--kernel-config", self.kernel_config,
            "--type", self.magpie_type,
            "--baseline", "0",
            "--no-perf",
            "--output-dir", self.output_dir,
        ]  # fmt: skip


def magpie_kernel_type(task: Task, source: Path) -> str:
    """Magpie's ``type`` for a file: by its suffix for compiled sources, else by the task's language."""
    if source.suffix in (".hip", ".cpp"):
        return "hip"
    if source.suffix == ".cu":
        return "cuda"
    return "triton" if task.language == "triton" else "pytorch"


def _literal(path: Path | str) -> str:
    """A path for Magpie's config: Magpie runs os.path.expandvars over every string it reads."""
    text = str(path)
    if "$" in text:
        raise ValueError(f"path {text!r} contains '$', which Magpie would expand")
    return text


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o644)


def _make_dir(path: Path, owner: tuple[int, int] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    if owner is not None:
        os.chown(path, *owner)
    return path


def inputs_module_source(task: Task, shapes: Sequence[Shape], seed: int, device: str) -> str:
    """A module whose ``get_inputs_<i>()`` returns ``((args...), {})`` for shape i from the task's make_inputs."""
    spec = {
        "task_id": task.id,
        "inputs": task.inputs,
        "dtype": task.dtype,
        "params": dict(task.params),
        "device": device,
        "shapes": [dict(shape) for shape in shapes],
        "seeds": [seed + index for index in range(len(shapes))],
    }
    functions = "\n\n".join(
        f"def get_inputs_{index}():\n    \"\"\"The inputs at SPEC['shapes'][{index}], as Magpie's runner wants them: (args, kwargs).\"\"\"\n"
        f"    return (inputs_for({index}), {{}})\n"
        for index in range(len(shapes))
    )
    return (
        '"""Inputs of one task for Apex\'s Magpie entries (SPEC); generated by apex_core.grader.magpie_backend."""\n\n'
        "from __future__ import annotations\n\n"
        "import json as _json\n\n"
        "from apex_core.tasks.schema import load_reference as _load_reference\n\n"
        f"SPEC = _json.loads({json.dumps(spec, sort_keys=True)!r})\n\n\n"
        "def inputs_for(index: int) -> tuple:\n"
        '    """The task\'s make_inputs at shape ``index`` with that shape\'s seed, as positional arguments."""\n'
        '    make_inputs = _load_reference(SPEC["inputs"])\n'
        '    shape = dict(SPEC["shapes"][index])\n'
        '    return tuple(make_inputs(shape, SPEC["dtype"], int(SPEC["seeds"][index]), SPEC["device"], dict(SPEC["params"])))\n\n\n'
        f"{functions}"
    )


_TARGET_BODY = '''
_HERE = _Path(__file__).resolve().parent


def _load_entry_point():
    source = _HERE / _SPEC["source"]
    if source.suffix in (".hip", ".cu", ".cpp"):
        from apex_core.grader import native

        module = native.build_extension(source, _Path(_SPEC["build_dir"]))
    else:
        spec = _importlib_util.spec_from_file_location("apex_magpie_source", source)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {source.name}")
        module = _importlib_util.module_from_spec(spec)
        _sys.modules["apex_magpie_source"] = module
        spec.loader.exec_module(module)
    function = getattr(module, _SPEC["entry_point"], None)
    if not callable(function):
        raise AttributeError(f"{source.name} defines no callable {_SPEC['entry_point']!r}")
    return function


def _inputs():
    import apex_magpie_inputs

    return getattr(apex_magpie_inputs, _SPEC["get_inputs"])()


def _main(argv):
    """--compile: build or import the source. --check: also call it once on this entry's inputs."""
    try:
        function = _load_entry_point()
        if "--check" in argv:
            args, kwargs = _inputs()
            function(*args, **kwargs)
            torch = _sys.modules.get("torch")
            if torch is not None and torch.cuda.is_available():
                torch.cuda.synchronize()
    except BaseException as exc:  # reported to Magpie as this command's failure
        from apex_core.grader.worker import describe_exception

        print("apex-magpie: " + describe_exception(exc, str(_HERE / _SPEC["source"])), file=_sys.stderr)
        return 1
    print(f"apex-magpie: {_SPEC['id']} {'checked' if '--check' in argv else 'compiled'}")
    return 0


if __name__ == "__main__":
    _sys.exit(_main(_sys.argv[1:]))

globals()[_SPEC["entry_point"]] = _load_entry_point()
globals()[_SPEC["get_inputs"]] = _inputs
'''


def target_module_source(spec: Mapping[str, Any]) -> str:
    """The bench target of one entry: the file's entry point and this shape's ``get_inputs_<i>``."""
    return (
        f'"""Magpie kernel entry {spec["id"]}: {spec["role"]} at shape {spec["shape_index"]}; generated by Apex.\n\n'
        "Magpie's latency runner imports this module from the entry's working directory and times\n"
        f"``{spec['entry_point']}(*args)`` on ``{spec['get_inputs']}()``. Magpie's compile and testcase commands run it as\n"
        "a script: ``--compile`` builds or imports the source, ``--check`` also calls it once (a smoke run;\n"
        'correctness is decided by the Apex judge, never by this exit status).\n"""\n\n'
        "from __future__ import annotations\n\n"
        "import importlib.util as _importlib_util\n"
        "import json as _json\n"
        "import sys as _sys\n"
        "from pathlib import Path as _Path\n\n"
        f"_SPEC = _json.loads({json.dumps(dict(spec), sort_keys=True)!r})\n"
        f"{_TARGET_BODY}"
    )


def write_magpie_workspace(
    task: Task,
    baseline_path: Path,
    solution_path: Path,
    shapes: Sequence[Shape],
    scratch: Path,
    *,
    magpie_root: Path,
    seed: int = 0,
    device: str | None = None,
    latency: MagpieLatency | None = None,
    stage_timeout_s: float = 300.0,
    owner: tuple[int, int] | None = None,
) -> MagpieWorkspace:
    """Write Magpie's kernel config, framework config, inputs module and one directory per entry.

    Files are the judge's and read-only to others; the directories Magpie and the kernels must
    write to (output, home, per-entry caches and builds) belong to ``owner`` when one is given.
    """
    latency = latency or MagpieLatency()
    entry_point = task.entry_point
    if not entry_point.isidentifier() or keyword.iskeyword(entry_point) or entry_point.startswith("_"):
        raise ValueError(f"entry point {entry_point!r} cannot be a bench target attribute")
    device = device or ("cuda" if task.needs_gpu else "cpu")
    sources = {"baseline": Path(baseline_path), "solution": Path(solution_path)}
    for role, source in sources.items():
        if not source.is_file():
            raise ValueError(f"{role} file {source} does not exist")
    scratch.mkdir(parents=True, exist_ok=True)
    if owner is not None:  # the sandbox user must be able to reach the workspace inside scratch
        scratch.chmod(scratch.stat().st_mode | 0o111)
    root = Path(tempfile.mkdtemp(prefix="magpie-", dir=scratch)).resolve()
    root.chmod(0o755)
    home = _make_dir(root / "home", owner)
    output_dir = _make_dir(root / "out", owner)
    entries_dir = _make_dir(root / "entries")
    caches = _make_dir(root / "cache", owner)
    builds = _make_dir(root / "build", owner)

    inputs_path = root / f"{INPUTS_MODULE}.py"
    _write(inputs_path, inputs_module_source(task, shapes, seed, device))
    python_path = [_literal(root), _literal(magpie_root), _literal(process.PACKAGE_PARENT)]
    python_path += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and "$" not in p]
    entries: list[MagpieEntry] = []
    kernels_yaml: list[dict[str, Any]] = []
    for planned in plan_entries(shapes):
        source = sources[planned.role]
        work = _make_dir(entries_dir / planned.id)
        copy = work / f"{planned.role}{source.suffix}"
        shutil.copyfile(source, copy)
        copy.chmod(0o644)
        build_dir = _make_dir(builds / planned.role, owner)
        triton_cache = _make_dir(caches / planned.id, owner)
        get_inputs = f"get_inputs_{planned.shape_index}"
        target = work / f"{TARGET_MODULE}.py"
        _write(
            target,
            target_module_source(
                {
                    "id": planned.id,
                    "role": planned.role,
                    "shape_index": planned.shape_index,
                    "source": copy.name,
                    "entry_point": entry_point,
                    "get_inputs": get_inputs,
                    "build_dir": str(build_dir),
                }
            ),
        )
        kind = magpie_kernel_type(task, source)
        script = [_literal(sys.executable), "-s", _literal(target)]
        kernels_yaml.append(
            {
                "id": planned.id,
                "type": kind,
                "source_files": [_literal(copy)],
                "working_dir": _literal(work),
                "env": {
                    "PYTHONPATH": os.pathsep.join(python_path),
                    "TRITON_CACHE_DIR": _literal(triton_cache),
                    "PYTHONDONTWRITEBYTECODE": "1",
                },
                "compile_command": [*script, "--compile"],
                "testcase_command": [*script, "--check"],
                "bench_target": {"module": TARGET_MODULE, "callable": entry_point, "get_inputs": get_inputs},
            }
        )
        entries.append(planned.model_copy(update={"working_dir": str(work), "source": str(copy), "magpie_type": kind}))

    latency_block = {
        "enabled": True,
        "method": latency.method,
        "primary_metric": "wall_median_ms" if latency.metric == "wall" else "kernel_median_ms",
        "rep_ms": latency.rep_ms,
        "n_retries": latency.n_retries,
        "estimate_reps": latency.estimate_reps,
        "warmup_iters": latency.warmup_iters,
        "seed": seed,
        "pythonpath": python_path,
        "timeout_seconds": float(stage_timeout_s),
    }
    kernel_config = root / "kernels.yaml"
    _write(
        kernel_config,
        "# Magpie kernel config written by Apex (apex_core.grader.magpie_backend); one entry per file and shape.\n"
        + _yaml_dump({"kernels": kernels_yaml, "latency": latency_block, "correctness": {"backend": "testcase"}}),
    )
    framework_config = root / "framework.yaml"
    _write(
        framework_config,
        "# Magpie framework config written by Apex: no hardware control, local scheduler, testcase correctness.\n"
        + _yaml_dump(
            {
                "gpu": {"device_ids": None, "hardware": {"enabled": False}},
                "scheduler": {"environment": "local", "max_workers": 1, "gpu_devices": [0], "docker_image": None},
                "logging": {"level": "INFO", "file": None},
                "compiling": {"enable_default_compile": False},
                "correctness": {"backend": "testcase"},
                "performance": {"timeout_seconds": float(stage_timeout_s)},
                "latency": latency_block,
            }
        ),
    )
    solution_type = next(e.magpie_type for e in entries if e.role == "solution")
    return MagpieWorkspace(
        root=str(root),
        kernel_config=str(kernel_config),
        framework_config=str(framework_config),
        inputs_module=str(inputs_path),
        output_dir=str(output_dir),
        home=str(home),
        log=str(root / "magpie.log"),
        magpie_root=str(magpie_root),
        magpie_type=solution_type,
        entries=entries,
        latency=latency,
        seed=seed,
        device=device,
        stage_timeout_s=float(stage_timeout_s),
    )


def _yaml_dump(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=False)


# --- running Magpie ------------------------------------------------------------------------------


class MagpieRun(BaseModel):
    """What the Magpie child process did."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    argv: list[str]
    exit_code: int | None
    timed_out: bool
    wall_s: float
    log_tail: str


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Ask the reaper to kill everything below it; then kill its whole group in case it cannot."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _log_tail(path: Path, limit: int = 1500) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - limit))
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return _one_line(" | ".join(lines[-6:]), 500)


def run_magpie(
    workspace: MagpieWorkspace,
    timeout_s: float,
    *,
    identity: tuple[int, int] | None = None,
    visible_devices: str | None = None,
    memory_bytes: int | None = None,
    python: str = sys.executable,
) -> MagpieRun:
    """Run Magpie under the reaper: minimal environment, sandbox identity, limits, timeout, tree killed."""
    root = Path(workspace.root)
    extra = {"PYTHONPATH": os.pathsep.join([workspace.root, workspace.magpie_root, str(process.PACKAGE_PARENT)])}
    if visible_devices is not None:
        extra["CUDA_VISIBLE_DEVICES"] = extra["HIP_VISIBLE_DEVICES"] = visible_devices
    env = process.worker_environment(Path(workspace.home), extra)
    memory = memory_bytes or process.default_memory_bytes()
    config = {
        "pass_fds": [],
        "scratch": workspace.root,
        "memory_bytes": memory,
        "address_space_bytes": None,
        "cpu_seconds": int(max(600, 20 * timeout_s)),
        "file_bytes": 1024**3,
        "cpus": None,
        "uid": identity[0] if identity else None,
        "gid": identity[1] if identity else None,
    }
    argv = workspace.argv(python)
    started = time.monotonic()
    with open(workspace.log, "wb") as log:
        proc = subprocess.Popen(
            [python, "-s", "-m", "apex_core.grader.reaper", json.dumps(config), "--", *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=root,
            env=env,
            start_new_session=True,
        )
    timed_out = False
    code: int | None = None
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_tree(proc)
    wall = time.monotonic() - started
    return MagpieRun(argv=argv, exit_code=code, timed_out=timed_out, wall_s=wall, log_tail=_log_tail(Path(workspace.log)))


def _check_run(run: MagpieRun, workspace: MagpieWorkspace, timeout_s: float) -> None:
    from apex_core.grader.reaper import MEMORY_EXCEEDED_EXIT, MEMORY_MARKER

    if run.timed_out:
        raise MagpieError("timeout", f"Magpie did not finish within {timeout_s:g} s; its process tree was killed")
    if run.exit_code == MEMORY_EXCEEDED_EXIT and (Path(workspace.root) / MEMORY_MARKER).exists():
        raise MagpieError("crash", "Magpie's processes exceeded the memory limit and were killed")
    if run.exit_code != 0:
        code = run.exit_code
        how = f"was killed by signal {code - 128}" if code is not None and code > 128 else f"exited with code {code}"
        raise MagpieError("crash", f"Magpie {how}" + (f": {run.log_tail}" if run.log_tail else ""))


def find_report(output_dir: Path) -> Path:
    """The one ``compare_<ts>/compare_report.json`` Magpie wrote into a fresh output directory."""
    try:
        workspaces = sorted(p for p in output_dir.iterdir() if p.name.startswith("compare_"))
    except OSError as exc:
        raise MagpieError("missing_report", f"Magpie's output directory cannot be read ({exc.strerror})") from None
    if not workspaces:
        raise MagpieError("missing_report", f"Magpie wrote no compare_<timestamp> workspace under {output_dir}")
    if len(workspaces) > 1:
        names = ", ".join(p.name for p in workspaces[:4])
        raise MagpieError("malformed_report", f"Magpie's output holds {len(workspaces)} compare workspaces ({names}), expected one")
    workspace = workspaces[0]
    if workspace.is_symlink() or not workspace.is_dir():
        raise MagpieError("malformed_report", f"{workspace.name} is not a plain directory")
    report = workspace / REPORT_NAME
    if not report.exists() and not report.is_symlink():
        raise MagpieError("missing_report", f"Magpie wrote no {REPORT_NAME} in {workspace.name}")
    return report


def read_report(path: Path) -> bytes:
    """The report's bytes: a regular file (no symlink) of at most MAX_REPORT_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise MagpieError("malformed_report", f"{REPORT_NAME} cannot be opened as a plain file ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise MagpieError("malformed_report", f"{REPORT_NAME} is not a regular file")
        if info.st_size > MAX_REPORT_BYTES:
            raise MagpieError("malformed_report", f"{REPORT_NAME} is {info.st_size} bytes, above the {MAX_REPORT_BYTES} allowed")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_REPORT_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_REPORT_BYTES:
        raise MagpieError("malformed_report", f"{REPORT_NAME} grew above the {MAX_REPORT_BYTES} bytes allowed")
    return data


# --- reading the report --------------------------------------------------------------------------


def _finite(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise ValueError(f"must be a number, got {type(value).__name__} {shown}")  # noqa: TRY004 (pydantic needs ValueError)
    try:
        number = float(value)
    except OverflowError:
        raise ValueError("is a number too large to be a float") from None
    if math.isnan(number):
        raise ValueError("is NaN, not a number")
    if math.isinf(number):
        raise ValueError("is infinite")
    return number


def _latency_ms(value: Any) -> float:
    number = _finite(value)
    if not 0.0 < number <= MAX_LATENCY_MS:
        raise ValueError(f"must be a latency above 0 and at most {MAX_LATENCY_MS:g} ms, got {number:g}")
    return number


def _non_negative(value: Any) -> float:
    number = _finite(value)
    if not 0.0 <= number <= MAX_LATENCY_MS:
        raise ValueError(f"must be between 0 and {MAX_LATENCY_MS:g}, got {number:g}")
    return number


def _finite_or_none(value: Any) -> float | None:
    return None if value is None else _finite(value)


def _text(value: Any) -> str:
    """Free text from the report (error messages): any JSON value, flattened, clipped; never run."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, default=str)[:2000]
    return _one_line(text, 400)


LatencyMs = Annotated[float, BeforeValidator(_latency_ms)]
NonNegativeMs = Annotated[float, BeforeValidator(_non_negative)]
FiniteNumber = Annotated[float | None, BeforeValidator(_finite_or_none)]
Text = Annotated[str, BeforeValidator(_text)]
Count = Annotated[StrictInt, Field(ge=0, le=10**9)]


class _Report(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ReportStats(_Report):
    """Magpie's ``LatencyStats`` (milliseconds)."""

    median_ms: LatencyMs
    samples_ms: list[LatencyMs] = Field(default_factory=list, max_length=MAX_SAMPLES)
    p50_ms: NonNegativeMs | None = None
    p99_ms: NonNegativeMs | None = None
    min_ms: NonNegativeMs | None = None
    max_ms: NonNegativeMs | None = None
    std_ms: NonNegativeMs | None = None
    n_repeat: Count = 0
    n_retries: Count = 0
    estimate_ms: NonNegativeMs | None = None


class ReportLatency(_Report):
    """Magpie's ``LatencyResult.to_dict()``."""

    success: StrictBool
    method: StrictStr
    primary_metric: StrictStr | None = None
    primary_value_ms: FiniteNumber = None
    wall_stats: ReportStats | None = None
    kernel_stats: ReportStats | None = None
    dispatch_overhead_us: FiniteNumber = None
    crosscheck_vs_rocprof_ratio: FiniteNumber = None
    crosscheck_warning: Text = ""
    errors: Text = ""


class ReportStageResult(_Report):
    success: StrictBool = False
    errors: Text = ""


class ReportExtra(_Report):
    kernel_id: StrictStr
    kernel_type: StrictStr | None = None


class ReportKernel(_Report):
    """Magpie's ``EvaluationState.to_dict()`` for one kernel entry."""

    compiling_state: StageState
    correctness_state: StageState
    performance_state: StageState
    latency_state: StageState | None = None
    """Absent in reports of a Magpie without the Latency stage."""
    errors: list[Text] = Field(default_factory=list, max_length=1000)
    compiling_result: ReportStageResult | None = None
    correctness_result: ReportStageResult | None = None
    latency_result: ReportLatency | None = None
    extra: ReportExtra


class ReportResults(_Report):
    kernel_results: list[ReportKernel] = Field(max_length=4096)


class CompareReport(_Report):
    """``compare_report.json``; Magpie's winner, rankings and scores are deliberately not read."""

    mode: Literal["compare"]
    timestamp: StrictStr
    results: ReportResults


class MagpieKernelResult(BaseModel):
    """What Magpie reported for one entry, in nanoseconds, after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    role: Role
    shape_index: int
    shape: dict[str, int]
    compiling_state: StageState
    correctness_state: StageState
    latency_state: StageState | None
    method: str | None
    """The latency method Magpie states it used."""
    median_ns: float | None
    """The headline for the requested metric: the median of the wall-clock samples (checked
    against Magpie's stated median), or Magpie's kernel-only median."""
    samples_ns: list[float]
    wall_median_ns: float | None
    kernel_median_ns: float | None
    errors: str


class MagpieReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    timestamp: str
    kernels: list[MagpieKernelResult]


def _validation_reason(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    message = str(first["msg"]).removeprefix("Value error, ")
    more = f" (+{error.error_count() - 1} more problems)" if error.error_count() > 1 else ""
    return f"{REPORT_NAME}: {where}: {message}{more}"


def _stats_ns(stats: ReportStats | None, where: str, check_median: bool) -> tuple[float | None, list[float]]:
    if stats is None:
        return None, []
    samples = list(stats.samples_ms)
    if stats.n_retries and samples and stats.n_retries != len(samples):
        raise MagpieError("malformed_report", f"{REPORT_NAME}: {where}: n_retries is {stats.n_retries} but {len(samples)} samples are listed")
    median_ms = stats.median_ms
    if check_median and samples:
        own = statistics.median(samples)
        if abs(own - stats.median_ms) > MEDIAN_AGREEMENT * max(own, stats.median_ms):
            raise MagpieError(
                "malformed_report",
                f"{REPORT_NAME}: {where}: the stated median {stats.median_ms:g} ms is not the median of its samples ({own:g} ms)",
            )
        median_ms = own
    return median_ms * 1e6, [s * 1e6 for s in samples]


def parse_compare_report(
    raw: bytes | str,
    entries: Sequence[MagpieEntry],
    method: LatencyMethod,
    path: str = REPORT_NAME,
) -> MagpieReport:
    """Validate a compare report as hostile data and pair its kernels with the configured entries.

    Failures of the report itself (undecodable, wrong types, NaN/negative/huge latencies, other
    kernels than configured) raise ``MagpieError('malformed_report')``; failures Magpie reports
    for a kernel are kept in the result for ``timing_from_report`` to judge.
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        data = json.loads(text)
    except UnicodeDecodeError:
        raise MagpieError("malformed_report", f"{REPORT_NAME} is not UTF-8 text") from None
    except RecursionError:
        raise MagpieError("malformed_report", f"{REPORT_NAME} is nested too deeply to be a report") from None
    except ValueError as exc:
        raise MagpieError("malformed_report", f"{REPORT_NAME} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise MagpieError("malformed_report", f"{REPORT_NAME} holds a JSON {type(data).__name__}, not an object")
    try:
        report = CompareReport.model_validate(data)
    except ValidationError as exc:
        raise MagpieError("malformed_report", _validation_reason(exc)) from None
    except RecursionError:
        raise MagpieError("malformed_report", f"{REPORT_NAME} is nested too deeply to be a report") from None

    found = [kernel.extra.kernel_id for kernel in report.results.kernel_results]
    expected = [entry.id for entry in entries]
    if found != expected:
        shown = ", ".join(found[:8]) + (" ..." if len(found) > 8 else "")
        raise MagpieError(
            "malformed_report",
            f"{REPORT_NAME} lists kernels [{shown}] but Apex configured [{', '.join(expected)}] in that order",
        )

    kernels = []
    for index, (entry, kernel) in enumerate(zip(entries, report.results.kernel_results)):
        where = f"results.kernel_results[{index}].latency_result"
        latency = kernel.latency_result
        stated = latency.method if latency is not None else None
        if stated is not None and stated not in KNOWN_LATENCY_METHODS:
            raise MagpieError("malformed_report", f"{REPORT_NAME}: {where}.method: {_one_line(stated, 40)!r} is no Magpie latency method")
        wall_ns, wall_samples = _stats_ns(latency.wall_stats if latency else None, f"{where}.wall_stats", check_median=True)
        kernel_ns, kernel_samples = _stats_ns(latency.kernel_stats if latency else None, f"{where}.kernel_stats", check_median=False)
        wall_metric = method == "cuda_graph"
        errors = [*kernel.errors]
        for stage in (kernel.compiling_result, kernel.correctness_result):
            if stage is not None and stage.errors and stage.errors not in errors:
                errors.append(stage.errors)
        if latency is not None and latency.errors and latency.errors not in " ".join(errors):
            errors.append(latency.errors)
        kernels.append(
            MagpieKernelResult(
                id=entry.id,
                role=entry.role,
                shape_index=entry.shape_index,
                shape=entry.shape,
                compiling_state=kernel.compiling_state,
                correctness_state=kernel.correctness_state,
                latency_state=kernel.latency_state,
                method=stated,
                median_ns=wall_ns if wall_metric else kernel_ns,
                samples_ns=wall_samples if wall_metric else kernel_samples,
                wall_median_ns=wall_ns,
                kernel_median_ns=kernel_ns,
                errors=_one_line(" ;; ".join(e for e in errors if e), 400),
            )
        )
    return MagpieReport(path=path, timestamp=report.timestamp, kernels=kernels)


# --- from report to timing -----------------------------------------------------------------------


class MagpieShapeTiming(BaseModel):
    """Baseline and solution at one shape as Magpie timed them (nanoseconds per call)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shape: dict[str, int]
    baseline_median_ns: float
    solution_median_ns: float
    speedup: float
    baseline_samples_ns: list[float]
    solution_samples_ns: list[float]


class MagpieTiming(BaseModel):
    """Magpie's timing of one grading: per-shape medians, raw numbers and where they came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    method: str
    """The latency method Magpie states (cuda_graph, kernel_trace or both)."""
    metric: Literal["wall", "kernel"]
    timing_method: str
    shapes: list[MagpieShapeTiming]
    kernels: list[MagpieKernelResult]
    seed: int
    report_path: str
    magpie_root: str
    command: list[str]
    wall_s: float


def _kernel_failure(kernel: MagpieKernelResult, method: LatencyMethod) -> MagpieError | None:
    who = "the baseline" if kernel.role == "baseline" else "the solution"
    at = f"at shape {json.dumps(kernel.shape, separators=(',', ':'))}"
    detail = f": {kernel.errors}" if kernel.errors else ""
    if kernel.compiling_state == "FAILED":
        return MagpieError("compile_failed", f"Magpie could not compile {who}{detail}", kernel.role)
    if kernel.correctness_state == "FAILED":
        return MagpieError("run_failed", f"{who} failed when Magpie ran it {at}{detail}", kernel.role)
    if kernel.latency_state is None:
        return MagpieError(
            "no_latency",
            "this Magpie reports no Latency stage (no latency_state in its report); Apex needs a Magpie with bench_target latency support",
        )
    if kernel.latency_state != "SUCCESS":
        if kernel.latency_state == "SKIPPED":
            return MagpieError("no_latency", f"Magpie skipped the latency stage for {who} {at}{detail}")
        return MagpieError("run_failed", f"Magpie could not time {who} {at}{detail}", kernel.role)
    if kernel.method != method:
        return MagpieError("malformed_report", f"Magpie states it timed {who} with {kernel.method!r}, not the {method!r} Apex asked for")
    if kernel.median_ns is None:
        what = "wall-clock" if method == "cuda_graph" else "kernel-only"
        return MagpieError("run_failed", f"Magpie reported no {what} latency for {who} {at}{detail}", kernel.role)
    return None


def timing_from_report(
    report: MagpieReport,
    task_id: str,
    latency: MagpieLatency,
    *,
    seed: int = 0,
    magpie_root: str = "",
    command: Sequence[str] = (),
    wall_s: float = 0.0,
) -> MagpieTiming:
    """Per-shape medians from a validated report, or the first failure (the baseline's before the solution's)."""
    for role in ("baseline", "solution"):
        for kernel in report.kernels:
            if kernel.role == role and (failure := _kernel_failure(kernel, latency.method)) is not None:
                raise failure
    by_shape: dict[int, dict[str, MagpieKernelResult]] = {}
    for kernel in report.kernels:
        by_shape.setdefault(kernel.shape_index, {})[kernel.role] = kernel
    shapes = []
    for index in sorted(by_shape):
        pair = by_shape[index]
        if set(pair) != {"baseline", "solution"}:
            raise MagpieError("malformed_report", f"{REPORT_NAME} lacks a baseline or solution entry for shape {index}")
        base, sol = pair["baseline"], pair["solution"]
        assert base.median_ns is not None and sol.median_ns is not None
        shapes.append(
            MagpieShapeTiming(
                shape=base.shape,
                baseline_median_ns=base.median_ns,
                solution_median_ns=sol.median_ns,
                speedup=base.median_ns / sol.median_ns,
                baseline_samples_ns=base.samples_ns,
                solution_samples_ns=sol.samples_ns,
            )
        )
    described = {
        "cuda_graph": "wall-clock over CUDA/HIP graph replay (do_bench_cudagraph)",
        "kernel_trace": "kernel-only durations from rocprofv3 --kernel-trace",
        "both": "kernel-only durations from rocprofv3 (wall-clock graph replay kept alongside)",
    }[latency.method]
    return MagpieTiming(
        task_id=task_id,
        method=latency.method,
        metric=latency.metric,
        timing_method=(
            f"magpie:{latency.method}: {described}; one input set per shape, no cache flush, "
            f"median of {latency.n_retries} retries of ~{latency.rep_ms} ms"
        ),
        shapes=shapes,
        kernels=report.kernels,
        seed=seed,
        report_path=report.path,
        magpie_root=magpie_root,
        command=list(command),
        wall_s=wall_s,
    )


# --- the judge's entry point ---------------------------------------------------------------------


def run_magpie_timing(
    task: Task,
    baseline_path: Path,
    solution_path: Path,
    shapes: Sequence[Shape],
    timeout_s: float,
    scratch: Path,
    *,
    seed: int = 0,
    latency: MagpieLatency | None = None,
    visible_devices: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> MagpieTiming:
    """Time baseline and solution at ``shapes`` with Magpie; MagpieError (one line) when it cannot.

    Raises MagpieNotInstalledError (an ApexUserError) when MAGPIE_ROOT names no usable Magpie.
    ``scratch`` receives the workspace (configs, per-entry directories, Magpie's output and log)
    and is left in place for inspection; the caller removes it. When the judge runs as root,
    Magpie runs as the sandbox user, so MAGPIE_ROOT and the parents of ``scratch`` must be
    readable by that user (a ``tempfile.mkdtemp()`` directory is). ``seed`` is the public seed of
    Magpie's inputs (shape i uses ``seed + i``); pass a fresh random one per grading.
    """
    root = require_magpie_root(environ)
    latency = latency or MagpieLatency()
    identity = process.sandbox_identity()
    workspace = write_magpie_workspace(
        task,
        Path(baseline_path),
        Path(solution_path),
        shapes,
        Path(scratch),
        magpie_root=root,
        seed=seed,
        latency=latency,
        stage_timeout_s=max(10.0, min(300.0, timeout_s / 2)),
        owner=identity,
    )
    run = run_magpie(workspace, timeout_s, identity=identity, visible_devices=visible_devices)
    _check_run(run, workspace, timeout_s)
    report_path = find_report(Path(workspace.output_dir))
    report = parse_compare_report(read_report(report_path), workspace.entries, latency.method, path=str(report_path))
    return timing_from_report(
        report,
        task.id,
        latency,
        seed=seed,
        magpie_root=str(root),
        command=run.argv,
        wall_s=run.wall_s,
    )

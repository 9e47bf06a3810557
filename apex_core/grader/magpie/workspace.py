"""Planning Magpie's kernel entries and writing its workspace: configs, sources, bench targets."""

from __future__ import annotations

import json
import keyword
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from apex_core.grader.isolation import process
from apex_core.grader.magpie.errors import LatencyMethod, Role
from apex_core.tasks.schema import Shape, Task

COMPILED_SUFFIXES = (".hip", ".cu", ".cpp")
TARGET_MODULE = "apex_magpie_target"
INPUTS_MODULE = "apex_magpie_inputs"


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
        '"""Inputs of one task for Apex\'s Magpie entries (SPEC); generated by apex_core.grader.magpie."""\n\n'
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
        from apex_core.grader.isolation import native

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
        from apex_core.grader.isolation.worker import describe_exception

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
        "# Magpie kernel config written by Apex (apex_core.grader.magpie); one entry per file and shape.\n"
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

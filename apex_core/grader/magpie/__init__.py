"""The Magpie backend: Magpie compiles and times baseline and solution; correctness stays ours.

The package: ``install`` (finding Magpie), ``workspace`` (its kernel config and bench targets),
``run`` (the sandboxed run and its report file), ``report`` (reading the report as hostile data),
``timing`` (per-shape timings and the judge's entry point), ``errors``.

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

from apex_core.grader.magpie.errors import MagpieError, MagpieNotInstalledError
from apex_core.grader.magpie.install import MAGPIE_ROOT_ENV, magpie_problem, magpie_root, magpie_supports, require_magpie_root
from apex_core.grader.magpie.report import MagpieKernelResult, MagpieReport, parse_compare_report
from apex_core.grader.magpie.run import find_report, read_report, run_magpie
from apex_core.grader.magpie.timing import MagpieShapeTiming, MagpieTiming, run_magpie_timing, timing_from_report
from apex_core.grader.magpie.workspace import MagpieEntry, MagpieLatency, MagpieWorkspace, plan_entries, write_magpie_workspace

__all__ = [
    "MAGPIE_ROOT_ENV",
    "MagpieEntry",
    "MagpieError",
    "MagpieKernelResult",
    "MagpieLatency",
    "MagpieNotInstalledError",
    "MagpieReport",
    "MagpieShapeTiming",
    "MagpieTiming",
    "MagpieWorkspace",
    "find_report",
    "magpie_problem",
    "magpie_root",
    "magpie_supports",
    "parse_compare_report",
    "plan_entries",
    "read_report",
    "require_magpie_root",
    "run_magpie",
    "run_magpie_timing",
    "timing_from_report",
    "write_magpie_workspace",
]

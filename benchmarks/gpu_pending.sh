#!/usr/bin/env bash
# What this repository still has to measure on a GPU, in the order the open issues need it, as one
# command for the background driver (a device call lasts 10 minutes; this takes about 30-40):
#
#   BG_WAIT_S=540 bash benchmarks/gpu_background.sh 'PARTS="sweep verify" bash benchmarks/gpu_pending.sh'
#
# BG_WAIT_S must stay under the call's 600 s, or the call is cut off before it packs $BG into $OUT.
#
# Parts (PARTS, default tests, verify and identify), each writing under $BG (default /tmp/bg):
# - tests: the GPU-marked tests of the grader, the pipeline's stages, the workloads, the kernels and
#   the profiler (issue 29's GPU pass), or those of TESTS (paths, node ids) -> $BG/gpu-tests.txt
# - verify: `apex tasks verify` of the tasks not yet verified on a GPU (VERIFY_TASKS, default every
#   model task without a passing timed record in benchmarks/results/verify-*.jsonl, per
#   benchmarks/task_suite_table.py), in one process that resumes from $BG/verify.jsonl, so a later
#   device call on the same warm machine goes on where the last one stopped -> $BG/verify.jsonl.
#   Commit it as benchmarks/results/verify-<machine>-<date>T<HHMM>-<commit>.jsonl, HHMM the UTC
#   time the device session started: task_suite_table.py takes the latest record by that order.
# - identify: benchmark, profile and identify of the registry models' workloads no earlier run
#   measured (issue 30; benchmarks/results/identify-models-*/identify.json, per task_suite_table.py
#   --list-unidentified; RUNS runs each, default 2, CALLS request mixes profiled, default 1, top 40
#   kernels with shapes; about 115 s a model at 3 mixes on the H200 of 2026-12-06, whatever its size) -> $BG/identify.json, and the docs/tasks.md table
#   from it -> $BG/identify-table.md; CASES names the workloads instead (comma-separated, `models`
#   for all 24) and IDENTIFY names the output (default identify: $BG/$IDENTIFY.json). Commit the
#   results as benchmarks/results/identify-models-<machine>-<date>-<commit>/.
# - sweep: benchmarks/config_sweep.py over SWEEP_TASKS -> $BG/sweep.json. The default is Falcon's
#   layer_norm, whose solution now also holds the row padded as the baseline does (24 launch
#   choices). For a kernel with launch variants (layer_norm, the quantizers, silu_and_mul), put the
#   fastest choice in the solution's _tile, then verify the task again. (Llama-3.2-1B's paged decode,
#   once slow at batch 4 in the judge only, is verified since the judge returns its memory.)
# - bench: benchmarks/grader_bench.py (BENCH_ARGS) in each of BENCH_ARMS: "now" (this tree) and
#   "before" (this tree without BENCH_PATCH); an arm named now<x> or before<x> adds the options in
#   $ARGS_<arm> -> $BG/bench-<arm>.{json,txt} (issue 32).
# - throughput: benchmarks/ray_throughput.py --skip-ray --distinct, the local executor with
#   TP_PER_DEVICE gradings at once on one GPU (default "1 16"), TP_GRADINGS each -> $BG/throughput-*.
# Wheels from .whl/ (carry it): benchmarks/gpu_site.sh.
set -u
BG=${BG:-/tmp/bg}; mkdir -p "$BG"
PARTS=${PARTS:-"tests verify identify"}
RUNS=${RUNS:-2}
CALLS=${CALLS:-1}  # request mixes profiled per model: the 7 models of 2026-12-06 took 3 (about 115 s a model)
IDENTIFY=${IDENTIFY:-identify}
. benchmarks/gpu_site.sh  # the carried wheels, and PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$BG/machine.txt" 2>&1
{ git rev-parse --short HEAD; git diff --shortstat HEAD; } >> "$BG/machine.txt" 2>/dev/null || true  # a device copy's .git can lag its files
for part in $PARTS; do
  echo "== $part from $(date -u +%H:%M:%S)"
  case $part in
    tests)
      python3 -m pytest -o addopts="-ra --durations=12" -p no:cacheprovider -m gpu -q --timeout 300 \
        ${TESTS:-tests/apex_core/grader tests/apex_core/pipeline/stages/test_gpu_identify.py tests/apex_core/workloads/test_gpu.py
        tests/apex_core/kernels/test_rms_norm.py tests/apex_core/profiling/test_capture.py} > "$BG/gpu-tests.txt" 2>&1
      tail -3 "$BG/gpu-tests.txt" ;;
    verify)
      VERIFY_TASKS=${VERIFY_TASKS:-$(python3 benchmarks/task_suite_table.py --verified benchmarks/results/verify-*.jsonl --list-unverified)}
      python3 -m apex_core.cli.main tasks verify $(printf -- '--task %s ' $VERIFY_TASKS) --jsonl "$BG/verify.jsonl" --resume \
        >> "$BG/verify-stdout.txt" 2>&1
      tail -c 600 "$BG/verify.jsonl" ;;
    identify)
      CASES=${CASES:-$(python3 benchmarks/task_suite_table.py --identify benchmarks/results/identify-models-*/identify.json --list-unidentified)}
      if [ -z "$CASES" ]; then echo "every registry model has an identify result; CASES names workloads to run again"; continue; fi
      python3 benchmarks/workloads_bench.py --cases "$CASES" --runs "$RUNS" --calls "$CALLS" --top 40 --out "$BG/$IDENTIFY.json" \
        > "$BG/$IDENTIFY-stdout.txt" 2>&1
      python3 benchmarks/identify_table.py "$BG/$IDENTIFY.json" > "$BG/$IDENTIFY-table.md" 2>&1
      tail -5 "$BG/$IDENTIFY-stdout.txt" ;;
    sweep)
      python3 benchmarks/config_sweep.py $(printf -- '--task %s ' ${SWEEP_TASKS:-falcon-7b-instruct__layer_norm}) \
        --out "$BG/sweep.json" > "$BG/sweep-stdout.txt" 2>&1
      tail -c 1500 "$BG/sweep-stdout.txt" ;;
    bench)
      # The grader's latency, phases and rigor (grader_bench.py) in arms run one after another on
      # this machine: "now" is this tree; "before" is this tree with BENCH_PATCH (a patch carried in
      # .whl/, say) taken out again, so a change is measured against the code without it.
      for arm in ${BENCH_ARMS:-now}; do
        dir=$PWD
        extra="ARGS_$arm"
        if [ "${arm#before}" != "$arm" ]; then
          rm -rf /tmp/before && mkdir /tmp/before
          tar --exclude=./.whl --exclude=./.git -cf - . | tar -C /tmp/before -xf -
          (cd /tmp/before && git apply -R "$dir/$BENCH_PATCH") || { echo "BENCH_PATCH does not reverse"; continue; }
          dir=/tmp/before
        fi
        (cd "$dir" && PYTHONPATH=$dir:/tmp/site python3 benchmarks/grader_bench.py ${BENCH_ARGS:---repeats 8 --self-repeats 6} ${!extra:-} \
          --out "$BG/bench-$arm.json" > "$BG/bench-$arm.txt" 2>&1)
        tail -4 "$BG/bench-$arm.txt"
      done ;;
    throughput)
      # Gradings per GPU-hour through the local executor, every candidate new (--distinct), with
      # each of TP_PER_DEVICE gradings at once on the one GPU -> $BG/throughput-<n>.{json,txt}.
      for n in ${TP_PER_DEVICE:-1 16}; do
        python3 benchmarks/ray_throughput.py --skip-ray --distinct --gpus 1 --gradings ${TP_GRADINGS:-24} --per-device "$n" \
          --out "$BG/throughput-$n.json" > "$BG/throughput-$n.txt" 2>&1
        tail -1 "$BG/throughput-$n.txt"
      done ;;
    *) echo "unknown part $part: the parts are tests, verify, identify, sweep, bench, throughput" ;;
  esac
done
echo "== done at $(date -u +%H:%M:%S)"

#!/usr/bin/env bash
# The end-to-end credit on a GPU, through the CLI as a user runs it (issue 27): for each case, the
# workload benchmarked with its kernel stack (graphs on), profiled and identified (the shares that
# bound each kernel's credit), then the three-arm `apex benchmark-final` twice: with the task
# *baselines* patched in as the "winners" (their kernel gain must hold 1.0) and with our reference
# solutions (the accuracy gate, `apex patch check`, first). Every patch restored; site-packages
# compared before and after.
#
#   CASES="llama-3-1-8b-instruct:liger:8 qwen3-5-27b:fla:4" bash benchmarks/gpu_e2e_credit.sh
#
# A case is MODEL:STACK:LAYERS; its tasks are the stack's patch points of that model (TASKS_<stack>).
# WHICH="references" measures only our references; SKIP_BENCH=1 leaves out `apex benchmark` (the
# profile still runs: its shares bound the credits); SKIP_CHECK=1 leaves out `apex patch check` (the
# accuracy gate, when it already passed for the same solutions, depth and stack).
# Everything lands in $E2E (default /tmp/e2e) and is copied to $OUT at the end, so a driver that
# polls in several device calls can copy what is done so far: `cp -r $E2E $OUT/`.
set -u
OUT=${OUT:-/tmp/apex-out}; E2E=${E2E:-/tmp/e2e}; mkdir -p "$OUT" "$E2E"
CASES=${CASES:-"llama-3-1-8b-instruct:liger:8 qwen3-5-27b:fla:4"}
RUNS=${RUNS:-6}
TASKS_liger="rms_norm silu_and_mul rope"
TASKS_fla="gated_delta_rule"
TASKS_none="rms_norm silu_and_mul"  # cpu-mini, the dry run on a CPU: CASES=cpu-mini:none:2
. benchmarks/gpu_site.sh  # the carried wheels, and PYTHONPATH
A="python3 -m apex_core.cli.main"
SP=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
snap() { (cd "$SP" && find transformers liger_kernel fla -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum
          find transformers liger_kernel fla -type d -printf '%p %T@\n' | sort | sha256sum); }
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$E2E/log.txt"; }
timed() {  # OUT ERR COMMAND...: the command's stdout and stderr into files, its time and exit status into the log
  local out=$1 err=$2; shift 2; local S=$(date +%s); "$@" > "$out" 2> "$err"; local rc=$?
  say "  took $(( $(date +%s) - S )) s (rc $rc): ${*:4:3}"; [ $rc = 0 ] || tail -n 3 "$err" | tee -a "$E2E/log.txt"; return $rc; }
solution() {  # TASK WHICH -> a copy of the task's baseline or our reference solution, at a path of its own
  python3 - "$1" "$2" <<'EOF'
import shutil, sys
from pathlib import Path
from apex_core.tasks import get_task
from apex_core.tasks.reference_solutions import reference_solution_path
task, which = get_task(sys.argv[1]), sys.argv[2]
source = task.baseline_path if which == "baselines" else reference_solution_path(task)
target = Path(f"/tmp/solutions-{which}") / f"{task.id}{source.suffix}"
target.parent.mkdir(exist_ok=True)
shutil.copyfile(source, target)
print(target)
EOF
}
say "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) torch $(python3 -c 'import torch; print(torch.__version__)')" \
    "transformers $(python3 -c 'import transformers; print(transformers.__version__)') commit $(git rev-parse --short HEAD 2>/dev/null)" \
    "uid $(id -u)"
snap > "$E2E/snap-before.txt"
for CASE in $CASES; do
  MODEL=${CASE%%:*}; REST=${CASE#*:}; STACK=${REST%%:*}; LAYERS=${REST#*:}
  R=$E2E/$MODEL; mkdir -p "$R"
  TASKS=$(eval echo \$TASKS_$STACK); KFLAG="--kernels $STACK"; [ "$STACK" = none ] && KFLAG=""
  say "== $MODEL --kernels $STACK --layers $LAYERS: $TASKS"
  if [ -z "${SKIP_BENCH:-}" ]; then
    timed "$R/benchmark.json" "$R/benchmark.err" $A benchmark --workload "$MODEL" $KFLAG --layers "$LAYERS" --runs "$RUNS" --results-dir "$R" --json
    python3 -c "import json,sys; d=json.load(open('$R/benchmark.json')); print('benchmark', round(d['tokens_per_s']), 'cv', d['cv'], [round(r['tokens_per_s']) for r in d['runs']], d.get('notes'))" 2>&1 | tee -a "$E2E/log.txt"
  fi
  timed "$R/profile.json" "$R/profile.err" $A profile --workload "$MODEL" $KFLAG --layers "$LAYERS" --results-dir "$R/profile" --json
  P=$(python3 -c "import json; print(json.load(open('$R/profile.json'))['results_dir'])")
  timed "$R/identify-out.json" "$R/identify.err" $A identify --results "$P" --top-k 15 --no-shapes --json
  python3 -c "
import json; d=json.load(open('$R/identify-out.json'))
for k in d[:15]: print('identify', round(100*k['device_time_share'],2), '%', k.get('kind'), k.get('task_id'), k.get('patchable'))" 2>&1 | tee -a "$E2E/log.txt"
  for WHICH in ${WHICH:-baselines references}; do
    say "-- $MODEL: the $WHICH patched in"
    for K in $TASKS; do
      T=${MODEL}__$K; F=$(solution "$T" "$WHICH")
      timed "$R/apply-$WHICH-$K.json" "$R/apply-$WHICH-$K.err" $A patch apply --task "$T" --solution "$F" --workload "$MODEL" --results-dir "$R" --json
      python3 -c "import json; d=json.load(open('$R/apply-$WHICH-$K.json')); print('apply', d['task_id'], d['point'], d['applied'], d['reason'][:300])" 2>&1 | tee -a "$E2E/log.txt"
    done
    if [ "$WHICH" = references ] && [ -z "${SKIP_CHECK:-}" ]; then
      timed "$R/check-$WHICH.json" "$R/check-$WHICH.err" $A patch check --workload "$MODEL" --results-dir "$R" --json
      python3 -c "import json; d=json.load(open('$R/check-$WHICH.json')); print('check', d['verdict'])" 2>&1 | tee -a "$E2E/log.txt"
    fi
    timed "$R/final-$WHICH.json" "$R/final-$WHICH.err" $A benchmark-final --workload "$MODEL" --results-dir "$R" --json
    python3 - "$R/final-$WHICH.json" <<'EOF' 2>&1 | tee -a "$E2E/log.txt"
import json, sys
d = json.load(open(sys.argv[1]))
print("final", d["verdict"])
for arm, values in d["tokens_per_s"].items():
    print("  ", arm, [round(v) for v in values])
for c in d["credits"]:
    print("   credit", c["task_id"], c["gain"]["median"], c["gain"]["interval"], "share", c["share"], "bound", c["bound"], "implausible", c["implausible"])
print("   flags", d["flags"], "credited", d["credited"], "agreement", d["token_agreement"], "audit", d.get("token_audit"), "cv", d["original_cv"], "drift", d["drift"],
      "fallbacks", d["graph_fallbacks"], "excluded", d["excluded"])
EOF
    $A patch restore > /dev/null 2>&1
  done
  cp -r "$E2E" "$OUT/" 2>/dev/null
done
snap > "$E2E/snap-after.txt"
diff "$E2E/snap-before.txt" "$E2E/snap-after.txt" > /dev/null && say "IDENTICAL before/after (transformers, liger_kernel, fla)" \
  || say "site-packages CHANGED"
$A patch status 2>&1 | tail -3 | tee -a "$E2E/log.txt"
say "== done"
cp -r "$E2E" "$OUT/" 2>/dev/null

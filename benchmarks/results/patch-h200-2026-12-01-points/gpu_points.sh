#!/usr/bin/env bash
# H200: reference solutions graded, patched into a stack (Liger for Llama, fla for Qwen3.5), benchmark-final with the model reward.
# usage: bash .whl/gpu_points.sh MODEL KERNELS TASK... (a task given as TASK=FILE patches FILE instead of our reference solution)
set -u
MODEL=$1; STACK=$2; shift 2
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $(ls .whl/*.whl | grep -v "liger\|fla\|flash_linear") 2>&1 | tail -2
python3 -m pip install -q --no-index --no-deps --no-cache-dir .whl/liger_kernel-*.whl .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
A="python3 -m apex_core.cli.main"
R=/tmp/r-$MODEL; mkdir -p $R/grades
SP=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
snap() { (cd $SP && find transformers liger_kernel fla -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum; find transformers liger_kernel fla -type d -printf '%p %T@\n' | sort | sha256sum); }
snap > $OUT/snap-before-$MODEL.txt
{
echo "== $(date -u) $MODEL --kernels $STACK; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
for T in "$@"; do
  TASK=${T%%=*}; FILE=${T#*=}
  [ "$FILE" = "$T" ] && FILE=$(python3 -c "from apex_core.tasks import get_task; from apex_core.tasks.reference_solutions import reference_solution_path as r; print(r(get_task('$TASK')))")
  EXT=${FILE##*.}; mkdir -p /tmp/sol; cp "$FILE" /tmp/sol/$TASK.$EXT; FILE=/tmp/sol/$TASK.$EXT
  S=$(date +%s)
  $A grade --task $TASK --solution $FILE --json > $R/grades/$TASK.json 2>/tmp/g.err || tail -3 /tmp/g.err
  python3 -c "import json; d=json.load(open('$R/grades/$TASK.json')); d=d[0] if isinstance(d,list) else d; print('grade', d['task_id'], d['outcome'], d['correct'], 'speedup', d['speedup'], d.get('speedup_ci95'), 'score', d['score']['total'], d['score']['normalized'], d['flags'])"
  echo "grade took $(( $(date +%s) - S )) s"
  echo "$TASK $FILE" >> $R/pairs.txt
done
S=$(date +%s)
$A benchmark --workload $MODEL --kernels $STACK --results-dir $R --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print('benchmark', round(d['tokens_per_s']), 'cv', round(100*d['cv'],1), [round(r['tokens_per_s']) for r in d['runs']])"
echo "benchmark took $(( $(date +%s) - S )) s"
while read TASK FILE; do
  S=$(date +%s)
  $A patch apply --task $TASK --solution $FILE --workload $MODEL --results-dir $R --json 2>/tmp/a.err | python3 -c "import json,sys; d=json.load(sys.stdin); print('apply', d['task_id'], d['point'], d['applied'], d['check']['shapes_checked'], d['reason'][:300])" || tail -3 /tmp/a.err
  echo "apply took $(( $(date +%s) - S )) s"
done < $R/pairs.txt
$A patch status
S=$(date +%s)
$A benchmark-final --workload $MODEL --results-dir $R --json 2>/tmp/final.err > $OUT/final-$MODEL.json && python3 -c "import json; d=json.load(open('$OUT/final-$MODEL.json')); print({k: d[k] for k in ('original_tokens_per_s','patched_tokens_per_s','median_ratio','interval','significant','drift','verdict','excluded','kernel_score','model_reward','reward_note')})" || tail -5 /tmp/final.err
echo "benchmark-final took $(( $(date +%s) - S )) s"
$A patch status
} > $OUT/run-$MODEL.txt 2>&1
cp $R/grades/*.json $OUT/ 2>/dev/null
cat $OUT/run-$MODEL.txt | cut -c1-600
snap > $OUT/snap-after-$MODEL.txt
diff $OUT/snap-before-$MODEL.txt $OUT/snap-after-$MODEL.txt && echo "IDENTICAL before/after (files and folder mtimes of transformers, liger_kernel, fla)"

#!/usr/bin/env bash
# H200: apex run with the replay agent on Llama-3.1-8B with Liger, the top Triton kernels; the run's files come back.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $(ls .whl/*.whl | grep -v "liger\|fla\|flash_linear") 2>&1 | tail -2
python3 -m pip install -q --no-index --no-deps --no-cache-dir .whl/liger_kernel-*.whl .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
SP=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
snap() { (cd $SP && find transformers liger_kernel fla -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum; find transformers liger_kernel fla -type d -printf '%p %T@\n' | sort | sha256sum); }
snap > $OUT/snap-before.txt
copy() { R=$(ls -d results/runs/*/ 2>/dev/null | tail -1); [ -n "$R" ] && for f in state.json report.md report.html results_summary.json; do [ -f "$R$f" ] && cp "$R$f" $OUT/; done; }
trap copy EXIT
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
S=$(date +%s)
timeout ${RUN_LIMIT:-560} python3 -m apex_core.cli.main run --workload llama-3-1-8b-instruct --kernels liger --kernel-types triton --top-k ${TOP_K:-3} --iterations 1 --runs ${RUNS:-2} 2>$OUT/progress.txt | tee $OUT/run.txt
echo "apex run took $(( $(date +%s) - S )) s (rc ${PIPESTATUS[0]})"
python3 -m apex_core.cli.main patch status; python3 -m apex_core.cli.main patch restore
snap > $OUT/snap-after.txt
diff $OUT/snap-before.txt $OUT/snap-after.txt && echo "IDENTICAL before/after (files and folder mtimes of transformers, liger_kernel, fla)"

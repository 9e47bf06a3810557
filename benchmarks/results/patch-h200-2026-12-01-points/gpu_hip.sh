#!/usr/bin/env bash
# H200: a HIP solution (rms_norm_hip) built into a shared library and patched at transformers' LlamaRMSNorm; status; restore.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $(ls .whl/*.whl | grep -v "liger\|fla\|flash_linear") 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
A="python3 -m apex_core.cli.main"
SP=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
snap() { (cd $SP && find transformers -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum; find transformers -type d -printf '%p %T@\n' | sort | sha256sum); }
snap > $OUT/snap-before-hip.txt
{
S=$(date +%s)
$A patch apply --task llama-3-1-8b-instruct__rms_norm_hip --solution reference_solutions/rms_norm_hip/solution.hip --results-dir /tmp/rh --json 2>/tmp/a.err | python3 -c "import json,sys; d=json.load(sys.stdin); print('apply', d['task_id'], d['point'], d['applied'], d['check'], d['reason'][:400])" || tail -3 /tmp/a.err
echo "apply (build + check) took $(( $(date +%s) - S )) s"
$A patch status
ls -la $SP/transformers/models/llama/ | grep apex
$A patch restore
} > $OUT/run-hip.txt 2>&1
cat $OUT/run-hip.txt | cut -c1-800
snap > $OUT/snap-after-hip.txt
diff $OUT/snap-before-hip.txt $OUT/snap-after-hip.txt && echo "IDENTICAL before/after (transformers files and folder mtimes)"

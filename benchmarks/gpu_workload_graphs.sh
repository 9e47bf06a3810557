#!/usr/bin/env bash
# GPU check of graph-captured workloads, in one device call each:
#   bash benchmarks/gpu_workload_graphs.sh               the depth sweep and the other defaults (workload_depth.py), ~8-9 min
#   MODE=tests bash benchmarks/gpu_workload_graphs.sh    the workloads' GPU tests (tests/apex_core/workloads/test_gpu.py), ~5 min
#   DEPTH_ARGS="--kernels none --depths full,8,4,2 --families ''" bash benchmarks/gpu_workload_graphs.sh   one sweep only
# Wheels in .whl/ (../shared/tools/device-wheels.sh) are installed as the earlier H200 runs did; Liger
# goes into site-packages so the Liger cases run. Everything lands in $OUT.
set -u
OUT=${OUT:-/tmp/apex-out}; mkdir -p "$OUT"
. benchmarks/gpu_site.sh  # the carried wheels, and PYTHONPATH
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)" \
     "python $(python3 -c 'import platform; print(platform.python_version())')" \
     "torch $(python3 -c 'import torch; print(torch.__version__)')" \
     "transformers $(python3 -c 'import transformers; print(transformers.__version__)')" \
     "liger $(python3 -c 'import importlib.metadata as m; print(m.version("liger-kernel"))' 2>/dev/null || echo none)" \
     "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" | tee "$OUT/environment.txt"
S=$(date +%s)
if [ "${MODE:-depth}" = tests ]; then
  timeout ${LIMIT_S:-560} python3 -m pytest -q -m gpu -p no:cacheprovider tests/apex_core/workloads/test_gpu.py 2>&1 | tee "$OUT/gpu-tests.txt"
else
  eval "set -- ${DEPTH_ARGS:-}"  # its words as the shell would split them ('' stays one empty word)
  timeout ${LIMIT_S:-570} python3 benchmarks/workload_depth.py "$@" --out "$OUT/workload-depth.json" --budget-s ${BUDGET_S:-470} \
    2> "$OUT/workload-depth.log" | tee "$OUT/workload-depth.txt"
  tail -n 40 "$OUT/workload-depth.log"
fi
echo "== took $(( $(date +%s) - S )) s"

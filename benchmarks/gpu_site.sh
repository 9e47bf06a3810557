# Sourced by the GPU scripts (gpu_e2e_credit.sh, gpu_pending.sh, gpu_workload_graphs.sh): the device
# machine has no package index, so the wheels carried in .whl/ (../shared/tools/device-wheels.sh)
# are installed from there. Pure-Python dependencies go to /tmp/site (on PYTHONPATH); Liger and fla
# go into site-packages, where the kernel stacks' patch points look for them. SKIP_WHEELS=1 (or no
# .whl/) installs nothing; PYTHONPATH is set either way.
if [ -z "${SKIP_WHEELS:-}" ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    $(ls .whl/*.whl | grep -v "liger\|fla\|flash_linear") 2>&1 | tail -2
  ls .whl/liger_kernel-*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-cache-dir \
    .whl/liger_kernel-*.whl 2>&1 | tail -2
  ls .whl/flash_linear_attention-*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-cache-dir \
    .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl 2>&1 | tail -2
fi
export PYTHONPATH=$PWD:/tmp/site

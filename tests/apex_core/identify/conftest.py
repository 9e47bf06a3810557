"""An index of small packages laid out like the real Liger-Kernel and flash-linear-attention.

The kernel names and file paths are the real ones (liger_kernel 0.8.5, fla-core 0.6.0); the
bodies are empty, since the identifier reads only names and locations.
"""

from pathlib import Path

import pytest

from apex_core.sources import PackageSource, SourceIndex, build_index

FILES = {
    "liger_kernel": {
        "ops/rms_norm.py": ["_rms_norm_forward_kernel"],
        "ops/swiglu.py": ["_swiglu_forward_kernel"],
        "ops/rope.py": ["_triton_rope"],
    },
    "fla": {
        "ops/common/chunk_delta_h.py": ["chunk_gated_delta_rule_fwd_kernel_h_blockdim64"],
        "ops/common/chunk_o.py": ["chunk_fwd_kernel_o"],
        "ops/gated_delta_rule/wy_fast.py": ["recompute_w_u_fwd_kernel"],
        "modules/fused_norm_gate.py": ["layer_norm_gated_fwd_kernel"],
    },
}


@pytest.fixture(scope="session")
def stack_index(tmp_path_factory) -> SourceIndex:
    site = tmp_path_factory.mktemp("stack") / "site-packages"
    packages = []
    for package, files in FILES.items():
        for relative, kernels in files.items():
            path = site / package / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            body = "import triton\n" + "".join(f"\n@triton.jit\ndef {k}(x_ptr):\n    pass\n" for k in kernels)
            path.write_text(body)
        packages.append(PackageSource(name=package, version="test", root=site / package))
    return build_index(packages, cache_dir=Path(tmp_path_factory.mktemp("cache")))

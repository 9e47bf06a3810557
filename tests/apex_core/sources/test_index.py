"""The source index finds kernels in installed packages, caches them, and rebuilds what changed."""

import os
import shutil
from pathlib import Path

import pytest

from apex_core.sources import PackageSource, build_index, index_package, installed_package
from apex_core.sources.index import cache_path

NORM = '''
import triton
import triton.language as tl


@triton.jit
def _toy_rms_norm_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pass


def toy_rms_norm(x, y):
    _toy_rms_norm_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
'''

OPS = '''
from toykernels.norm import _toy_rms_norm_kernel


def other_launcher(x):
    _toy_rms_norm_kernel[(1,)](x, x, 1, BLOCK=32)
'''


@pytest.fixture
def toy_package(tmp_path: Path) -> PackageSource:
    root = tmp_path / "site-packages" / "toykernels"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "norm.py").write_text(NORM)
    (root / "ops.py").write_text(OPS)
    return PackageSource(name="toykernels", version="1.0", root=root)


def test_a_packages_triton_kernel_is_found_with_its_location_and_launchers(toy_package, tmp_path):
    index = build_index([toy_package], cache_dir=tmp_path / "cache")
    kernel = index.find_kernel("_toy_rms_norm_kernel")
    assert kernel is not None
    assert (kernel.package, kernel.version, kernel.module) == ("toykernels", "1.0", "toykernels.norm")
    assert kernel.location == f"{toy_package.root / 'norm.py'}:7"
    assert kernel.launchers == ("toykernels.norm.toy_rms_norm", "toykernels.ops.other_launcher")


def test_profiler_names_with_suffixes_find_the_kernel_and_unknown_names_find_none(toy_package, tmp_path):
    index = build_index([toy_package], cache_dir=tmp_path / "cache")
    assert index.find_kernel("_toy_rms_norm_kernel_0d1d2de") is not None
    assert index.find_kernel("void at::native::vectorized_elementwise_kernel<4>(int)") is None
    assert index.find_kernel("_Z3fooPf") is None


def test_a_second_build_reads_the_cache_and_rescans_nothing(toy_package, tmp_path):
    cache = tmp_path / "cache"
    assert index_package(toy_package, cache).rescanned == 3
    again = index_package(toy_package, cache)
    assert again.rescanned == 0
    assert [s.name for s in again.symbols()] == ["_toy_rms_norm_kernel"]


def test_a_changed_file_alone_is_rescanned(toy_package, tmp_path):
    cache = tmp_path / "cache"
    index_package(toy_package, cache)
    norm = toy_package.root / "norm.py"
    norm.write_text(NORM + "\n@triton.jit\ndef _second_kernel(x):\n    pass\n")
    os.utime(norm, ns=(norm.stat().st_atime_ns, norm.stat().st_mtime_ns + 1_000_000))
    rebuilt = index_package(toy_package, cache)
    assert rebuilt.rescanned == 1
    assert sorted(s.name for s in rebuilt.symbols()) == ["_second_kernel", "_toy_rms_norm_kernel"]


def test_a_new_version_is_rebuilt_from_scratch_and_replaces_the_old_cache(toy_package, tmp_path):
    cache = tmp_path / "cache"
    index_package(toy_package, cache)
    upgraded = toy_package.model_copy(update={"version": "2.0"})
    assert index_package(upgraded, cache).rescanned == 3
    assert cache_path(cache, upgraded).exists() and not cache_path(cache, toy_package).exists()


def test_a_corrupt_cache_file_is_ignored_and_rewritten(toy_package, tmp_path):
    cache = tmp_path / "cache"
    index_package(toy_package, cache)
    cache_path(cache, toy_package).write_text("{not json")
    assert index_package(toy_package, cache).rescanned == 3
    assert index_package(toy_package, cache).rescanned == 0


def test_absent_packages_are_skipped_not_errors(tmp_path):
    index = build_index(cache_dir=tmp_path / "cache", names=["no_such_package_apex"])
    assert index.symbols == [] and index.skipped == ["no_such_package_apex"]


def test_the_installed_triton_package_has_its_own_kernels_indexed(tmp_path):
    triton = installed_package("triton")
    if triton is None:
        pytest.skip("triton is not installed here")
    index = build_index([triton], cache_dir=tmp_path / "cache")
    if not index.symbols:
        pytest.skip(f"triton {triton.version} ships no @triton.jit functions")
    assert all(s.package == "triton" and s.version == triton.version and s.language == "triton" for s in index.symbols)
    first = index.symbols[0]
    assert Path(first.path).read_text().splitlines()[first.line - 1].lstrip().startswith("def " + first.name)


NORM_HIP = '''#include <hip/hip_runtime.h>

namespace apex {

__global__ void rms_norm_kernel(float* out, const float* in, int n) {
  out[threadIdx.x] = in[threadIdx.x];
}

namespace detail {
template <typename T, int VEC>
__global__ void add_kernel(T* out, const T* in, int n) {}
}  // namespace detail

}  // namespace apex

namespace other {
__global__ void rms_norm_kernel(float* out, const float* in, int n) {}
}  // namespace other
'''

LAUNCH_HIP = '''#include <hip/hip_runtime.h>
#include "norm.hip"

namespace apex {
void rms_norm(float* out, const float* in, int rows, int n, hipStream_t stream) {
  hipLaunchKernelGGL(rms_norm_kernel, dim3(rows), dim3(256), 0, stream, out, in, n);
}
}  // namespace apex
'''


@pytest.fixture
def hip_package(tmp_path: Path) -> PackageSource:
    root = tmp_path / "site-packages" / "toyhip"
    (root / "csrc").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "csrc" / "norm.hip").write_text(NORM_HIP)
    (root / "csrc" / "launch.cpp").write_text(LAUNCH_HIP)
    (root / "csrc" / "util.h").write_text("#pragma once\ninline int ceil_div(int a, int b) { return (a + b - 1) / b; }\n")
    return PackageSource(name="toyhip", version="0.1", root=root)


def test_a_hip_kernel_is_found_by_its_mangled_name_with_its_location_and_launch_site(hip_package, tmp_path):
    index = build_index([hip_package], cache_dir=tmp_path / "cache")
    kernel = index.find_kernel("_ZN4apex15rms_norm_kernelEPfPKfi")  # apex::rms_norm_kernel(float*, float const*, int)
    assert kernel is not None
    assert (kernel.language, kernel.qualified_name, kernel.package, kernel.version) == ("hip", "apex::rms_norm_kernel", "toyhip", "0.1")
    assert kernel.location == f"{hip_package.root / 'csrc' / 'norm.hip'}:5"
    assert "rms_norm_kernel(" in Path(kernel.path).read_text().splitlines()[kernel.line - 1]
    (site,) = kernel.launch_sites
    assert (site.launcher, site.path, site.line) == ("apex::rms_norm", str(hip_package.root / "csrc" / "launch.cpp"), 6)
    assert (site.configuration, site.arguments) == ("dim3(rows), dim3(256), 0, stream", "out, in, n")


def test_of_two_kernels_sharing_a_name_the_one_in_the_profilers_namespace_comes_first(hip_package, tmp_path):
    index = build_index([hip_package], cache_dir=tmp_path / "cache")
    assert index.find_kernel("void other::rms_norm_kernel(float*, float const*, int)").qualified_name == "other::rms_norm_kernel"
    assert index.find_kernel("apex::rms_norm_kernel").qualified_name == "apex::rms_norm_kernel"
    assert [k.namespace for k in index.kernels_named("other::rms_norm_kernel")] == ["other"]
    assert len(index.kernels_named("rms_norm_kernel")) == 2
    assert index.find_kernel("apex::rms_norm_kernel", languages=("triton",)) is None


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt is not on PATH (templates need it to demangle)")
def test_a_template_kernel_is_found_by_its_mangled_instantiation(hip_package, tmp_path):
    index = build_index([hip_package], cache_dir=tmp_path / "cache")
    kernel = index.find_kernel("_ZN4apex6detail10add_kernelIfLi4EEEvPT_PKS2_i")  # add_kernel<float, 4>
    assert kernel is not None and kernel.qualified_name == "apex::detail::add_kernel"
    assert kernel.template_parameters == "typename T, int VEC"


def test_a_changed_hip_file_alone_is_rescanned_and_its_new_kernel_found(hip_package, tmp_path):
    cache = tmp_path / "cache"
    assert index_package(hip_package, cache).rescanned == 4
    norm = hip_package.root / "csrc" / "norm.hip"
    norm.write_text(NORM_HIP + "\n__global__ void silu_kernel(float* x) {}\n")
    os.utime(norm, ns=(norm.stat().st_atime_ns, norm.stat().st_mtime_ns + 1_000_000))
    rebuilt = index_package(hip_package, cache)
    assert rebuilt.rescanned == 1
    assert sorted(s.name for s in rebuilt.symbols()) == ["add_kernel", "rms_norm_kernel", "rms_norm_kernel", "silu_kernel"]
    assert index_package(hip_package, cache).rescanned == 0


def test_a_linked_file_leading_out_of_the_package_is_not_indexed_and_one_staying_inside_is(toy_package, tmp_path):
    elsewhere = tmp_path / "home" / "kernels.py"
    elsewhere.parent.mkdir()
    elsewhere.write_text(NORM.replace("_toy_rms_norm_kernel", "_private_kernel"))
    (toy_package.root / "private.py").symlink_to(elsewhere)
    (toy_package.root / "norm_alias.py").symlink_to(toy_package.root / "norm.py")
    (toy_package.root / "linked_folder").symlink_to(elsewhere.parent, target_is_directory=True)
    index = build_index([toy_package], cache_dir=tmp_path / "cache")
    assert sorted(index.packages[0].files) == ["__init__.py", "norm.py", "norm_alias.py", "ops.py"]
    assert index.find_kernel("_private_kernel") is None


def test_a_fifo_under_a_source_files_name_is_not_indexed_and_does_not_block_the_build(toy_package, tmp_path):
    os.mkfifo(toy_package.root / "pipe.py")
    index = build_index([toy_package], cache_dir=tmp_path / "cache")
    assert "pipe.py" not in index.packages[0].files and index.find_kernel("_toy_rms_norm_kernel") is not None

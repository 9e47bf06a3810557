"""The source explorer reads what the index knows: kernels by profiler name, numbered source,
callers, callees, launch sites and regular-expression search, and nothing outside the indexed trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from apex_core.errors import ApexUserError
from apex_core.sources import PackageSource, build_index
from apex_core.sources.explorer import MAX_SHOW_LINES, SourceExplorer, enclosing_function

KERNELS = '''import triton
import triton.language as tl


@triton.jit
def _silu(x):
    return x * tl.sigmoid(x)


@triton.autotune(configs=[], key=["n"])
@triton.jit
def _toy_swiglu_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offsets)
    b = tl.load(b_ptr + offsets)
    tl.store(c_ptr + offsets, _silu(a) * b)


def swiglu_forward(a, b):
    """Launch the kernel; swiglu_forward(a, b) in this docstring is not a call."""
    c = torch_like_empty(a)
    _toy_swiglu_kernel[(a.numel() // 1024,)](a, b, c, a.numel(), BLOCK=1024)
    return c


def torch_like_empty(a):
    return a
'''

MODULE = '''from toystack.ops.swiglu import swiglu_forward


class ToyMLP:
    def forward(self, a, b):
        # swiglu_forward(a, b) in a comment is not a call either
        return swiglu_forward(a, b)
'''


CUDA = '''#include <cuda_runtime.h>

namespace toy {

template <int kBlock>
__global__ __launch_bounds__(256)
void scale_kernel(float* out, const float* in, int n) {
  int i = blockIdx.x * kBlock + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
}

void launch_scale(float* out, const float* in, int n, cudaStream_t stream) {
  scale_kernel<256><<<(n + 255) / 256, 256, 0, stream>>>(out, in, n);
}

}  // namespace toy
'''


@pytest.fixture
def explorer(tmp_path: Path) -> SourceExplorer:
    root = tmp_path / "site-packages" / "toystack"
    (root / "ops").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "ops" / "__init__.py").write_text("")
    (root / "ops" / "swiglu.py").write_text(KERNELS)
    (root / "mlp.py").write_text(MODULE)
    (root / "csrc").mkdir()
    (root / "csrc" / "scale.cu").write_text(CUDA)
    (root / "big.py").write_text("\n".join(f"x{i} = {i}" for i in range(MAX_SHOW_LINES + 50)) + "\n")
    package = PackageSource(name="toystack", version="0.3", root=root)
    return SourceExplorer(build_index([package], cache_dir=tmp_path / "cache"))


def test_a_kernel_is_found_by_its_profiler_name_with_its_launcher(explorer):
    found = explorer.find("_toy_swiglu_kernel_0d1d2d3de")
    assert [k.qualified_name for k in found] == ["toystack.ops.swiglu._toy_swiglu_kernel"]
    assert found[0].launchers == ("toystack.ops.swiglu.swiglu_forward",)
    assert explorer.find("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT") == []


def test_show_prints_a_kernels_whole_definition_with_its_decorators_and_line_numbers(explorer):
    lines = explorer.show("_toy_swiglu_kernel")
    assert (lines.start, lines.end, lines.package, lines.version) == (10, 16, "toystack", "0.3")
    assert lines.text.splitlines()[0] == "10 | @triton.autotune(configs=[], key=[\"n\"])"
    assert lines.text.splitlines()[-1].startswith("16 |     tl.store")


def test_show_takes_a_line_with_context_a_range_or_a_dotted_function(explorer):
    path = explorer.find("_toy_swiglu_kernel")[0].path
    around = explorer.show(f"{path}:22", context=1)
    assert (around.start, around.end) == (21, 23)
    assert (explorer.show(f"{path}:1-3").start, explorer.show(f"{path}:1-3").end) == (1, 3)
    function = explorer.show("toystack.ops.swiglu.swiglu_forward")
    assert function.text.splitlines()[0].endswith("def swiglu_forward(a, b):")
    method = explorer.show("toystack.mlp.ToyMLP.forward")
    assert "return swiglu_forward(a, b)" in method.text


def test_a_long_range_is_cut_at_the_limit_and_says_so(explorer, tmp_path):
    big = tmp_path / "site-packages" / "toystack" / "big.py"
    lines = explorer.show(str(big))
    assert lines.truncated and lines.end - lines.start + 1 == MAX_SHOW_LINES and lines.total_lines == MAX_SHOW_LINES + 50


def test_files_outside_the_indexed_trees_cannot_be_read(explorer, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("token")
    with pytest.raises(ApexUserError, match="outside the indexed sources"):
        explorer.show(str(secret))
    escape = tmp_path / "site-packages" / "toystack" / "ops" / ".." / ".." / ".." / "secret.txt"
    with pytest.raises(ApexUserError, match="outside the indexed sources"):
        explorer.show(f"{escape}:1")
    with pytest.raises(ApexUserError, match="neither an indexed file nor a known kernel"):
        explorer.show("no_such_thing")


def test_callers_of_a_kernel_are_its_launches_and_of_a_function_its_real_calls_only(explorer):
    launches = explorer.callers("_toy_swiglu_kernel")
    assert [(r.kind, r.function, r.line) for r in launches] == [("launch", "toystack.ops.swiglu.swiglu_forward", 22)]
    calls = explorer.callers("swiglu_forward")
    assert [(r.kind, r.function, Path(r.path).name, r.line) for r in calls] == [("call", "ToyMLP.forward", "mlp.py", 7)]


def test_callees_name_the_helpers_and_launches_and_leave_out_triton_language(explorer):
    kernel = explorer.callees("_toy_swiglu_kernel")
    assert [(r.kind, r.target, r.target_is_kernel) for r in kernel] == [("call", "_silu", True)]
    launcher = explorer.callees("toystack.ops.swiglu.swiglu_forward")
    assert [(r.kind, r.target, r.target_is_kernel) for r in launcher] == [
        ("call", "torch_like_empty", False), ("launch", "_toy_swiglu_kernel", True)]
    with pytest.raises(ApexUserError, match="no indexed kernel or Python function"):
        explorer.callees("not_defined_anywhere")


def test_launch_sites_keep_the_arguments_as_written(explorer):
    (site,) = explorer.launch_sites("_toy_swiglu_kernel")
    assert site.arguments == "a, b, c, a.numel(), BLOCK=1024" and site.line == 22
    with pytest.raises(ApexUserError, match="no indexed kernel"):
        explorer.launch_sites("cutlass_gemm")


def test_grep_finds_lines_in_package_order_limits_and_filters(explorer):
    result = explorer.grep(r"tl\.load\(")
    assert [(Path(h.path).name, h.line) for h in result.hits] == [("swiglu.py", 14), ("swiglu.py", 15)]
    assert not result.truncated and result.files_searched == 6
    limited = explorer.grep(r"swiglu_forward", limit=1)
    assert len(limited.hits) == 1 and limited.truncated
    assert explorer.grep("SWIGLU_FORWARD", ignore_case=True, path_glob="mlp.py").hits[0].line == 1
    with pytest.raises(ApexUserError, match="not a valid regular expression"):
        explorer.grep("(")
    with pytest.raises(ApexUserError, match="not indexed here; the indexed ones are toystack"):
        explorer.grep("x", package="vllm")


def test_the_enclosing_function_of_a_line_is_the_innermost(tmp_path):
    source = tmp_path / "nested.py"
    source.write_text("def outer():\n    def inner():\n        return 1\n    return inner\n")
    assert enclosing_function(source, 3) == "outer.inner"
    assert enclosing_function(source, 4) == "outer"
    assert enclosing_function(source, 99) is None


def test_a_real_torch_triton_kernel_is_found_shown_and_its_launch_listed():
    explorer = SourceExplorer.build()
    kernel = explorer.find("_sampled_addmm_kernel")[0]
    assert kernel.package == "torch" and kernel.path.endswith("_triton_ops.py")
    assert "@triton.jit" in explorer.show("_sampled_addmm_kernel").text
    assert explorer.launch_sites("_sampled_addmm_kernel")[0].launcher.startswith("torch.sparse._triton_ops.")


def test_a_cuda_kernel_is_shown_from_its_template_line_and_its_launcher_lists_the_launch(explorer):
    (kernel,) = explorer.find("toy::scale_kernel")
    shown = explorer.show("toy::scale_kernel")
    assert shown.text.splitlines()[0] == " 5 | template <int kBlock>" and shown.end == 10
    (launch,) = explorer.callees("toy::launch_scale")
    assert (launch.kind, launch.target, launch.target_is_kernel, launch.line) == ("launch", "scale_kernel", True, 13)
    (site,) = explorer.launch_sites("scale_kernel")
    assert site.launcher == "toy::launch_scale" and "stream" in site.configuration


SECRET = "SECRET_TOKEN = 'hunter2'\n\n\ndef leaked_helper():\n    return SECRET_TOKEN\n"


def test_a_linked_file_in_a_package_leading_out_is_neither_grepped_nor_shown_and_one_inside_is(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.py").write_text(SECRET)
    root = tmp_path / "site-packages" / "toystack"
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "swiglu.py").write_text(KERNELS)
    (root / "ops" / "notes.py").symlink_to(home / "notes.py")
    (root / "alias.py").symlink_to(root / "ops" / "swiglu.py")
    explorer = SourceExplorer(build_index([PackageSource(name="toystack", version="0.3", root=root)], cache_dir=tmp_path / "cache"))
    assert explorer.grep("hunter2|SECRET_TOKEN").hits == []
    assert explorer.callers("leaked_helper") == []
    for location in (str(root / "ops" / "notes.py"), f"{root / 'ops' / 'notes.py'}:1", "toystack.ops.notes.leaked_helper"):
        with pytest.raises(ApexUserError, match="outside the indexed sources|neither an indexed file") as error:
            explorer.show(location)
        assert "hunter2" not in str(error.value)
    assert [Path(h.path).name for h in explorer.grep(r"def swiglu_forward").hits] == ["alias.py", "swiglu.py"]
    assert "def swiglu_forward" in explorer.show(f"{root / 'alias.py'}:19", context=0).text


def test_a_file_swapped_for_a_link_after_indexing_is_neither_grepped_nor_shown(explorer, tmp_path):
    (tmp_path / "notes.py").write_text(SECRET + "def swiglu_forward(a, b):\n    pass\n")
    module = tmp_path / "site-packages" / "toystack" / "mlp.py"
    module.unlink()
    module.symlink_to(tmp_path / "notes.py")  # the index still lists mlp.py as a file of the package
    assert explorer.grep("hunter2").hits == []
    assert [Path(h.path).name for h in explorer.grep("def swiglu_forward").hits] == ["swiglu.py"]
    with pytest.raises(ApexUserError, match="outside the indexed sources"):
        explorer.show(f"{module}:1")
    with pytest.raises(ApexUserError, match="outside the indexed sources|neither an indexed file"):
        explorer.show("toystack.mlp.leaked_helper")


def test_a_function_is_found_by_its_bare_name_wherever_it_is_defined_in_its_file(explorer):
    shown = explorer.show("torch_like_empty")  # defined on line 26, after other code: not a launcher the index knows
    assert shown.text.splitlines() == ["26 | def torch_like_empty(a):", "27 |     return a"]

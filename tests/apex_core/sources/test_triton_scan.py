"""Triton kernels and their launch sites are found from a file's syntax tree, without importing it."""

from apex_core.sources.triton_scan import scan_python_source

KERNELS = '''
import triton
import triton.language as tl
from triton import jit as triton_jit_alias

@triton.jit
def _plain_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass

@triton.autotune(configs=[], key=["n"])
@triton.jit(do_not_specialize=["n"])
def tuned_kernel(x_ptr, n):
    pass

@triton_jit_alias
def aliased_kernel(x_ptr):
    pass

def not_a_kernel(x):
    return x

class Runner:
    def launch(self, x):
        _plain_kernel[(1,)](x, x.numel(), BLOCK=128)

def launcher(x):
    grid = lambda meta: (1,)
    tuned_kernel[grid](x, 4)
    handlers = {}
    handlers["a"](x)
'''


def test_jit_and_autotune_decorated_functions_are_kernels_and_others_are_not():
    scan = scan_python_source(KERNELS, "pkg.mod")
    assert [k.name for k in scan.kernels] == ["_plain_kernel", "tuned_kernel", "aliased_kernel"]
    tuned = scan.kernels[1]
    assert tuned.line == 12 and tuned.decorators == ("triton.autotune", "triton.jit")


def test_launch_sites_name_their_enclosing_function_and_arguments():
    launches = {(x.kernel, x.launcher, x.arguments) for x in scan_python_source(KERNELS, "pkg.mod").launches}
    assert ("_plain_kernel", "pkg.mod.Runner.launch", "x, x.numel(), BLOCK=128") in launches
    assert ("tuned_kernel", "pkg.mod.launcher", "x, 4") in launches


def test_a_bare_jit_counts_only_when_imported_from_triton():
    source = "import triton\nfrom numba import jit\n@jit\ndef f(x):\n    pass\n"
    assert scan_python_source(source).kernels == []
    relative = "from ..runtime.jit import jit\n@jit\ndef helper(x):\n    pass\n"
    assert [k.name for k in scan_python_source(relative).kernels] == ["helper"]


def test_a_file_that_does_not_parse_or_never_mentions_triton_yields_nothing():
    assert scan_python_source("@triton.jit\ndef broken(:\n").kernels == []
    assert scan_python_source("def f():\n    return 1\n").kernels == []

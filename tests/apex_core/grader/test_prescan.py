import pytest

from apex_core.grader.prescan import scan_source


def kinds(source: str) -> list[str]:
    return [finding.kind for finding in scan_source(source)]


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("import sys\nsys.exit(0)\n", "exit_call"),
        ("import os as o\no._exit(0)\n", "exit_call"),
        ("exec('x = 1')\n", "dynamic_code"),
        ("import importlib\nimportlib.reload(importlib)\n", "dynamic_code"),
        ("import time\ntime.perf_counter_ns = lambda: 0\n", "timer_or_checker_patch"),
        ("import torch\ntorch.cuda.Event.elapsed_time = lambda a, b: 0.001\n", "timer_or_checker_patch"),
        ("import numpy as np\nsetattr(np.testing, 'assert_allclose', print)\n", "timer_or_checker_patch"),
        ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", "monkeypatch"),
        ("import threading\n", "threads_or_processes"),
        ("from concurrent.futures import ThreadPoolExecutor\n", "threads_or_processes"),
        ("import os\nos.fork()\n", "threads_or_processes"),
        ("import torch\ns = torch.cuda.Stream()\n", "side_stream"),
        ("import ctypes\n", "native_escape"),
        ("open('/tmp/x', 'w').write('PASS')\n", "file_write"),
        ("from pathlib import Path\nPath('a').write_text('x')\n", "file_write"),
        ("import sys\nsys._getframe(1)\n", "introspection"),
        ("import gc\ngc.get_objects()\n", "harness_reach"),
        ("import __main__\n", "harness_reach"),
        ("from __main__ import Worker\n", "harness_reach"),
        ("import sys\nworker = sys.modules['__main__']\n", "harness_reach"),
        ("import sys as s\nworker = s.modules.get('__main__')\n", "harness_reach"),
        ("import socket\n", "network"),
        ("from apex_core.kernels.rms_norm import reference_torch\n", "grader_import"),
    ],
)
def test_hack_constructs_are_flagged_with_their_line(source, kind):
    findings = scan_source(source)
    assert kind in [f.kind for f in findings]
    assert all(f.line >= 1 for f in findings)


def test_honest_triton_code_with_try_except_raises_no_flag():
    source = (
        "import torch\nimport triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n\n"
        "def rms_norm(x, weight, eps):\n"
        "    try:\n        block = triton.next_power_of_2(x.shape[-1])\n"
        "    except ValueError:\n        block = 1024\n"
        "    out = torch.empty_like(x)\n    k[(1,)](out, 1, BLOCK=block)\n    return out\n"
    )
    assert kinds(source) == []


def test_a_harmless_library_setting_is_not_a_timer_patch():
    assert kinds("import torch\ntorch.backends.cudnn.benchmark = True\n") == ["monkeypatch"]


def test_reading_a_file_is_not_writing_it():
    assert kinds("data = open('weights.bin', 'rb').read()\n") == []


def test_words_in_strings_and_comments_do_not_trigger():
    assert kinds("# sys.exit(0)\nNOTE = 'exec and eval and threading'\n") == []


def test_the_main_guard_and_collecting_garbage_are_not_reaching_into_the_harness():
    assert kinds("import gc\nif __name__ == '__main__':\n    gc.collect()\n") == []


def test_a_syntax_error_yields_no_findings():
    assert scan_source("def broken(:\n") == []

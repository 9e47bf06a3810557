"""A user's regular expression runs in a child process under a time limit: a pattern that backtracks
for ever ends with one line saying what to do, the child cannot outlive its CPU budget, and lines
are matched one by one with the syntax of Python's ``re``."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from apex_core.errors import ApexUserError
from apex_core.sources import PackageSource, build_index
from apex_core.sources.explorer import SourceExplorer
from apex_core.sources.grep import child_command, scan_files
from apex_core.sources.real_paths import real_root

CATASTROPHIC = r"(a+)+$"
LONG_AS = "a" * 27 + "!"
"""Against this line, Python's re takes about a minute on (a+)+$ (each further 'a' doubles it)."""

CODE = '''import triton
import triton.language as tl


def launch(x):
    return kernel[(1,)](x)  # launch it
'''


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "toystack"
    root.mkdir()
    (root / "code.py").write_text(CODE)
    (root / "long.py").write_text(f"x = '{LONG_AS}'\n")
    return root


def explorer_of(root: Path, tmp_path: Path, timeout_s: float = 10.0) -> SourceExplorer:
    package = PackageSource(name="toystack", version="1", root=root)
    return SourceExplorer(build_index([package], cache_dir=tmp_path / "cache"), grep_timeout_s=timeout_s)


def test_a_pattern_that_backtracks_for_ever_ends_at_the_time_limit_with_a_one_line_error(tree, tmp_path):
    explorer = explorer_of(tree, tmp_path, timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(ApexUserError) as error:
        explorer.grep(CATASTROPHIC)
    assert time.monotonic() - started < 8
    assert str(error.value) == ("the search did not finish in 1 s: simplify the pattern (avoid nested quantifiers such as (a+)+) "
                                "or search fewer files (one package, a path glob)")
    assert [hit.line for hit in explorer.grep(r"launch").hits] == [5, 6]  # the next search is served as usual


def test_the_search_process_ends_itself_when_its_cpu_budget_is_spent_even_with_nobody_to_kill_it(tree):
    request = {"pattern": CATASTROPHIC, "flags": 0, "trees": [[real_root(tree), [str(tree / "long.py")]]], "limit": 10,
               "max_bytes": 1 << 20, "cpu_seconds": 1}
    started = time.monotonic()
    done = subprocess.run(child_command(), input=json.dumps(request), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (-signal.SIGXCPU, -signal.SIGKILL), done.stderr
    assert time.monotonic() - started < 20


def test_anchors_are_a_lines_start_and_end_and_lookarounds_and_groups_work_as_in_python_re(tree, tmp_path):
    explorer = explorer_of(tree, tmp_path)
    assert [hit.line for hit in explorer.grep(r"^def ").hits] == [5]  # not only a file's first line
    assert [hit.line for hit in explorer.grep(r"it$").hits] == [6]
    assert [hit.line for hit in explorer.grep(r"(?<=return )kernel").hits] == [6]
    assert [hit.line for hit in explorer.grep(r"\Aimport").hits] == [1, 2]  # \A: each line's start
    assert [(Path(hit.path).name, hit.line) for hit in explorer.grep(r"(\w)\1").hits] == [("long.py", 1)]  # a backreference
    assert [hit.line for hit in explorer.grep(r"TRITON\.language", ignore_case=True).hits] == [2]


def test_a_file_scan_yields_each_matching_line_up_to_the_limit(tree):
    files = [(str(tree / "code.py"), real_root(tree))]
    assert list(scan_files(re.compile("triton"), files, limit=10)) == [(str(tree / "code.py"), 1), (str(tree / "code.py"), 2)]
    assert list(scan_files(re.compile("triton"), files, limit=1)) == [(str(tree / "code.py"), 1)]
    assert list(scan_files(re.compile("triton"), files, limit=10, needle="absent")) == []

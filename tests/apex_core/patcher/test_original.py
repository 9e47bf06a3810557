"""A measurement of the original stack is refused while patches are in place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from apex_core.errors import ApexUserError
from apex_core.patcher import Patcher, restore
from apex_core.patcher.journal import ROOTS_ENV, STATE_DIR_ENV
from apex_core.patcher.original import patched_environment, refuse_if_patched

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def patched(tmp_path: Path) -> tuple[Path, Path]:
    """A toy site-packages with one patch applied on purpose (as apex patch apply leaves it)."""
    site, cache = tmp_path / "site-packages", tmp_path / "cache"
    (site / "toystack").mkdir(parents=True)
    (site / "toystack" / "__init__.py").write_text("")
    (site / "toystack" / "norm.py").write_text("def rms_norm(x):\n    return x\n")
    with Patcher(tmp_path / "results", roots=[site], cache_dir=cache) as patcher:
        patch = patcher.begin(task_id="toy__rms_norm", solution="solution.py")
        patcher.replace(patch, {site / "toystack" / "norm.py": b"def rms_norm(x):\n    return 2 * x\n"})
        patcher.commit(patch)
    return site, cache


def test_a_baseline_is_refused_in_one_line_that_names_the_patches_and_the_way_out(patched):
    site, cache = patched
    with pytest.raises(ApexUserError) as refused:
        refuse_if_patched("apex benchmark", how_on_purpose="pass --patched", cache_dir=cache, roots=[site])
    message = str(refused.value)
    assert "\n" not in message and "toy__rms_norm" in message and "apex patch restore" in message and "--patched" in message
    restore(cache, roots=[site])
    refuse_if_patched("apex benchmark", cache_dir=cache, roots=[site])  # nothing in place: no word


def test_a_patched_measurement_is_keyed_apart_by_what_was_patched_in(patched):
    site, cache = patched
    key = patched_environment(cache, roots=[site])
    assert key["patched"].startswith("toy__rms_norm@") and len(key["patched"]) > len("toy__rms_norm@")
    restore(cache, roots=[site])
    assert patched_environment(cache, roots=[site]) == {}


def test_apex_benchmark_refuses_before_building_anything_while_patches_are_in_place(patched, tmp_path):
    site, cache = patched
    env = {**os.environ, "APEX_CACHE_DIR": str(cache), STATE_DIR_ENV: str(cache / "patches"), ROOTS_ENV: str(site),
           "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "apex_core.cli.main", "benchmark", "--workload", "cpu-mini",
                           "--results-dir", str(tmp_path / "measured")], env=env, capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and lines[-1].startswith("apex: error: 1 patch(es) are in place"), done.stderr[-2000:]
    assert "Traceback" not in done.stderr and not (tmp_path / "measured").exists()

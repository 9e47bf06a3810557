"""``apex integrate`` picks the winners among real gradings (ok, correct, unflagged, confined, fast
enough with the interval above 1.0, unchanged since graded) and patches only them in; ``apex
benchmark-final`` then measures the patched cpu-mini against the original and gives the model
reward from the winner's grading."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import pytest

from apex_core.patcher import restore, status

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[4]
TASK = "cpu-mini__rms_norm"
CANNED = REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py"
BASELINE = REPO_ROOT / "apex_core" / "kernels" / "rms_norm" / "baseline_python.py"


def test_only_the_fast_unchanged_solution_is_integrated(apex_cli, tmp_path):
    # A cache of its own: the judge's baseline records (its drift monitor) are then this test's alone.
    # In the session's shared cache, other tests recorded cpu-mini's baseline at another load, and a
    # baseline 10% away from that record flags the grading (baseline_drift), which bars it.
    own = {"APEX_CACHE_DIR": str(tmp_path / "apex-cache")}
    apex_cli = functools.partial(apex_cli, env=own)
    gradings = tmp_path / "gradings"
    gradings.mkdir()
    fast, slow, edited = tmp_path / "fast.py", tmp_path / "slow.py", tmp_path / "edited.py"
    shutil.copyfile(CANNED, fast)
    # Clearly slower than the baseline: a bare copy of it sits at 1.0x, where the grader's noise on a
    # busy machine once credited it 1.05x with an interval above 1.0 (see the issue note).
    slow.write_text(BASELINE.read_text() + "\n\n_baseline = rms_norm\n\n\ndef rms_norm(x, weight, eps):\n"
                    "    _baseline(x, weight, eps)\n    return _baseline(x, weight, eps)\n")
    shutil.copyfile(CANNED, edited)
    graded = apex_cli("grade", "--task", TASK, "--solution", str(fast), str(slow), str(edited), "--json")  # one process, one pool
    assert graded.returncode == 0, graded.stderr
    (gradings / "three.json").write_text(graded.stdout)
    edited.write_text(edited.read_text() + "\n# edited after grading\n")
    (gradings / "notes.json").write_text('{"not": "a grading"}')
    try:
        done = apex_cli("integrate", "--results", str(gradings), "--json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        verdicts = {Path(c["solution"]).name: c for c in report["candidates"]}
        assert set(verdicts) == {"fast.py", "slow.py", "edited.py"}
        assert verdicts["fast.py"]["eligible"], verdicts["fast.py"]["why_not"]
        slow_reason = verdicts["slow.py"]["why_not"]  # the baseline's work done twice: about 0.5x
        assert not verdicts["slow.py"]["eligible"] and ("below 1.05x" in slow_reason or "lower bound" in slow_reason), slow_reason
        assert "changed since it was graded" in verdicts["edited.py"]["why_not"]
        assert [w["solution"] for w in report["winners"]] == [str(fast)]
        assert [p["applied"] for p in report["patches"]] == [True]
        shown = json.loads(apex_cli("patch", "status", "--json").stdout)
        assert shown["patched"] and shown["journal"]["patches"][0]["solution"] == str(fast)
        final = apex_cli("benchmark-final", "--workload", "cpu-mini", "--runs", "3", "--results-dir", str(gradings), "--json")
        assert final.returncode == 0, final.stderr
        measured = json.loads(final.stdout)
        gain = measured["kernel_gain"]
        # Three rounds: large at the median, but on a loaded machine three rounds' t interval can
        # include 1.0 (a fresh-clone run of 2026-12-06: 2.47x, 0.94-9.64x); significance is
        # test_final's to check, with six rounds.
        assert gain["median"] > 1.5, measured["verdict"]
        assert gain["interval_method"] == "t on log ratios", "3 rounds: too few for a distribution-free 95% interval"
        kernel_score = json.loads((gradings / "three.json").read_text())[0]["score"]["normalized"]
        assert measured["kernel_score"] == pytest.approx(kernel_score)
        # nothing profiled this workload under --results-dir: no share bounds the gain, so no throughput term
        assert not measured["credited"] and "no profiled share" in measured["reward_note"]
        assert measured["model_reward"] == pytest.approx(0.7 * kernel_score)
    finally:
        apex_cli("patch", "restore")
    assert json.loads(apex_cli("patch", "status", "--json").stdout)["patched"] is False


def test_a_missing_results_folder_is_a_one_line_error(apex_cli, tmp_path):
    done = apex_cli("integrate", "--results", str(tmp_path / "nope"))
    assert done.returncode == 2 and "no such folder" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert status() is None and restore() is None

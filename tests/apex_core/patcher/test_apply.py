"""``apex patch apply`` on the cpu-mini workload, in this environment's real transformers: a graded
solution is patched in and runs inside the model; one that breaks the import, one that is wrong
inside the model and one that crashes it are each rolled back alone, the good one kept; a restore
gives every byte back."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from apex_core.patcher import restore, status
from apex_core.patcher.apply import apply_solutions
from apex_core.patcher.points import POINTS, point_for
from apex_core.tasks import get_task

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
GOOD = REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py"
BAD = {
    "import": "raise ImportError('broken on purpose')\n",
    "wrong": "def rms_norm(x, weight, eps):\n    return x.copy()\n",
    "crash": "import os, signal\n\ndef rms_norm(x, weight, eps):\n    os.kill(os.getpid(), signal.SIGSEGV)\n",
}


def _tree(folder: Path) -> dict[str, str]:
    """Every file of the target's package folder (bytecode included), by sha256."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def llama_folder():
    target = point_for(get_task(TASK)).target_file()
    assert target is not None
    before = _tree(target.parent)
    yield target.parent
    restore()  # whatever happened, nothing stays patched
    assert _tree(target.parent) == before


def test_a_good_solution_is_patched_in_kept_and_the_bad_ones_are_rolled_back_alone(llama_folder, tmp_path):
    results = tmp_path / "results"
    (good,) = apply_solutions([(TASK, GOOD)], results)
    assert good.applied and good.check.shapes_checked == len(get_task(TASK).test_shapes)
    reasons = {}
    for name, source in BAD.items():
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        (bad,) = apply_solutions([(TASK, path)], results)
        assert not bad.applied
        reasons[name] = bad.reason
    assert reasons["import"].startswith("import check failed") and "broken on purpose" in reasons["import"]
    assert reasons["wrong"].startswith("correctness check failed")
    assert "crashed" in reasons["crash"]
    journal = status()
    assert [p.task_id for p in journal.active()] == [TASK] and journal.active()[0].id == good.patch_id
    # The model really calls the kept solution.
    probe = "from apex_core.workloads import cpu_mini, load, get_workload; w = load(get_workload('cpu-mini')); " \
            "print(cpu_mini.label(cpu_mini.rms_norm_implementation()))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.stdout.strip().splitlines()[-1].startswith(f"apex_patch_{good.patch_id.replace('-', '_')}."), done.stderr


def test_a_file_that_changed_after_its_grading_was_verified_is_not_patched_in(llama_folder, tmp_path):
    """integrate and MCP apply_patch verify a grading of the file's sha256, then patch the bytes they
    read: bytes that differ from the graded ones (an agent's process edited the file in between)
    are refused before anything of them reaches site-packages."""
    edited = tmp_path / "solution.py"
    edited.write_bytes(GOOD.read_bytes() + b"\n# edited after the grading was verified\n")
    graded = hashlib.sha256(GOOD.read_bytes()).hexdigest()
    (refused,) = apply_solutions([(TASK, edited)], tmp_path / "results", graded_sha256={TASK: graded})
    assert not refused.applied and "changed after its grading was verified" in refused.reason and graded[:12] in refused.reason
    journal = status()
    assert journal is None or not journal.active()


def test_the_cli_applies_reports_json_and_restores(llama_folder, tmp_path, apex_cli):
    applied = apex_cli("patch", "apply", "--task", TASK, "--solution", str(GOOD), "--results-dir", str(tmp_path), "--json")
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["applied"] is True
    shown = json.loads(apex_cli("patch", "status", "--json").stdout)
    assert shown["patched"] and shown["journal"]["patches"][0]["task_id"] == TASK
    undone = apex_cli("patch", "restore", "--json")
    assert json.loads(undone.stdout)["files_restored"] >= 2


def test_tasks_without_a_patch_point_and_missing_files_are_one_line_errors(apex_cli, tmp_path):
    done = apex_cli("patch", "apply", "--task", "gpt-oss-20b__fused_moe", "--solution", str(GOOD))
    assert done.returncode == 2 and "no patch point yet" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    missing = apex_cli("patch", "apply", "--task", TASK, "--solution", str(tmp_path / "nope.py"))
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_every_patch_point_has_an_adapter_and_a_model_path():

    assert all(callable(p.body) and callable(p.model_path) for p in POINTS)
    assert len({p.id for p in POINTS}) == len(POINTS)


def test_every_adapter_is_valid_python_and_a_point_can_be_chosen_by_name(apex_cli):
    for point in POINTS:
        compile(point.adapter("p1-ab12", Path("/site/_apex_patch_p1_ab12.py"), "rms_norm", "t"), point.id, "exec")
    wrong = apex_cli("patch", "apply", "--task", "llama-3-1-8b-instruct__rms_norm", "--solution", str(GOOD), "--point", "nope")
    assert wrong.returncode == 2 and "its points are transformers.llama.rms_norm, liger.llama.rms_norm" in wrong.stderr


def test_a_patch_whose_journal_is_out_of_reach_is_still_reported_by_status(llama_folder, tmp_path, apex_cli):
    from apex_core.patcher.integrity import unaccounted_changes

    elsewhere = tmp_path / "other-state"  # a journal this environment's commands cannot find
    (applied,) = apply_solutions([(TASK, GOOD)], tmp_path / "results", cache_dir=elsewhere)
    try:
        assert applied.applied and status() is None
        found = unaccounted_changes(status())
        assert any(line.startswith(str(llama_folder / "modeling_llama.py")) and "differs from what its package installed" in line
                   for line in found), found
        assert any("_apex_patch_" in line and "solution copy" in line for line in found), found
        shown = json.loads(apex_cli("patch", "status", "--json").stdout)
        assert shown["patched"] is False and len(shown["unaccounted"]) == len(found)
    finally:
        restore(cache_dir=elsewhere)
    assert unaccounted_changes(status()) == []


def test_bytecode_of_a_patchs_copy_goes_with_it_and_a_stray_one_is_reported(llama_folder, tmp_path):
    """A process outside the session's quiet (an MCP server's model load) imports the copy and leaves
    its .pyc: restore removes it with the copy, and one left by anything else is named by status."""
    import py_compile

    from apex_core.patcher.integrity import unaccounted_changes

    (applied,) = apply_solutions([(TASK, GOOD)], tmp_path / "results")
    assert applied.applied
    (copy,) = llama_folder.glob("_apex_patch_*.py")
    compiled = Path(py_compile.compile(str(copy), doraise=True))
    restore()
    assert not copy.exists() and not compiled.exists()
    stray = llama_folder / "__pycache__" / "_apex_patch_left_over.cpython-311.pyc"
    stray.write_bytes(compiled.name.encode())
    try:
        found = unaccounted_changes(status())
        assert [line for line in found if str(stray) in line and "no patch journal lists" in line and "rm it" in line], found
    finally:
        stray.unlink()

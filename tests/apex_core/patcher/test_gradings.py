"""Only a grading this installation's judge signed, of exactly the file, made confined, carries a
patch: a real grading of the canned cpu-mini solution is accepted; the same grading with its
speedup raised, its hash swapped, its signed record copied onto another file, a plain result
nobody signed, an unconfined grading and a grading left in an agent's workspace are each rejected
with their reason, in one line of the integrate report. The MCP tool apply_patch refuses a file
that was never graded and patches it once the grader's MCP tool has graded it."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from fastmcp import Client

from apex_core.grader.cache import GradeCache
from apex_core.grader.ledger import LEDGER_DIR, GradingLedger, digest
from apex_core.grader.options import GradeOptions
from apex_core.grader.result import GradeResult
from apex_core.grader.service import grade_solutions
from apex_core.grader.solution_file import file_hash
from apex_core.patcher import restore, status
from apex_core.patcher.gradings import in_agent_workspace, require_graded, verified_grading
from apex_core.pipeline.stages.integrate import find_gradings, integrate, judge
from apex_core.errors import ApexUserError

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
CANNED = REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py"


class Graded:
    """One real grading of the canned solution, its file, and the cache folder whose key signed it."""

    def __init__(self, root: Path, solution: Path, result: GradeResult) -> None:
        self.root, self.solution, self.result = root, solution, result


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Graded:
    home = tmp_path_factory.mktemp("graded")
    root, solution = home / "cache", home / "kernels" / "solution.py"
    solution.parent.mkdir()
    shutil.copyfile(CANNED, solution)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("APEX_CACHE_DIR", str(root))
        (result,) = grade_solutions(TASK, [solution], GradeOptions(), cache=GradeCache(root))
    assert result.outcome.value == "ok" and not result.provenance.unconfined, result.reason
    return Graded(root, solution, result)


@pytest.fixture
def here(graded, monkeypatch) -> Graded:
    """The tests' installation is the one that graded (its cache folder, its key)."""
    monkeypatch.setenv("APEX_CACHE_DIR", str(graded.root))
    return graded


def _write(path: Path, result: GradeResult) -> Path:
    """A result file as ``apex grade --json`` writes it (a list of results)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([result.model_dump(mode="json")], indent=2))
    return path


def test_a_real_grading_is_accepted_and_is_the_verified_grading_of_its_file(here, tmp_path):
    ledger = GradingLedger()
    as_printed = GradeResult.model_validate(json.loads(_write(tmp_path / "g.json", here.result).read_text())[0])
    assert ledger.verify(as_printed) is None
    candidate = judge(as_printed, tmp_path / "g.json", 1.05, ledger)
    assert candidate.eligible and candidate.why_not == "", candidate.why_not
    found = verified_grading(TASK, here.solution)
    assert found is not None and digest(found) == digest(here.result) and found.solution_path == str(here.solution)
    assert digest(require_graded(TASK, here.solution)) == digest(here.result)
    # The same bytes elsewhere are the same solution; other bytes have no grading.
    copy = tmp_path / "copy.py"
    shutil.copyfile(here.solution, copy)
    assert verified_grading(TASK, copy) is not None
    copy.write_text(copy.read_text() + "\n# one more line\n")
    assert verified_grading(TASK, copy) is None and verified_grading(TASK, tmp_path / "nope.py") is None


def test_forged_copied_unsigned_unconfined_and_workspace_gradings_are_each_rejected_with_their_reason(here, tmp_path):
    results = tmp_path / "results"
    other = tmp_path / "other.py"
    other.write_text(CANNED.read_text() + "\n# never graded\n")
    ledger = GradingLedger()

    _write(results / "raised.json", here.result.model_copy(update={"speedup": 500.0}))
    swapped = here.result.model_copy(deep=True)
    swapped.provenance.solution_hash = file_hash(other)
    _write(results / "swapped.json", swapped)
    # The judge's signed record of the real grading, copied into the other file's place in the ledger,
    # named as a grading of the other file would be.
    claimed = here.result.model_copy(deep=True, update={"solution_path": str(other)})
    claimed.provenance.solution_hash = file_hash(other)
    record = next((here.root / LEDGER_DIR / TASK / here.result.provenance.solution_hash).glob("*.json"))
    copied = here.root / LEDGER_DIR / TASK / file_hash(other) / f"{digest(claimed)}.json"
    copied.parent.mkdir(parents=True)
    shutil.copyfile(record, copied)
    _write(results / "copied.json", claimed)
    plain = claimed.model_copy(update={"speedup": 2.0, "measured_speedup": 2.0, "speedup_ci95": (1.5, 2.5)})
    _write(results / "plain.json", plain)
    _write(results / "nowhere.json", plain.model_copy(update={"solution_path": str(tmp_path / ("x" * 300 + ".py"))}))
    # A real grading, made unconfined (the user's --unconfined): signed, but never integrated.
    unconfined_file = tmp_path / "unconfined.py"
    unconfined_file.write_text(CANNED.read_text() + "\n# graded unconfined\n")
    (unconfined,) = grade_solutions(TASK, [unconfined_file], GradeOptions(unconfined=True, timing=False))
    assert unconfined.outcome.value == "ok"
    _write(results / "unconfined.json", unconfined)
    # The real grading itself, left where an agent works (as the pipeline's grade_iter files are).
    _write(results / "runs" / "r1" / "output" / TASK / "grade_iter1.json", here.result)

    report = integrate(results)
    assert report.winners == [] and report.patches == []
    why = {Path(c.result_file).name: c.why_not for c in report.candidates}
    assert set(why) == {"raised.json", "swapped.json", "copied.json", "plain.json", "nowhere.json", "unconfined.json",
                        "grade_iter1.json"}
    assert all(reason and "\n" not in reason for reason in why.values()), why
    assert "edited after grading" in why["raised.json"] and "speedup 500.0 (signed: " in why["raised.json"]
    assert "no grading of this file" in why["swapped.json"] and "the solution changed since it was graded" in why["swapped.json"]
    assert "no grading of this file" in why["copied.json"] and ledger.signed(TASK, file_hash(other)) == []
    assert "no grading of this file" in why["plain.json"] and "signed by this installation" in why["plain.json"]
    assert "graded unconfined" in why["unconfined.json"] and verified_grading(TASK, unconfined_file) is None
    assert "agent's workspace" in why["grade_iter1.json"]
    assert "the solution file is gone" in why["nowhere.json"]
    assert [p.name for _, p in find_gradings(results)] == ["copied.json", "nowhere.json", "plain.json", "raised.json",
                                                           "swapped.json", "unconfined.json"]


def test_a_ledger_record_edited_in_place_no_longer_verifies(here, tmp_path):
    solution = tmp_path / "solution.py"
    shutil.copyfile(CANNED, solution)
    ledger = GradingLedger(tmp_path / "another-installation")
    assert ledger.verify(here.result).startswith("no grading of this file")  # another key, another ledger
    assert ledger.record(here.result)
    assert ledger.verify(here.result) is None
    (path,) = (ledger.root / LEDGER_DIR / TASK / here.result.provenance.solution_hash).glob("*.json")
    entry = json.loads(path.read_text())
    body = json.loads(entry["body"])
    body["result"]["speedup"] = 900.0
    entry["body"] = json.dumps(body, sort_keys=True)
    path.write_text(json.dumps(entry))
    assert ledger.signed(TASK, here.result.provenance.solution_hash) == []
    assert verified_grading(TASK, solution, ledger) is None


def test_passes_that_say_less_than_a_full_grading_carry_no_patch(here, tmp_path):
    """A correctness-only pass (check_correctness) does not replace a timed grading as the file's
    grading; a quick gate (the benchmark tool: no hidden shapes, one seed) never carries a patch; nor
    does a grading of another version of the task."""
    solution = tmp_path / "solution.py"
    shutil.copyfile(CANNED, solution)  # the graded bytes, at another path
    (checked,) = grade_solutions(TASK, [solution], GradeOptions(timing=False), use_cache=False)
    (quick,) = grade_solutions(TASK, [solution], GradeOptions(timing=False, hidden_shapes=False, seeds_per_shape=1),
                               use_cache=False)
    assert checked.outcome.value == quick.outcome.value == "ok" and GradingLedger().verify(quick) is None
    assert digest(verified_grading(TASK, solution)) == digest(here.result)
    why = judge(quick, tmp_path / "quick.json", 1.0).why_not
    assert "a partial check (" in why and "of 12 cases" in why, why
    other_version = here.result.model_copy(deep=True)
    other_version.provenance.task_hash = "0" * 64
    assert GradingLedger().record(other_version)
    assert "graded against another version of cpu-mini__rms_norm" in judge(other_version, tmp_path / "o.json", 1.05).why_not
    assert digest(verified_grading(TASK, solution)) == digest(here.result)


def test_agent_workspaces_are_output_task_folders_at_any_depth(tmp_path):
    assert in_agent_workspace(tmp_path / "output" / TASK / "grade_iter1.json")
    assert in_agent_workspace(tmp_path / "runs" / "r" / "output" / TASK / "sub" / "x.json")
    assert not in_agent_workspace(tmp_path / "runs" / "r" / "gradings" / f"{TASK}.json")
    assert not in_agent_workspace(tmp_path / "output" / "notes.json")  # not a task's folder
    linked = tmp_path / "elsewhere"
    (tmp_path / "output" / TASK).mkdir(parents=True)
    linked.symlink_to(tmp_path / "output" / TASK)
    assert in_agent_workspace(linked / "g.json")


def test_require_graded_says_what_is_missing(here, tmp_path):
    with pytest.raises(ApexUserError, match="no such file"):
        require_graded(TASK, tmp_path / "nope.py")
    with pytest.raises(ApexUserError, match="no such file"):
        require_graded(TASK, tmp_path / ("x" * 300 + ".py"))  # a name no file system takes
    ungraded = tmp_path / "ungraded.py"
    ungraded.write_text(CANNED.read_text() + "\n# not graded\n")
    with pytest.raises(ApexUserError, match="has no confined grading of its present content") as error:
        require_graded(TASK, ungraded)
    assert len(str(error.value).splitlines()) == 1


def test_apply_patch_over_mcp_refuses_an_ungraded_file_and_patches_it_once_graded(tmp_path, monkeypatch):
    from servers.grader import mcp as grader
    from servers.patcher import mcp as patcher

    monkeypatch.chdir(tmp_path)  # the patcher's journal goes to ./results
    solution = tmp_path / "solution.py"
    shutil.copyfile(CANNED, solution)
    arguments = {"task_id": TASK, "solution_path": str(solution)}

    async def session() -> tuple[str, dict, dict]:
        async with Client(patcher) as patching, Client(grader) as grading:
            refused = await patching.call_tool("apply_patch", arguments, raise_on_error=False)
            assert refused.is_error
            graded = await grading.call_tool("grade_solution", arguments)
            applied = await patching.call_tool("apply_patch", arguments)
            return refused.content[0].text, graded.structured_content, applied.structured_content

    try:
        refusal, grade, patch = asyncio.run(session())
    finally:
        restore()
    assert "has no confined grading of its present content" in refusal and "grade_solution" in refusal
    assert len(refusal.splitlines()) == 1
    assert grade["outcome"] == "ok"
    assert patch["applied"] and patch["solution"] == str(solution), patch


WRONG_IN_THE_MODEL = """

import sys as _sys

_graded = rms_norm


def rms_norm(x, weight, eps):
    if "transformers" in _sys.modules:  # right where it is graded, wrong inside the model
        return x.copy()
    return _graded(x, weight, eps)
"""


def test_apply_patch_over_mcp_of_a_solution_the_model_rolls_back_is_an_error_saying_why(tmp_path, monkeypatch):
    from servers.grader import mcp as grader
    from servers.patcher import mcp as patcher

    monkeypatch.chdir(tmp_path)
    solution = tmp_path / "solution.py"
    solution.write_text(CANNED.read_text() + WRONG_IN_THE_MODEL)
    arguments = {"task_id": TASK, "solution_path": str(solution)}

    async def session():
        async with Client(patcher) as patching, Client(grader) as grading:
            graded = await grading.call_tool("grade_solution", arguments)
            return graded.structured_content, await patching.call_tool("apply_patch", arguments, raise_on_error=False)

    try:
        grade, applied = asyncio.run(session())
    finally:
        restore()
    assert grade["outcome"] == "ok", grade
    text = applied.content[0].text
    assert applied.is_error and text.startswith(f"{TASK}: not applied, rolled back (") and "grade it again" in text, text
    assert status() is None or not status().active()


def test_apex_patch_apply_takes_the_users_word_and_says_so(apex_cli, tmp_path):
    solution = tmp_path / "solution.py"
    solution.write_text(CANNED.read_text() + "\n# never graded\n")
    try:
        done = apex_cli("patch", "apply", "--task", TASK, "--solution", str(solution), "--results-dir", str(tmp_path), "--json")
    finally:
        apex_cli("patch", "restore")
    assert done.returncode == 0 and json.loads(done.stdout)["applied"], done.stderr[-2000:]
    assert f"note: no confined grading of exactly {solution} for {TASK} was signed here; patched on your word" in done.stderr

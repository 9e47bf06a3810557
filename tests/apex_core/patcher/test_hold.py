"""``hold`` refuses to measure a solution whose bytes moved since its benchmark began, and says
which measurement it was (the final benchmark, or the accuracy gate)."""

from __future__ import annotations

from pathlib import Path

import pytest

from apex_core.errors import ApexUserError
from apex_core.patcher.hold import bound_patch, hold

pytestmark = pytest.mark.site_packages  # hold restores the environment's patches first


@pytest.mark.parametrize("during", ["the final benchmark", "the accuracy gate"])
def test_a_solution_edited_after_it_was_bound_is_refused_naming_the_measurement(tmp_path, during):
    solution = tmp_path / "solution.py"
    solution.write_text("def rms_norm(x, weight, eps):\n    return x\n")
    bound = bound_patch("cpu-mini__rms_norm", solution, None)
    solution.write_text("def rms_norm(x, weight, eps):\n    return x * 2\n")
    with pytest.raises(ApexUserError, match=f"changed during {during}; nothing was measured"):
        hold([bound], tmp_path, set(), during=during)


def test_a_solution_gone_before_it_is_bound_is_refused():
    with pytest.raises(ApexUserError, match="is gone; nothing was measured"):
        bound_patch("cpu-mini__rms_norm", Path("/nonexistent/solution.py"), None)


def _point_folder() -> dict[str, str]:
    import hashlib

    from apex_core.patcher.points import get_point

    folder = get_point("cpu-mini.rms_norm").target_file().parent
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("unconfined", [False, True])
def test_one_set_is_swapped_for_the_next_inside_the_session_unless_the_code_ran_unconfined(tmp_path, unconfined):
    """Confined, the second set replaces the first inside the session the first began (no new
    snapshot); unconfined, the environment is restored against its snapshot between the two. Either
    way the environment holds exactly the set asked for, and nothing once the holding ends."""
    from apex_core.patcher import status
    from apex_core.tasks import get_task

    repo = Path(__file__).resolve().parents[3]
    canned = bound_patch("cpu-mini__rms_norm", repo / "apex_core" / "agents" / "canned" / "cpu-mini__rms_norm.py", None)
    baseline = bound_patch("cpu-mini__rms_norm", get_task("cpu-mini__rms_norm").baseline_path, None)
    before = _point_folder()
    checked: set[tuple[str, str, str]] = set()
    try:
        hold([canned], tmp_path, checked, unconfined=unconfined)
        first = status()
        hold([baseline], tmp_path, checked, unconfined=unconfined)
        second = status()
        assert [(p.solution, p.state) for p in second.active()] == [(baseline.solution, "applied")]
        assert (second.folder == first.folder) is not unconfined, "one session when confined, a new one when not"
        assert len(checked) == 2, "each set was checked inside the model once"
    finally:
        hold([], tmp_path, checked)
    assert status() is None and _point_folder() == before

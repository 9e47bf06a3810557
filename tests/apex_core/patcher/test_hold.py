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

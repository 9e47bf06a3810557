"""The figures a run records are typed: state files of every past shape still load (a stage not
yet run was once written as {}; a final benchmark had two arms before the control arm), and a
three-arm record that is broken is an error, never silently read as the two-arm kind."""

import json

import pytest
from pydantic import ValidationError

from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.figures import BaselineFigures, FinalFigures, ScoreSummary, TwoArmFinal
from apex_core.pipeline.state import load_run, new_run
from tests.apex_core.pipeline.test_report import three_arm_final


def _rewritten(tmp_path, **fields):
    state = new_run(RunConfig(workload="cpu-mini"), tmp_path / "results")
    path = state.folder / "state.json"
    data = json.loads(path.read_text())
    data.update(fields)
    path.write_text(json.dumps(data))
    return state.folder


def test_a_state_written_before_the_figures_were_typed_loads_with_nothing_measured_yet(tmp_path):
    state = load_run(_rewritten(tmp_path, baseline={}, final={}, summary={}))
    assert state.baseline is None and state.final is None and state.summary is None


def test_a_two_arm_final_of_the_days_before_the_control_arm_reads_as_such(tmp_path):
    folder = _rewritten(tmp_path, final={"median_ratio": 1.19, "interval": [1.057, 1.359], "significant": True,
                                         "original_tokens_per_s": [400.0, 410.0], "patched_tokens_per_s": [480.0, 487.0],
                                         "verdict": "1.190x faster", "patches": [{"task_id": "x"}]})
    final = load_run(folder).final
    assert isinstance(final, TwoArmFinal) and final.median_ratio == 1.19 and final.interval == (1.057, 1.359)


def test_a_three_arm_final_round_trips_through_the_state_file_typed(tmp_path):
    state = new_run(RunConfig(workload="cpu-mini"), tmp_path / "results")
    state.final = three_arm_final(state.folder)
    state.baseline = {"tokens_per_s": 2412.5, "runs": [2400.0, 2412.5, 2420.0], "file": str(state.folder / "benchmark" / "b.json")}
    state.summary = {"model_reward": 0.71, "kernels": [{"task_id": "llama__rms_norm", "integrated": True}]}
    state.save()
    again = load_run(state.folder)
    assert isinstance(again.final, FinalFigures) and again.final.kernel_gain.median == 1.0304 and again.final.workload is None
    assert isinstance(again.baseline, BaselineFigures) and again.baseline.tokens_per_s == 2412.5
    assert isinstance(again.summary, ScoreSummary) and again.summary.kernels[0].integrated


def test_a_broken_three_arm_record_is_an_error_not_a_two_arm_one(tmp_path):
    state = new_run(RunConfig(workload="cpu-mini"), tmp_path / "results")
    broken = three_arm_final(state.folder)
    del broken["credited"]
    with pytest.raises(ValidationError, match="credited"):
        state.final = broken

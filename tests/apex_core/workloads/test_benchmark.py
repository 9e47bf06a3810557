"""benchmark(): runs, medians, the CV gate, the cache and the drift check."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from apex_core.errors import ApexUserError
from apex_core.workloads import get_workload
from apex_core.workloads import runner as module
from apex_core.workloads.results import StepTiming, coefficient_of_variation, merge_steps, percentiles_ms

pytestmark = pytest.mark.site_packages  # runs cpu-mini from transformers, which the group's tests patch


class ScriptedWorkload:
    """Steps whose times are given: prefill 0.1 s and ``decode`` seconds per decode step."""

    def __init__(self, spec, decode_times):
        self.spec = spec
        self.model = None
        self.notes = ["scripted"]
        self.timing_method = "scripted"
        self.decode_times = list(decode_times)
        self.closed = False

    def step(self):
        per_step = self.decode_times.pop(0)
        return StepTiming(prefill_s=0.1, decode_step_s=[per_step] * self.spec.decode_tokens, batch=self.spec.batch,
                          prompt_tokens=self.spec.prompt_tokens, decode_tokens=self.spec.decode_tokens)

    def close(self):
        self.closed = True


@pytest.fixture
def scripted(monkeypatch):
    """Replace the model by scripted steps: the list given is one decode time per step (warm-up first)."""
    made: list[ScriptedWorkload] = []

    def install(decode_times):
        def fake_load(spec):
            workload = ScriptedWorkload(spec, decode_times)
            made.append(workload)
            return workload

        monkeypatch.setattr(module, "load", fake_load)
        return made

    return install


def bench(spec, **options):
    """``benchmark`` as the scripted tests expect it: one warm-up step, one request mix per run."""
    return module.benchmark(spec, **{"warmup": 1, "min_run_s": 0.0, **options})


def test_runs_medians_and_percentiles_from_the_steps(scripted, tmp_path):
    made = scripted([9.0, 0.01, 0.01, 0.01])
    spec = get_workload("cpu-mini")
    result = bench(spec, runs=3, results_dir=tmp_path)
    assert made[0].closed and len(result.runs) == 3
    batch, prompt, decode = spec.batch, spec.prompt_tokens, spec.decode_tokens
    wall = 0.1 + decode * 0.01
    assert result.tokens_per_s == pytest.approx(batch * (prompt + decode) / wall)
    assert result.prefill_tokens_per_s == pytest.approx(batch * prompt / 0.1)
    assert result.decode_tokens_per_s == pytest.approx(batch * decode / (decode * 0.01))
    assert result.latency_ms["decode_step"].p50 == pytest.approx(10.0)
    assert result.cv == pytest.approx(0.0) and not result.cv_gate.exceeded
    stored = json.loads((tmp_path / result.run_id / "benchmark.json").read_text())
    assert stored["workload"]["layers"] == 2 and stored["results_dir"] == str(tmp_path / result.run_id)
    assert {"workload", "runs", "tokens_per_s", "cv", "results_dir"} <= set(stored)


def test_the_cv_gate_flags_runs_that_disagree(scripted, tmp_path):
    scripted([0.01, 0.01, 0.02, 0.01])
    result = bench(get_workload("cpu-mini"), runs=3, results_dir=tmp_path, max_cv=0.05)
    assert result.cv is not None and result.cv > 0.05 and result.cv_gate.exceeded
    scripted([0.01, 0.01, 0.0101, 0.01])
    calm = bench(get_workload("cpu-mini"), runs=3, results_dir=tmp_path / "calm", max_cv=0.05)
    assert not calm.cv_gate.exceeded


def test_a_cached_result_is_reused_within_the_hours_given_and_never_after(scripted, tmp_path):
    made = scripted([0.01] * 3)
    spec = get_workload("cpu-mini")
    first = bench(spec, runs=2, results_dir=tmp_path)
    again = bench(spec, runs=2, results_dir=tmp_path, cache_hours=1)
    assert again.cached and again.run_id == first.run_id and len(made) == 1
    # Older than the window: measured again.
    path = tmp_path / first.run_id / "benchmark.json"
    data = json.loads(path.read_text())
    data["created_at"] = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=3)).isoformat()
    path.write_text(json.dumps(data))
    scripted([0.01] * 3)
    fresh = bench(spec, runs=2, results_dir=tmp_path, cache_hours=1)
    assert not fresh.cached and fresh.run_id != first.run_id
    # Another workload, or another environment, never hits.
    scripted([0.01] * 3)
    other = bench(spec.model_copy(update={"batch": 1}), runs=2, results_dir=tmp_path, cache_hours=10)
    assert not other.cached
    scripted([0.01] * 3)
    patched = bench(spec, runs=2, results_dir=tmp_path, cache_hours=10, environment_extra={"patches": "abc"})
    assert not patched.cached and patched.environment["packages"]["extra:patches"] == "abc"


def test_the_drift_check_compares_with_the_previous_run_of_the_same_workload(scripted, tmp_path):
    scripted([0.01] * 3)
    spec = get_workload("cpu-mini")
    first = bench(spec, runs=2, results_dir=tmp_path)
    assert first.drift is None
    scripted([0.01] * 3)
    same = bench(spec, runs=2, results_dir=tmp_path)
    assert same.drift is not None and same.drift.previous_run_id == first.run_id and not same.drift.flagged
    scripted([0.02] * 3)  # decode twice as slow
    slower = bench(spec, runs=2, results_dir=tmp_path)
    assert slower.drift is not None and slower.drift.previous_run_id == same.run_id
    assert slower.drift.flagged and slower.drift.change < -0.2


def test_bad_options_are_user_errors(tmp_path):
    spec = get_workload("cpu-mini")
    for options in ({"runs": 0}, {"warmup": -1}, {"cache_hours": -1.0}, {"max_cv": 0.0}, {"min_run_s": -1.0}):
        with pytest.raises(ApexUserError):
            module.benchmark(spec, results_dir=tmp_path, **options)
    with pytest.raises(ApexUserError, match="need a GPU"):
        module.benchmark(spec.model_copy(update={"kernels": ("liger",)}), results_dir=tmp_path)
    with pytest.raises(ApexUserError, match="cpu-mini runs on the CPU"):
        module.benchmark(spec.model_copy(update={"device": "cuda"}), results_dir=tmp_path)
    with pytest.raises(ApexUserError, match="no GPU|GPU"):
        module.benchmark(get_workload("llama-3-1-8b-instruct").model_copy(update={"device": "cuda:3"}), results_dir=tmp_path)


def test_statistics_helpers():
    assert coefficient_of_variation([1.0]) is None
    assert coefficient_of_variation([1.0, 1.0, 1.0]) == 0.0
    assert coefficient_of_variation([9.0, 11.0]) == pytest.approx(2 ** 0.5 / 10)
    p = percentiles_ms([0.001 * i for i in range(1, 101)])
    assert p.p50 == pytest.approx(50.5) and p.p99 == pytest.approx(99.01)
    assert percentiles_ms([]).p50 is None


def test_cpu_mini_benchmarks_for_real_through_the_library(tmp_path):
    result = module.benchmark(get_workload("cpu-mini"), runs=2, warmup=1, results_dir=tmp_path)
    assert result.tokens_per_s > 0 and len(result.runs) == 2 and result.timing_method == "wall clock (CPU)"
    assert any("baseline_python.rms_norm" in note for note in result.notes)
    assert result.environment["packages"]["transformers"]


def test_a_short_request_mix_is_repeated_until_a_run_lasts_the_minimum(scripted, tmp_path):
    # Warm-up steps of 0.1 + 8 x 0.0125 = 0.2 s: a 0.5 s run needs three mixes; every run does the same.
    made = scripted([1.0, 0.0125] + [0.0125] * 6)
    spec = get_workload("cpu-mini")
    result = module.benchmark(spec, runs=2, warmup=2, min_run_s=0.5, results_dir=tmp_path)
    assert result.request_mixes_per_run == 3 and [run.request_mixes for run in result.runs] == [3, 3]
    assert not made[0].decode_times, "every scripted step was used: 2 warm-up + 2 runs x 3 mixes"
    run = result.runs[0]
    assert run.wall_s == pytest.approx(0.6) and len(run.decode_step_s) == 3 * spec.decode_tokens
    assert run.tokens_per_s == pytest.approx(3 * spec.batch * (spec.prompt_tokens + spec.decode_tokens) / 0.6)
    assert result.min_run_s == 0.5


def test_mixes_per_run_is_one_without_a_warm_up_or_a_minimum_and_is_bounded():
    assert module.mixes_per_run(None, 0.5) == 1
    assert module.mixes_per_run(0.2, 0.0) == 1
    assert module.mixes_per_run(0.2, 0.5) == 3
    assert module.mixes_per_run(2.0, 0.5) == 1
    assert module.mixes_per_run(1e-9, 0.5) == module.MAX_MIXES_PER_RUN


def test_merged_steps_add_tokens_and_times_and_pool_latencies():
    a = StepTiming(prefill_s=0.1, decode_step_s=[0.01, 0.02], batch=2, prompt_tokens=4, decode_tokens=2)
    b = StepTiming(prefill_s=0.3, decode_step_s=[0.03, 0.04], batch=2, prompt_tokens=4, decode_tokens=2)
    merged = merge_steps([a, b])
    assert merged.prefill_s == pytest.approx(0.4) and merged.decode_time == pytest.approx(0.1)
    assert merged.prompt_token_count == 16 and merged.decode_token_count == 8
    assert merged.decode_step_s == [0.01, 0.02, 0.03, 0.04] and merge_steps([a]) is a
    with pytest.raises(ValueError, match="batch"):
        merge_steps([a, b.model_copy(update={"batch": 3})])

"""``apex benchmark-final`` on cpu-mini: three arms in one session, and only what the kernel earned
is credited. The task's own baseline as the "winner" earns no kernel gain and no throughput term;
our vectorized RMSNorm earns a significant one, reported apart from what the patch point does by
itself; a gain beyond its Amdahl bound is flagged and not rewarded; of two winners each gets its
own leave-one-out credit, and one that prints the worker's messages forges nothing; every patch is
restored afterwards. Loading an arm is most of a minute on this machine (importing torch and
transformers in a confined child), so one measurement is credited under several shares."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from apex_core.errors import ApexUserError
from apex_core.patcher import restore, status
from apex_core.patcher.apply import apply_solutions
from apex_core.pipeline.stages.final.benchmark import FINAL_FILE, MIN_PAIRS, as_first_benchmarked, benchmark_final, credit_rounds
from apex_core.pipeline.stages.final.credit import IMPLAUSIBLE, amdahl_bound, prefix_agreement, ratio_interval
from apex_core.pipeline.stages.final.rounds import Rounds, _audit_round, measure_rounds
from apex_core.tasks import get_task
from apex_core.workloads import get_workload

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[5]
TASK = "cpu-mini__rms_norm"
GOOD = REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py"
BASELINE = get_task(TASK).baseline_path
SHARE = 0.9
"""cpu-mini's norms are most of its time (Python loops): the bound a share like this allows is 20x."""


@pytest.fixture(autouse=True)
def _nothing_stays_patched():
    yield
    restore()  # a failed assertion must not leave the environment patched for the tests after it


def _apply(tmp_path: Path, *pairs: tuple[str, Path]) -> None:
    applied = apply_solutions(list(pairs), tmp_path)
    assert all(a.applied for a in applied), [a.reason for a in applied]


@pytest.fixture(scope="module")
def canned_rounds(tmp_path_factory) -> tuple[Rounds, Path]:
    """Our vectorized RMSNorm against the task's Python-loop baseline, measured once (loading the
    three arms is most of a minute here) and credited under several shares below."""
    folder = tmp_path_factory.mktemp("canned")
    try:
        _apply(folder, (TASK, GOOD))
        rounds = measure_rounds(get_workload("cpu-mini"), 6, folder, warmup=1)
        assert status() is None, "the patches are restored after the final benchmark"
    finally:
        restore()
    return rounds, folder


@pytest.mark.timing
def test_the_task_baseline_as_winner_earns_no_kernel_gain_and_no_throughput_term(tmp_path):
    _apply(tmp_path, (TASK, BASELINE))
    result = benchmark_final(get_workload("cpu-mini"), 6, tmp_path, warmup=1, shares={TASK: SHARE})
    # The same code in two worker processes: no gain to speak of. Not always an interval holding 1.0
    # on this machine: two processes of identical code have differed by 5% in all six rounds here,
    # and six rounds of eager CPU decode on 2 shared cores have spread an interval to 0.85-1.07x and
    # 0.94-1.63x about medians of 0.99x and 1.00x (2026-12-04, CI runs; docs/patching.md, "Not yet").
    # A CI run under load gave rounds of 0.72-1.30x about a median of 0.89x (2026-12-05). So the test
    # asks what the issue asks: an interval that holds 1.0, or else a median near it, and in either
    # case a throughput term of about 0 (a baseline that earned 1.3x would fail both).
    low, high = result.kernel_gain.interval
    assert low <= 1.0 <= high or 0.9 < result.kernel_gain.median < 1.1, result.verdict
    assert abs(result.throughput_term) < 0.1, result.kernel_gain
    assert result.kernel_gain.significant or result.throughput_term == 0.0  # noise earns nothing, either way
    assert set(result.tokens_per_s) == {"original", "control", "candidate"}
    assert result.token_agreement == 1.0  # the same code on the same seeds: the same greedy tokens
    assert result.token_audit == {"control": 1.0, "candidate": 1.0}  # every token the unpatched model's own choice
    assert status() is None, "the patches are restored after the final benchmark"


def test_a_faster_kernel_earns_a_significant_kernel_gain_reported_apart_from_the_integration_gain(canned_rounds):
    rounds, folder = canned_rounds
    result = credit_rounds(rounds, {TASK: SHARE}, folder)
    # Significant, and large at the median: with six rounds the interval's lower end is the worst
    # round, which one round taken while a loaded machine stalled the candidate once put at 1.28x
    # (rounds of 2.58, 2.66, 1.28, 2.59, 2.66, 2.19; a fresh-clone run of 2026-12-05).
    assert result.kernel_gain.significant and result.kernel_gain.median > 1.5, result.verdict
    assert result.credited and not result.flags and result.throughput_term > 0.5
    (credit,) = result.credits
    assert credit.task_id == TASK and credit.gain == result.kernel_gain and credit.arm_share >= SHARE and credit.bound == pytest.approx(amdahl_bound(credit.arm_share))
    # cpu-mini's point calls the task's entry point just as the original does: the adapter gains
    # nothing. That holds where the machine held its speed; a run whose original arm drifted (a
    # fresh-clone CI run of 2026-12-05: drift 0.49, CV 28%, integration 0.77x) is flagged as such by
    # the report, and its integration figure says nothing about the adapter.
    assert result.integration_gain.ratios and "integration gain" in result.verdict
    if not result.drift_flagged:
        assert not result.integration_gain.significant or abs(result.integration_gain.median - 1) < 0.2, result.integration_gain
    assert result.verdict.startswith("kernel gain") and "integration gain" in result.verdict
    assert result.token_agreement == 1.0 and result.runs == 6
    assert rounds.audits == {"control": [1.0] * 6, "candidate": [1.0] * 6} and result.token_audit == {"control": 1.0, "candidate": 1.0}
    stored = json.loads((Path(result.results_dir) / FINAL_FILE).read_text())
    assert stored["patches"][0]["task_id"] == TASK and stored["control"][0]["solution"] == str(BASELINE)
    assert result.model_reward is None and "no confined grading signed here" in result.reward_note  # none was graded


def test_a_gain_beyond_the_kernels_amdahl_bound_is_flagged_and_earns_no_throughput_term(canned_rounds):
    rounds, folder = canned_rounds
    result = credit_rounds(rounds, {TASK: 0.01}, folder)  # a 1% share cannot make the model 3x faster
    (credit,) = result.credits
    assert credit.implausible and credit.gain.median > credit.bound
    assert not result.credited and result.flags and result.flags[0].startswith(IMPLAUSIBLE)
    assert result.throughput_term == 0.0 and "FLAGGED implausible_e2e" in result.verdict


def test_without_a_profiled_share_the_gain_is_reported_but_not_credited(canned_rounds):
    rounds, folder = canned_rounds
    result = credit_rounds(rounds, {}, folder)
    assert result.bound is None and result.credits[0].bound is None and not result.credited
    assert result.kernel_gain.median > 1.5 and result.throughput_term == 0.0


def test_tokens_the_unpatched_model_would_not_choose_in_one_round_are_flagged_and_not_credited(canned_rounds):
    rounds, folder = canned_rounds
    # a worker that skipped the work in one round of six: half its tokens were not the model's
    skipped = rounds.model_copy(update={"audits": {**rounds.audits, "candidate": [1.0] * (rounds.runs - 1) + [0.5]}})
    result = credit_rounds(skipped, {TASK: SHARE}, folder)
    assert not result.credited and result.flags[0].startswith("tokens_diverge") and result.throughput_term == 0.0
    assert result.token_audit["candidate"] == 0.5 and "50.0% of the candidate arm's greedy tokens" in result.flags[0]


def test_tokens_that_part_from_the_controls_at_near_ties_are_credited_when_the_audit_passes(canned_rounds):
    """The H200's Llama references (2026-12-05): 18% common prefix with the control's tokens, random
    weights parting at near-ties; every token the model's own choice at its context."""
    rounds, folder = canned_rounds
    parted = rounds.model_copy(update={"agreements": [0.18] * rounds.runs})
    result = credit_rounds(parted, {TASK: SHARE}, folder)
    assert result.credited and not result.flags and result.token_agreement == 0.18 and result.throughput_term > 0.5


SLOW_SILU_AND_MUL = '''
import sys
import time

import numpy as np

# The messages a worker once answered on its stdout, printed ahead of every call (issue 28: one
# forged 13,000x and a model reward in the thousands).
for line in ("ready", "done", "done", "done"):
    print(line, flush=True)
sys.stdout.write('{"ok": true, "tokens": []}\\n')


def silu_and_mul(x):
    print('{"ok": true, "tokens": []}', flush=True)
    time.sleep(0.005)  # correct, and ten times slower than the baseline at cpu-mini's sizes
    x32 = np.asarray(x, dtype=np.float32)
    half = x32.shape[-1] // 2
    return (x32[:, :half] / (1.0 + np.exp(-x32[:, :half])) * x32[:, half:]).astype(np.float32)
'''


def test_leave_one_out_credits_each_of_two_winners_with_its_own_share_of_the_gain(tmp_path):
    """A fast norm and a deliberately slow activation together make the model faster; the credit
    goes to the norm, and the activation's credit is below 1.0: it cost the model time, however
    loudly it printed the worker's messages."""
    slow = tmp_path / "slow_silu_and_mul.py"
    slow.write_text(SLOW_SILU_AND_MUL)
    _apply(tmp_path, (TASK, GOOD), ("cpu-mini__silu_and_mul", slow))
    result = benchmark_final(get_workload("cpu-mini"), 6, tmp_path, warmup=1,
                             shares={TASK: SHARE, "cpu-mini__silu_and_mul": 0.08})
    assert set(result.tokens_per_s) == {"original", "control", "candidate", f"without:{TASK}", "without:cpu-mini__silu_and_mul"}
    norm, activation = (next(c for c in result.credits if c.task_id == t) for t in (TASK, "cpu-mini__silu_and_mul"))
    assert norm.gain.significant and norm.gain.median > 1.5, norm.gain  # the median: one stalled round moves the lower end
    assert activation.gain.significant and activation.gain.interval[1] < 1.0, activation.gain
    # (the two together: whichever weighs more on this machine at this moment; not what is tested here)
    assert not norm.implausible and result.token_agreement == 1.0
    assert set(result.token_audit) == set(result.tokens_per_s) - {"original"} and set(result.token_audit.values()) == {1.0}
    # the activation's baseline is a larger share of the arm it is measured against (whose norm runs fast) than of the original
    assert activation.arm_share > 0.08 and not activation.implausible
    assert status() is None


def test_a_final_benchmark_killed_between_arms_leaves_no_patch_once_the_next_command_runs(tmp_path):
    """The arms are the benchmark's own patches (owner: its process): kill -9 it while it loads the
    candidate arm, and the next apex command rolls back whatever it held (issue 28, class 5)."""
    import os
    import signal
    import subprocess
    import sys

    from apex_core.patcher import recover

    _apply(tmp_path, (TASK, GOOD))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    with open(tmp_path / "stderr.txt", "w+b") as stderr:
        final = subprocess.Popen([sys.executable, "-m", "apex_core.cli.main", "benchmark-final", "--workload", "cpu-mini",
                                  "--runs", "2", "--results-dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=stderr,
                                 env=env, cwd=tmp_path)
        try:
            deadline = time.monotonic() + 240
            while b"loading the candidate arm" not in (tmp_path / "stderr.txt").read_bytes():
                assert final.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr.txt").read_text()[-2000:]
                time.sleep(0.05)
        finally:
            final.send_signal(signal.SIGKILL)
            final.wait()
    left = status()  # what the killed benchmark held: the control's baseline, or the candidate's winner
    assert left is not None and all(p.owner is not None and p.owner.pid == final.pid for p in left.active())
    recover()  # what every apex command does first
    journal = status()
    assert journal is None or not journal.active()


def test_nothing_patched_is_a_one_line_error():
    with pytest.raises(ApexUserError, match="nothing is patched"):
        benchmark_final(get_workload("cpu-mini"), 3, Path("unused"))


def test_the_amdahl_bound_grows_with_the_share_and_is_never_infinite():
    assert amdahl_bound(0.0) == pytest.approx(1 / 0.99)
    assert amdahl_bound(0.5) == pytest.approx(1 / (1 - 0.635))
    assert amdahl_bound(1.0) == pytest.approx(20.0) and amdahl_bound(None) is None


def test_token_agreement_is_the_common_prefix_and_a_worker_that_skipped_the_work_shares_none():
    trusted = [[5, 6, 7, 8], [1, 2, 3, 4]]
    assert prefix_agreement(trusted, trusted) == 1.0
    assert prefix_agreement([[5, 6, 0, 0], [1, 2, 3, 4]], trusted) == pytest.approx((0.5 + 1.0) / 2)
    assert prefix_agreement([[0, 0, 0, 0], [0, 0, 0, 0]], trusted) == 0.0
    assert prefix_agreement([], trusted) is None


def test_an_arm_answering_no_tokens_or_rows_of_another_shape_fails_the_audit_without_it_being_asked():
    class NeverAsked:
        def audit(self, seed, rows):
            raise AssertionError("the original arm was asked to audit rows that cannot be the model's")

    generated = {"original": [[1, 2, 3], [4, 5, 6]], "control": [], "candidate": [[1, 2, 3]]}
    assert _audit_round(NeverAsked(), 7, generated, 1e-4) == {"control": 0.0, "candidate": 0.0}
    assert _audit_round(NeverAsked(), 7, {"original": [], "candidate": []}, 1e-4) == {}  # a server: no tokens anywhere


def test_two_rounds_that_disagree_are_no_significant_change_however_far_below_one_both_are():
    """Qwen3.5 on the H200 (2026-12-02): a bootstrap of the median called these "slower by 7.2%"."""
    low, high, confidence, method = ratio_interval([0.96084, 0.89465])
    assert method == "t on log ratios" and low < 1.0 < high and confidence == 0.95


def test_six_rounds_or_more_take_the_distribution_free_interval_of_the_median():
    ratios = [1.31, 1.29, 1.33, 1.30, 1.32, 2.90]  # one disturbed round: it is an end of 6, not of 9
    assert ratio_interval(ratios)[3] == "order statistics" and ratio_interval(ratios)[:2] == (1.29, 2.90)
    assert ratio_interval(ratios + [1.31, 1.30, 1.32])[:2] == (1.30, 1.33)


def test_the_final_benchmark_takes_at_least_six_rounds_unless_told_otherwise(tmp_path):
    assert MIN_PAIRS == 6
    assert as_first_benchmarked("cpu-mini", tmp_path, None)[1] == 6
    assert as_first_benchmarked("cpu-mini", tmp_path, 2)[1] == 2


def test_without_a_benchmark_the_final_benchmark_measures_the_workload_as_last_profiled(tmp_path):
    """A user who profiles, identifies and patches without 'apex benchmark' gets the depth the shares
    came from (an H200 run, 2026-12-04, measured the catalogue's 2 layers against an 8-layer profile)."""
    from apex_core.workloads.runner import PROFILED_WORKLOAD_FILE
    from apex_core.workloads.spec import customize

    profiled = customize(get_workload("cpu-mini"), layers=3, graphs=False)  # a profile decodes eagerly
    assert profiled.layers != get_workload("cpu-mini").layers
    run = tmp_path / "profile" / "20261204-000000-ab12"
    run.mkdir(parents=True)
    (run / PROFILED_WORKLOAD_FILE).write_text(profiled.model_dump_json())
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / PROFILED_WORKLOAD_FILE).write_text(customize(get_workload("llama-3-1-8b-instruct"), layers=4).model_dump_json())
    spec, rounds = as_first_benchmarked("cpu-mini", tmp_path, None)
    assert spec == profiled.model_copy(update={"graphs": None}) and rounds == MIN_PAIRS  # the profiler's eager is not the workload's
    assert as_first_benchmarked("llama-3-1-8b-instruct", tmp_path, None)[0].layers == 4

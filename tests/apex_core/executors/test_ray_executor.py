"""The Ray executor on a real local Ray cluster on the CPU, grading the CPU task: the same verdicts
as the local executor, a killed actor's grading retried elsewhere and answered once, verdicts
shared through the driver's and the nodes' caches only between identical environments, targets no
node has refused at submit, back-pressure, and ``apex grade``/the pipeline going through it.

One Ray cluster serves the whole module (starting one takes seconds); each test that needs actors
of its own starts and closes them."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'apex-kernels[ray]')")

from apex_core.errors import ApexUserError  # noqa: E402
from apex_core.executors import GradingRequest, SolutionContent  # noqa: E402
from apex_core.executors.local import LocalExecutor  # noqa: E402
from apex_core.executors.ray_executor import RayExecutor  # noqa: E402
from apex_core.grader.cache import GradeCache  # noqa: E402
from apex_core.grader.options import GradeOptions  # noqa: E402
from apex_core.grader.result import Outcome  # noqa: E402
from apex_core.grader.service import cache_key  # noqa: E402
from apex_core.tasks import get_task  # noqa: E402

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
GOOD = (REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py").read_bytes()
WRONG = b"import numpy as np\n\ndef rms_norm(x, weight, eps):\n    return x.copy()\n"
BROKEN = b"def rms_norm(x, weight, eps)\n    return x\n"
CRASHING = b"import os\n\ndef rms_norm(x, weight, eps):\n    os._exit(3)\n"
FAST = GradeOptions(time_budget_s=0.2, timeout_s=60)
QUICK = FAST.model_copy(update={"timing": False})


def request(content: bytes, options: GradeOptions = FAST, **fields: object) -> GradingRequest:
    return GradingRequest(task_id=TASK, solution=SolutionContent(name="solution.py", content=content), options=options, **fields)


def unique(content: bytes, tag: str) -> bytes:
    """The same solution with a different hash, so that no earlier test's cache entry answers it."""
    return content + f"\n# {tag} {time.time_ns()}\n".encode()


def without_secret_seed(reason: str) -> str:
    """A reason up to the secret seed, which every grading draws afresh (and the numbers that follow from it)."""
    return re.sub(r", seed \d+.*", "", reason)


def kill_the_actor_grading(executor: RayExecutor, grading_id: str) -> str:
    """Kill the actor that has the grading in flight, as soon as it has it; its name."""
    deadline = time.monotonic() + 30
    while (victim := executor.where(grading_id)) is None:
        assert time.monotonic() < deadline, "the grading never started"
        time.sleep(0.01)
    ray.kill(executor.actor_handle(victim))
    return victim


@pytest.fixture(scope="module")
def cluster():
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    # No GPUs even on a GPU machine: the CPU actors and the CPU task are what this module tests.
    ray.init(num_cpus=8, num_gpus=0, include_dashboard=False, _temp_dir=temp, log_to_driver=False, namespace="apex-tests",
             logging_level=logging.WARNING)
    yield
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def caches(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("ray-caches")
    return root / "driver", root / "node"


@pytest.fixture(scope="module")
def executor(cluster, caches):
    driver, node = caches
    made = RayExecutor(cache=GradeCache(driver), cpu_actors_per_node=2, node_cache_dir=str(node), max_in_flight=2)
    yield made
    made.close()


def test_the_cluster_is_graded_by_one_actor_per_cpu_slot_each_reporting_its_environment(executor):
    actors = executor.actors()
    assert len(actors) == 2 and all(a.arch is None and a.gpu is None for a in actors)
    assert len({a.node for a in actors}) == 1 and len({a.pid for a in actors}) == 2
    assert executor.cluster_summary() == "2 x CPU actor on 1 node(s)"
    # Ray caps every worker at OMP_NUM_THREADS=1; the judge's processes get the driver's setting instead
    assert all(a.omp_num_threads == os.environ.get("OMP_NUM_THREADS") for a in actors)


def test_the_ray_executor_gives_the_same_verdicts_as_the_local_executor(executor, tmp_path):
    contents = {"good": unique(GOOD, "same"), "wrong": WRONG, "broken": BROKEN, "crashing": CRASHING}
    sent = {name: executor.submit(request(body, use_cache=False)) for name, body in contents.items()}
    with LocalExecutor(cache=GradeCache(tmp_path)) as local:  # meanwhile, here
        here = {name: local.grade(request(body, use_cache=False)) for name, body in contents.items()}
    there = {name: future.result() for name, future in sent.items()}
    assert {n: g.result.outcome for n, g in there.items()} == {
        "good": Outcome.ok, "wrong": Outcome.wrong_answer, "broken": Outcome.compile_error, "crashing": Outcome.crash}
    for name in contents:
        mine, theirs = here[name].result, there[name].result
        assert (theirs.outcome, theirs.compiled, theirs.correct) == (mine.outcome, mine.compiled, mine.correct)
        assert without_secret_seed(theirs.reason) == without_secret_seed(mine.reason)
        assert theirs.provenance.environment_key == mine.provenance.environment_key  # one machine: one fingerprint
    good = there["good"]
    assert good.result.speedup > 1 and good.result.timings and not good.result.cached
    names = {a.name: a for a in executor.actors()}
    assert good.placement.executor == "ray" and good.placement.attempts == 1 and good.placement.actor in names
    assert good.placement.node == names[good.placement.actor].node
    assert good.result.provenance.environment_key == names[good.placement.actor].cpu_environment_key


def test_grade_many_answers_as_gradings_finish_and_draws_requests_only_while_there_is_room(executor):
    drawn, answered = [], []

    def requests():
        for number in range(4):
            drawn.append(number)
            assert len(drawn) - len(answered) <= executor.max_in_flight + 1  # the one being submitted
            yield request(unique(WRONG, f"many {number}"), QUICK)

    for graded in executor.grade_many(requests()):
        answered.append(graded.grading_id)
        assert graded.result.outcome is Outcome.wrong_answer
    assert len(answered) == len(set(answered)) == 4


def test_a_grading_id_submitted_twice_is_graded_once(executor):
    once = request(unique(WRONG, "twice"), QUICK)
    first, second = executor.submit(once), executor.submit(once)
    assert first is second and first.result().result.outcome is Outcome.wrong_answer


def test_a_killed_actor_mid_grading_is_retried_on_another_and_answered_once(cluster, tmp_path):
    with RayExecutor(cache=GradeCache(tmp_path), cpu_actors_per_node=2, actor_cpus=1, node_cache_dir=str(tmp_path / "node")) as own:
        wanted = request(unique(GOOD, "killed"), QUICK)
        future = own.submit(wanted)
        victim = kill_the_actor_grading(own, wanted.grading_id)
        graded = future.result(timeout=120)
        assert graded.result.outcome is Outcome.ok and graded.result.correct
        assert graded.placement.attempts == 2 and graded.placement.actor != victim
        assert [a.name for a in own.actors()] == [graded.placement.actor]
        assert own.submit(wanted) is future  # the same id again: no second grading
        stats = own.stats
        assert (stats.graded, stats.retried, stats.infra_errors, stats.duplicates_dropped) == (1, 1, 0, 0)


def test_a_grading_whose_every_actor_died_is_an_infra_error_never_a_verdict(cluster, tmp_path):
    with RayExecutor(cache=GradeCache(tmp_path), cpu_actors_per_node=1, node_cache_dir=str(tmp_path / "node")) as own:
        wanted = request(unique(GOOD, "orphan"), QUICK)
        future = own.submit(wanted)
        victim = kill_the_actor_grading(own, wanted.grading_id)
        result = future.result(timeout=60).result
        assert result.outcome is Outcome.infra_error and result.rl_reward is None and result.score.total == 0
        assert "not the solution's" in result.reason and victim in result.reason
        assert GradeCache(tmp_path).get(cache_key(get_task(TASK).content_hash(), wanted.solution.sha256,
                                                  result.provenance.environment_key, QUICK)) is None


def test_a_verdict_is_shared_with_a_fresh_driver_and_through_a_nodes_cache(executor, caches, tmp_path):
    driver, node = caches
    body = unique(GOOD, "shared")
    first = executor.grade(request(body, QUICK))
    assert first.placement.attempts == 1 and not first.result.cached
    with RayExecutor(cache=GradeCache(driver), cpu_actors_per_node=1, node_cache_dir=str(node)) as fresh:
        again = fresh.grade(request(body, QUICK))
        assert again.placement.node == "cache" and again.result.cached and fresh.stats.graded == 0
        assert again.result.outcome is first.result.outcome and again.result.checks == first.result.checks
    with RayExecutor(cache=GradeCache(tmp_path / "new-driver"), cpu_actors_per_node=1, node_cache_dir=str(node)) as other:
        from_node = other.grade(request(body, QUICK))
        assert from_node.placement.attempts == 1 and from_node.result.cached, from_node.result.reason  # found in its node's cache
        assert from_node.result.outcome is first.result.outcome


def test_a_verdict_measured_on_another_environment_is_not_used(executor, caches):
    driver, _ = caches
    body = unique(GOOD, "elsewhere")
    sent = request(body, QUICK)
    # What a node with another fingerprint (another CPU, driver or library version) left in the shared cache:
    foreign = executor.grade(request(WRONG, QUICK)).result.model_copy(update={"reason": "measured elsewhere"})
    GradeCache(driver).put(cache_key(get_task(TASK).content_hash(), sent.solution.sha256, "0" * 16, QUICK), foreign)
    graded = executor.grade(sent)
    assert graded.placement.attempts == 1 and graded.result.outcome is Outcome.ok


def test_a_target_no_node_has_fails_at_submit_naming_what_the_cluster_has(executor):
    gpu_task = "llama-3-1-8b-instruct__rms_norm"
    solution = SolutionContent(name="solution.py", content=b"def rms_norm(x, weight, eps):\n    return x\n")
    for target, arch in (("sm_90", "sm_90"), ("h200", "sm_90"), ("gfx950", "gfx950")):
        with pytest.raises(ApexUserError, match=f"no node of the Ray cluster has a {arch} GPU .* the cluster has: 2 x CPU actor"):
            executor.submit(GradingRequest(task_id=gpu_task, solution=solution, target=target))
    with pytest.raises(ApexUserError, match="leave --device out"):
        executor.submit(request(GOOD, FAST.model_copy(update={"device": "cpu"})))
    with pytest.raises(ApexUserError, match="must be a .py file"):
        executor.submit(GradingRequest(task_id=TASK, solution=SolutionContent(name="solution.cu", content=GOOD)))
    assert executor.stats.submitted == executor.stats.answered_from_cache + executor.stats.graded + executor.stats.infra_errors


def test_apex_grade_with_the_ray_executor_says_where_each_solution_was_graded(cluster, tmp_path):
    from typer.testing import CliRunner

    from apex_core.cli.main import app

    solution = tmp_path / "solution.py"
    solution.write_bytes(unique(WRONG, "cli"))
    done = CliRunner().invoke(app, ["grade", "--task", TASK, "--solution", str(solution), "--no-timing", "--executor", "ray", "--json"])
    assert done.exit_code == 0, done.output
    (graded,) = json.loads(done.stdout)
    assert graded["outcome"] == "wrong_answer" and graded["solution_path"] == str(solution.resolve())
    assert graded["placement"]["executor"] == "ray" and graded["placement"]["attempts"] == 1


def test_the_pipeline_grades_through_the_ray_executor(cluster, tmp_path):
    from apex_core.pipeline.config import RunConfig
    from apex_core.pipeline.runner import run_pipeline

    config = RunConfig(workload=TASK, tasks=(TASK,), iterations=1, leaderboard=False, executor="ray")
    state = run_pipeline(config, tmp_path, only=("identify", "optimize", "grade"))
    kernel = state.kernel(TASK)
    assert kernel.iterations[0].grade.outcome == "ok" and kernel.final.outcome == "ok"
    assert ray.is_initialized()  # the module's cluster: joined by the pipeline, not shut down by it

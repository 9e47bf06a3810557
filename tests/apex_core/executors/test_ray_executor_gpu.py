"""The Ray executor on this machine's GPUs (runs on a GPU): one actor per GPU, each on its own GPU
with the arch the devices module reports, placement by target, and the verdicts of the local
executor for an honest and a cheating Triton solution."""

from __future__ import annotations

import importlib.util
import logging
import shutil
import tempfile
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'apex-kernels[ray]')")

from apex_core.errors import ApexUserError  # noqa: E402
from apex_core.executors import GradingRequest, SolutionContent  # noqa: E402
from apex_core.executors.local import LocalExecutor  # noqa: E402
from apex_core.executors.ray_executor import RayExecutor  # noqa: E402
from apex_core.grader.cache import GradeCache  # noqa: E402
from apex_core.grader.fingerprint import detected_device  # noqa: E402
from apex_core.grader.options import GradeOptions  # noqa: E402
from apex_core.grader.result import Outcome  # noqa: E402

pytestmark = pytest.mark.gpu

_spec = importlib.util.spec_from_file_location(
    "red_team_gpu_solutions", Path(__file__).resolve().parents[1] / "grader" / "red_team_gpu_solutions.py")
solutions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(solutions)
TASK = "llama-3-1-8b-instruct__rms_norm"
OPTIONS = GradeOptions(time_budget_s=0.5, timeout_s=120)


@pytest.fixture(scope="module")
def on_gpus(tmp_path_factory):
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    ray.init(include_dashboard=False, _temp_dir=temp, log_to_driver=False, namespace="apex-tests", logging_level=logging.WARNING)
    root = tmp_path_factory.mktemp("ray-gpu-caches")
    made = RayExecutor(cache=GradeCache(root / "driver"), node_cache_dir=str(root / "node"))
    yield made
    made.close()
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


def content(name: str, tmp_path: Path) -> SolutionContent:
    return SolutionContent.from_path(solutions.write_solution(name, tmp_path))


def test_each_gpu_gets_one_actor_that_sees_it_alone_with_the_arch_found_here(on_gpus):
    import torch

    actors = on_gpus.actors()
    assert len(actors) == torch.cuda.device_count()
    assert {a.arch for a in actors} == {detected_device().arch} and all(a.gpu for a in actors)


def test_a_gpu_task_graded_on_ray_gets_the_local_verdict_and_says_where(on_gpus, tmp_path):
    arch = detected_device().arch
    for name, outcome in (("honest_faster", Outcome.ok), ("event_patch", Outcome.tampering)):
        sent = GradingRequest(task_id=TASK, solution=content(name, tmp_path), options=OPTIONS, use_cache=False, target=arch)
        there = on_gpus.grade(sent)
        with LocalExecutor(cache=GradeCache(tmp_path / "local")) as local:
            here = local.grade(sent.model_copy(update={"grading_id": sent.grading_id + "-local", "target": None}))
        assert there.result.outcome is here.result.outcome is outcome, (there.result.reason, here.result.reason)
        assert "-gpu" in there.placement.actor and there.placement.attempts == 1
        assert there.result.provenance.environment.arch == arch


def test_a_target_of_another_arch_is_refused_at_submit(on_gpus, tmp_path):
    other = "gfx950" if detected_device().arch != "gfx950" else "sm_90"
    with pytest.raises(ApexUserError, match=f"no node of the Ray cluster has a {other} GPU"):
        on_gpus.submit(GradingRequest(task_id=TASK, solution=content("honest_faster", tmp_path), target=other))

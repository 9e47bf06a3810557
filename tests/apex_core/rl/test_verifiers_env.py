"""The ``apex-kernels`` verifiers environment: ``vf.load_environment`` finds it by name, its
rubric (Apex's grader) scores a rollout's last fenced solution with the grader's RL reward, and
the multi-turn variant offers the episode's tools with the rollout's task filled in."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from apex_core.executors import make_executor
from apex_core.score import RL_REWARD_FOR_OUTCOME

vf = pytest.importorskip("verifiers", reason="the verifiers extra is not installed (pip install -e '.[verifiers]')")

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
CANNED = (REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py").read_text()
WRONG = "def rms_norm(x, weight, eps):\n    return x.copy()\n"


@pytest.fixture(scope="module")
def local():
    with make_executor("local") as executor:
        yield executor


def _scored(env, code: str) -> float:
    row = env.dataset[0]
    state = vf.State(prompt=[{"role": "user", "content": row["question"]}], answer="", info=row["info"], task=row["task"],
                     completion=[{"role": "assistant", "content": f"My kernel:\n```python\n{code}```"}])
    asyncio.run(env.rubric.score_rollout(state))
    return state["reward"]


def test_the_single_turn_environment_loads_by_name_and_its_rubric_is_the_grader(local):
    env = vf.load_environment("apex-kernels", task_ids=[TASK], executor=local, timing=False)
    assert isinstance(env, vf.SingleTurnEnv) and len(env.dataset) == 1
    assert "```python" in env.dataset[0]["question"] and "GPU kernel engineer" in env.system_prompt
    assert _scored(env, CANNED) == 0.5  # correct, untimed: the reward at parity
    assert _scored(env, WRONG) == RL_REWARD_FOR_OUTCOME["wrong_answer"]


def test_the_multi_turn_environment_offers_the_episode_tools_for_the_rollouts_task(local):
    env = vf.load_environment("apex-kernels", task_ids=[TASK], executor=local, timing=False, multi_turn=True, max_turns=4)
    assert isinstance(env, vf.StatefulToolEnv)
    assert {tool.name for tool in env.tool_defs} == {"find_kernel", "read_source", "grep_source", "search_docs", "check", "benchmark"}
    assert all("task_id" not in tool.parameters["properties"] for tool in env.tool_defs), "the model never names the task"
    arguments = env.update_tool_args("check", {"code": WRONG}, [], {"info": {"task_id": TASK}})
    assert "outcome: wrong_answer" in env.tool_map["check"](**arguments)
    assert _scored(env, CANNED) == 0.5

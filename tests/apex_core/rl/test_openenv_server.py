"""``apex env serve`` as an OpenEnv user starts it, driven by OpenEnv's own client over its
WebSocket: a reset poses cpu-mini's RMSNorm, a tool call answers with no reward, a correct
submission earns the grader's RL reward and a wrong one the wrong-answer reward; the protocol's
health and schema endpoints answer; a bad action is an observation, not a dropped session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from apex_core.score import RL_REWARD_FOR_OUTCOME
from tests.conftest import free_port

pytest.importorskip("openenv", reason="the openenv extra is not installed (pip install -e '.[openenv]')")

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
CANNED = (REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py").read_text()
WRONG = "def rms_norm(x, weight, eps):\n    return x.copy()\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = free_port()
    record = tmp_path_factory.mktemp("episodes")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    process = subprocess.Popen([sys.executable, "-m", "apex_core.cli.main", "env", "serve", "--port", str(port), "--tasks", TASK,
                                "--record-dir", str(record)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
                if json.loads(reply.read())["status"] == "healthy":
                    break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"apex env serve did not come up: {process.stdout.read()[-2000:]}")
            time.sleep(0.2)  # polling the server's start, not waiting out a fixed time
    yield url, record
    process.terminate()
    process.wait(timeout=30)


def test_the_protocols_schema_describes_apexs_actions_and_observations(server):
    url, _ = server
    with urllib.request.urlopen(f"{url}/schema", timeout=10) as reply:
        schema = json.loads(reply.read())
    assert {"kind", "tool", "arguments", "code"} <= set(schema["action"]["properties"])
    assert {"text", "task_id", "turns_left", "grade"} <= set(schema["observation"]["properties"])


def test_an_openenv_client_resets_calls_a_tool_and_submits_for_the_graders_reward(server):
    from openenv.core import GenericEnvClient

    url, record = server
    with GenericEnvClient(base_url=url, message_timeout_s=300).sync() as env:
        posed = env.reset(task_id=TASK)
        assert posed.observation["task_id"] == TASK and not posed.done and "rms_norm" in posed.observation["text"]
        found = env.step({"kind": "tool", "tool": "grep_source", "arguments": {"pattern": "class LlamaRMSNorm", "package": "transformers"}})
        assert found.reward == 0.0 and not found.done and "LlamaRMSNorm" in found.observation["text"]
        refused = env.step({"kind": "submit"})
        assert refused.reward == 0.0 and "needs its code" in refused.observation["error"]
        solved = env.step({"kind": "submit", "code": CANNED})
        assert solved.done and solved.observation["grade"]["outcome"] == "ok" and solved.reward > 0.5, solved.observation["text"]
        env.reset(task_id=TASK)
        wrong = env.step({"kind": "submit", "code": WRONG})
        assert wrong.done and wrong.reward == RL_REWARD_FOR_OUTCOME["wrong_answer"]
    assert len(list(record.rglob("trajectories/*.json"))) == 2, "each episode is kept as a trajectory"

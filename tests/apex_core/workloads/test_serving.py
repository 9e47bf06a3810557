"""The vLLM and SGLang adapters on recorded outputs (no server of either runs here)."""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
from pathlib import Path

import pytest

from apex_core.errors import ApexUserError
from apex_core.models import MODELS
from apex_core.workloads import customize, get_workload, serving
from apex_core.workloads.families import FAMILIES
from apex_core.workloads.results import RunResult

DATA = Path(__file__).parent / "data"


def _events(name: str, gap: float = 0.01, first: float = 0.05) -> list[tuple[float, str]]:
    """The recorded stream's lines with arrival times: the first token after ``first`` s, then
    one event every ``gap`` s (blank lines arrive with the event before them)."""
    events, now = [], first
    for line in (DATA / name).read_text().splitlines():
        if line.startswith("data:"):
            events.append((now, line))
            now += gap
        else:
            events.append((now - gap, line))
    return events


@pytest.mark.parametrize("name", ["vllm_completions_stream.txt", "sglang_completions_stream.txt"])
def test_a_recorded_stream_parses_into_ttft_gaps_and_tokens(name):
    trace = serving.parse_stream(_events(name), sent_at=0.0)
    assert trace.ttft_s == pytest.approx(0.05)
    assert trace.completion_tokens == 5
    assert trace.itl_s == pytest.approx([0.01] * 4)


def test_a_stream_without_usage_counts_its_token_events_and_an_error_event_raises():
    lines = [(t, line) for t, line in _events("vllm_completions_stream.txt") if '"usage":{' not in line]
    assert serving.parse_stream(lines, 0.0).completion_tokens == 5
    with pytest.raises(RuntimeError, match="out of memory"):
        serving.parse_stream([(0.1, 'data: {"error": {"message": "CUDA out of memory", "code": 500}}')], 0.0)
    with pytest.raises(RuntimeError, match="without a token"):
        serving.parse_stream([(0.1, "data: [DONE]")], 0.0)


def test_concurrent_requests_become_one_step_of_the_common_result_model():
    spec = customize(get_workload("llama-3-1-8b-instruct-vllm"), batch=2, prompt_tokens=16, decode_tokens=4)
    traces = [serving.parse_stream(_events("vllm_completions_stream.txt", first=f), 0.0) for f in (0.05, 0.08)]
    step = serving.step_from_traces(spec, traces, wall_s=0.13)
    assert step.prefill_s == pytest.approx(0.08) and step.generated_tokens == 8 and len(step.decode_step_s) == 8
    run = RunResult.from_step(0, step)
    assert run.tokens_per_s == pytest.approx((2 * 16 + 8) / 0.13)
    assert run.decode_tokens_per_s == pytest.approx(8 / 0.05)
    assert run.decode_step_ms.p50 == pytest.approx(10.0)


@pytest.mark.parametrize("name", ["vllm_bench_serve.txt", "vllm_bench_serve_result.json", "sglang_bench_serving.txt",
                                  "sglang_bench_serving.jsonl"])
def test_their_benchmark_tools_outputs_parse_into_a_run(name):
    run = serving.parse_bench_output((DATA / name).read_text())
    assert run.tokens_per_s > run.decode_tokens_per_s > 0 and run.prefill_s > 0
    assert run.decode_step_ms.p50 is not None and run.decode_step_ms.p99 is not None
    if name == "vllm_bench_serve.txt":
        assert run.tokens_per_s == pytest.approx(4432.90) and run.decode_tokens_per_s == pytest.approx(886.58)
        assert run.prefill_s == pytest.approx(0.03812) and run.wall_s == pytest.approx(9.24)
    if name == "vllm_bench_serve_result.json":
        assert len(run.decode_step_s) == 4 * 127  # every request's inter-token latencies
    if name == "sglang_bench_serving.jsonl":
        assert run.wall_s == pytest.approx(8.871)  # the newest line
        assert run.prefill_tokens_per_s == pytest.approx(3693.84)
    if name == "sglang_bench_serving.txt":
        assert run.tokens_per_s == pytest.approx(4617.30) and run.decode_step_ms.p50 == pytest.approx(8.02)


def test_something_else_is_not_taken_for_a_benchmark_result():
    with pytest.raises(ValueError):
        serving.parse_bench_output("INFO starting server\nready\n")


def test_command_lines_serve_dummy_weights_without_prefix_caching():
    spec = customize(get_workload("llama-3-1-8b-instruct-vllm"), device="cuda").resolved()
    vllm = serving.local_command(spec, "/m", 8123)
    assert vllm[1:3] == ["serve", "/m"]
    for flag in ("--load-format", "--skip-tokenizer-init", "--no-enable-prefix-caching", "--max-model-len"):
        assert flag in vllm
    assert vllm[vllm.index("--dtype") + 1] == "bfloat16" and vllm[vllm.index("--port") + 1] == "8123"
    sglang_spec = customize(get_workload("qwen3-5-27b-sglang"), device="cuda").resolved()
    sglang = serving.local_command(sglang_spec, "/m", 30000)
    assert sglang[1:3] == ["-m", "sglang.launch_server"] and "--disable-radix-cache" in sglang
    docker = serving.docker_command(spec, serving.DEFAULT_IMAGES["vllm"], "/tmp/model", 8123, "apex-vllm-8123", amd=True)
    assert docker[:3] == ["docker", "run", "--rm"] and "--device=/dev/kfd" in docker and "rocm/vllm:latest" in docker
    assert f"/tmp/model:{serving.CONTAINER_MODEL_DIR}:ro" in docker
    assert docker[docker.index("rocm/vllm:latest") + 1:][:3] == ["vllm", "serve", serving.CONTAINER_MODEL_DIR]
    assert "--gpus" in serving.docker_command(spec, "img", "/m", 1, "n", amd=False)


def test_the_model_folder_holds_the_reduced_registry_config(tmp_path):
    spec = customize(get_workload("gpt-oss-20b-vllm"), layers=2, device="cuda").resolved()
    folder = serving.write_model_dir(spec, tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["GptOssForCausalLM"] and config["num_hidden_layers"] == 2
    assert config["hidden_size"] == 2880 and config["num_local_experts"] == 32


@pytest.mark.parametrize("family", sorted(FAMILIES.keys() - {"synthetic"}))
def test_every_family_writes_a_config_whose_architecture_and_model_type_transformers_load(family, tmp_path):
    """What vLLM or SGLang reads: the architecture a server resolves, and a model type
    transformers' AutoConfig maps back to the same configuration class."""
    import transformers

    slug = next(s for s, m in MODELS.items() if m.family == family)
    spec = customize(get_workload(f"{slug}-vllm"), device="cuda").resolved()
    written = json.loads((serving.write_model_dir(spec, tmp_path / "model") / "config.json").read_text())
    assert hasattr(transformers, written["architectures"][0])
    loaded = transformers.AutoConfig.from_pretrained(tmp_path / "model")
    assert type(loaded).__name__ in FAMILIES[family].config_classes
    assert loaded.hidden_size == MODELS[slug].hidden_size


def test_server_workloads_refuse_the_cpu_and_kernel_stacks_in_one_line():
    with pytest.raises(ApexUserError, match="serves on a GPU"):
        serving.preflight_server(customize(get_workload("llama-3-1-8b-instruct-vllm"), device="cpu").resolved())
    with pytest.raises(ApexUserError, match="transformers stack"):
        serving.preflight_server(customize(get_workload("llama-3-1-8b-instruct-sglang"), kernels="liger").resolved())


class _Replay(http.server.BaseHTTPRequestHandler):
    """A stand-in server: /health answers 200, /v1/completions replays the recorded vLLM stream."""

    requests: list[dict] = []

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        time.sleep(0.02)  # the prefill
        for line in (DATA / "vllm_completions_stream.txt").read_text().splitlines(keepends=True):
            self.wfile.write(line.encode())
            self.wfile.flush()
            if line.startswith("data:"):
                time.sleep(0.005)


def test_a_server_workload_loads_a_running_server_through_its_completions_endpoint():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Replay)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Replay.requests = []
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        spec = customize(get_workload("llama-3-1-8b-instruct-vllm"), batch=3, prompt_tokens=16, decode_tokens=4,
                         device="cuda").resolved()
        workload = serving.load_server(spec, base_url=url)
        step = workload.step()
        workload.close()
    finally:
        server.shutdown()
    assert len(_Replay.requests) == 3
    body = _Replay.requests[0]
    assert len(body["prompt"]) == 16 and body["max_tokens"] == body["min_tokens"] == 5 and body["ignore_eos"]
    assert body["stream"] and body["model"] == spec.id
    assert len(step.ttft_s) == 3 and min(step.ttft_s) >= 0.02 and step.generated_tokens == 3 * 4
    assert len(step.decode_step_s) == 3 * 4 and step.wall_time >= step.prefill_s


def test_attaching_to_a_server_that_does_not_answer_is_a_user_error():
    spec = customize(get_workload("llama-3-1-8b-instruct-vllm"), device="cuda").resolved()
    with pytest.raises(ApexUserError, match="no server answers"):
        serving.load_server(spec, base_url="http://127.0.0.1:9")


def test_a_container_gets_each_patched_file_mounted_read_only_over_the_images_own(tmp_path, monkeypatch):
    spec = customize(get_workload("llama-3-1-8b-instruct-vllm"), device="cuda").resolved()
    patched = [("/env/site/vllm/layers/norm.py", "/usr/lib/python3/site/vllm/layers/norm.py"),
               ("/env/site/vllm/layers/_apex_patch_p1_ab12.py", "/usr/lib/python3/site/vllm/layers/_apex_patch_p1_ab12.py")]
    docker = serving.docker_command(spec, "img", "/m", 1, "n", amd=False, patched=patched)
    image = docker.index("img")
    for host, inside in patched:
        mount = docker.index(f"{host}:{inside}:ro")
        assert docker[mount - 1] == "-v" and mount < image
    # The image is asked where its site-packages are (docker itself is the edge: a recorded answer).
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho /usr/local/lib/python3.12/dist-packages\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert serving.container_site_packages("rocm/vllm:latest") == "/usr/local/lib/python3.12/dist-packages"
    fake.write_text("#!/bin/sh\necho 'Unable to find image' >&2\nexit 125\n")
    with pytest.raises(ApexUserError, match="could not find its site-packages"):
        serving.container_site_packages("nope:latest")

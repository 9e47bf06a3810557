"""vLLM and SGLang workloads: a server (local process or Docker image) loaded through its
OpenAI-compatible completions endpoint. UNVERIFIED ON HARDWARE: no GPU machine of ours has vLLM or
SGLang; the command lines follow their documented options and the parsers are tested on recorded
outputs (tests/apex_core/workloads/data/).

- Model: the registry config with reduced layers, written as ``config.json`` into a folder the
  server loads with ``--load-format dummy`` (random weights, nothing downloaded) and
  ``--skip-tokenizer-init`` (prompts are token ids; no tokenizer files needed). Prefix caching is
  off, so every run's prefill is computed again.
- Server: ``vllm serve`` / ``python -m sglang.launch_server`` where installed, else (or with
  ``--docker-image``) ``docker run`` of ``DEFAULT_IMAGES`` (the ROCm images; AMD device flags when
  /dev/kfd exists, ``--gpus all`` otherwise).
- Readiness: ``GET /health`` answers 200 (both servers), while the process is alive, within
  ``READY_TIMEOUT_S``.
- Load: one step sends ``batch`` concurrent streaming requests of ``prompt_tokens`` fixed token ids,
  each asking for exactly ``decode_tokens + 1`` tokens (``min_tokens``/``ignore_eos``, greedy);
  ``parse_stream`` turns each server-sent-event stream into time to first token, inter-token gaps
  and the token count; ``step_from_traces`` into the common ``StepTiming``.
- Their own benchmark tools' outputs (``vllm bench serve`` summary or ``--save-result`` JSON,
  ``sglang.bench_serving`` summary or JSONL) parse into a ``RunResult`` too
  (``parse_bench_output``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from apex_core.errors import ApexUserError
from apex_core.workloads.requests import prompt_lists
from apex_core.workloads.results import Percentiles, RunResult, StepTiming
from apex_core.workloads.spec import WorkloadSpec

DEFAULT_IMAGES = {"vllm": "rocm/vllm:latest", "sglang": "lmsysorg/sglang:latest-rocm"}
"""Images used when the server is not installed here (or given by --docker-image)."""
READY_TIMEOUT_S = 900.0
REQUEST_TIMEOUT_S = 600.0
CONTAINER_MODEL_DIR = "/apex-model"


# --- command lines ------------------------------------------------------------------------------


def server_args(spec: WorkloadSpec, model_dir: str, port: int) -> list[str]:
    """The server's own command line (without the launcher: ``vllm`` or ``python``)."""
    context = spec.prompt_tokens + spec.decode_tokens + 16
    if spec.stack == "vllm":
        return ["serve", model_dir, "--host", "127.0.0.1", "--port", str(port), "--dtype", spec.dtype,
                "--load-format", "dummy", "--skip-tokenizer-init", "--served-model-name", spec.id,
                "--max-model-len", str(context), "--max-num-seqs", str(spec.batch), "--seed", str(spec.seed),
                "--no-enable-prefix-caching"] + ([] if spec.graphs is not False else ["--enforce-eager"])
    if spec.stack == "sglang":
        return ["-m", "sglang.launch_server", "--model-path", model_dir, "--host", "127.0.0.1", "--port", str(port),
                "--dtype", spec.dtype, "--load-format", "dummy", "--skip-tokenizer-init", "--served-model-name", spec.id,
                "--context-length", str(context), "--max-running-requests", str(spec.batch),
                "--random-seed", str(spec.seed), "--disable-radix-cache"] + ([] if spec.graphs is not False else ["--disable-cuda-graph"])
    raise ValueError(f"{spec.stack} is not a server stack")


def local_command(spec: WorkloadSpec, model_dir: str, port: int) -> list[str]:
    launcher = [shutil.which("vllm") or "vllm"] if spec.stack == "vllm" else [sys.executable]
    return launcher + server_args(spec, model_dir, port)


def docker_command(spec: WorkloadSpec, image: str, model_dir: str, port: int, name: str, amd: bool,
                   patched: list[tuple[str, str]] = ()) -> list[str]:
    """``patched``: (host file, its path in the container) of each patched file, mounted read-only
    over the image's own; nothing else of the host's environment enters the container."""
    devices = (["--device=/dev/kfd", "--device=/dev/dri", "--group-add", "video", "--security-opt", "seccomp=unconfined"]
               if amd else ["--gpus", "all"])
    launcher = ["vllm"] if spec.stack == "vllm" else ["python3"]
    mounts = [arg for host, inside in patched for arg in ("-v", f"{host}:{inside}:ro")]
    return ["docker", "run", "--rm", "--name", name, "--network=host", "--ipc=host", *devices,
            "-v", f"{model_dir}:{CONTAINER_MODEL_DIR}:ro", *mounts, image, *launcher,
            *server_args(spec, CONTAINER_MODEL_DIR, port)]


def container_site_packages(image: str) -> str:
    """The image's site-packages (where its Python imports the stack from), asked of the image."""
    command = ["docker", "run", "--rm", "--entrypoint", "python3", image, "-c",
               "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("/"):
        raise ApexUserError(f"{image}: could not find its site-packages to mount the patched files into "
                            f"({(done.stderr.strip().splitlines() or ['no output'])[-1]})")
    return lines[-1]


def local_server_installed(stack: str) -> bool:
    if stack == "vllm":
        return shutil.which("vllm") is not None
    import importlib.util

    return importlib.util.find_spec("sglang") is not None


def preflight_server(spec: WorkloadSpec) -> None:
    """Refuse in one line a server workload that cannot start here."""
    from apex_core.models import get_model
    from apex_core.workloads.hf import config_class

    if spec.kernels:
        raise ApexUserError(f"--kernels applies to the transformers stack; {spec.id} runs {spec.stack}'s own kernels")
    if not spec.on_gpu:
        raise ApexUserError(f"{spec.id}: {spec.stack} serves on a GPU and this machine has none visible to torch; "
                            "use the cpu-mini workload here")
    config_class(get_model(spec.model))
    if spec.docker_image is None and local_server_installed(spec.stack):
        return
    if shutil.which("docker") is None:
        name = "vllm" if spec.stack == "vllm" else "sglang"
        raise ApexUserError(f"{spec.id}: neither {name} nor docker is installed here; pip install {name}, or install docker "
                            f"(image {spec.docker_image or DEFAULT_IMAGES[spec.stack]})")


# --- responses ----------------------------------------------------------------------------------


class RequestTrace(BaseModel):
    """One streamed completion as seen by the client."""

    ttft_s: float
    itl_s: list[float]
    completion_tokens: int
    end_s: float
    """Seconds from sending to the end of the stream."""


def parse_stream(events: Iterable[tuple[float, str]], sent_at: float) -> RequestTrace:
    """A server-sent-event stream of ``/v1/completions`` (``stream: true``) as (arrival time, line) pairs.

    Every ``data:`` event with a non-empty ``choices`` is one token (vLLM and SGLang stream one
    token per event); the last event's ``usage.completion_tokens`` (``stream_options``), when
    present, is the count. An ``error`` event raises.
    """
    arrivals: list[float] = []
    usage: int | None = None
    end = sent_at
    for arrived, line in events:
        end = arrived
        line = line.strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        data = json.loads(payload)
        if "error" in data:
            error = data["error"]
            raise RuntimeError(f"server error: {error.get('message', error) if isinstance(error, dict) else error}")
        if data.get("choices"):
            arrivals.append(arrived)
        if isinstance(data.get("usage"), dict) and data["usage"].get("completion_tokens") is not None:
            usage = int(data["usage"]["completion_tokens"])
    if not arrivals:
        raise RuntimeError("the stream ended without a token")
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    return RequestTrace(ttft_s=arrivals[0] - sent_at, itl_s=gaps, completion_tokens=usage if usage is not None else len(arrivals),
                        end_s=end - sent_at)


def step_from_traces(spec: WorkloadSpec, traces: list[RequestTrace], wall_s: float) -> StepTiming:
    """Concurrent requests as one request mix: the prefill ends with the last first token."""
    prefill = max(t.ttft_s for t in traces)
    generated = sum(max(t.completion_tokens - 1, 0) for t in traces)
    return StepTiming(
        prefill_s=prefill, decode_step_s=[g for t in traces for g in t.itl_s], batch=spec.batch,
        prompt_tokens=spec.prompt_tokens, decode_tokens=spec.decode_tokens, decode_s=max(wall_s - prefill, 0.0),
        wall_s=wall_s, ttft_s=[t.ttft_s for t in traces], generated_tokens=generated,
    )


def completion_request(spec: WorkloadSpec, prompt: list[int]) -> dict[str, Any]:
    tokens = spec.decode_tokens + 1  # the prefill's token, then decode_tokens more
    return {"model": spec.id, "prompt": prompt, "max_tokens": tokens, "min_tokens": tokens, "ignore_eos": True,
            "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True}}


# --- their benchmark tools' outputs -------------------------------------------------------------

_SUMMARY_LINES = {
    "Benchmark duration (s)": "duration",
    "Successful requests": "completed",
    "Total input tokens": "total_input_tokens",
    "Total generated tokens": "total_output_tokens",
    "Request throughput (req/s)": "request_throughput",
    "Input token throughput (tok/s)": "input_throughput",
    "Output token throughput (tok/s)": "output_throughput",
    "Total token throughput (tok/s)": "total_token_throughput",
    "Total Token throughput (tok/s)": "total_token_throughput",
    "Median TTFT (ms)": "median_ttft_ms",
    "Mean TTFT (ms)": "mean_ttft_ms",
    "P99 TTFT (ms)": "p99_ttft_ms",
    "Median ITL (ms)": "median_itl_ms",
    "P90 ITL (ms)": "p90_itl_ms",
    "P99 ITL (ms)": "p99_itl_ms",
    "Median E2E Latency (ms)": "median_e2e_latency_ms",
}


def _summary_from_text(text: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r"^\s*([^:]+?):\s+([-+0-9.eE]+)\s*$", line)
        if match and match.group(1) in _SUMMARY_LINES:
            found[_SUMMARY_LINES[match.group(1)]] = float(match.group(2))
    return found


def parse_bench_output(text: str, index: int = 0) -> RunResult:
    """A ``vllm bench serve`` / ``sglang.bench_serving`` result as one run: their ``--save-result``
    JSON (vLLM), JSONL (SGLang, last line) or printed summary block.

    tokens/s is their total token throughput ((input + output) / duration), decode tokens/s their
    output throughput, prefill tokens/s input tokens / duration (SGLang's input throughput), the
    prefill time their median TTFT and the decode-step percentiles their ITL percentiles.
    """
    data: dict[str, Any] = {}
    stripped = text.strip()
    if stripped.startswith("{"):
        lines = [line for line in stripped.splitlines() if line.strip()]
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            data = json.loads(lines[-1])  # JSONL: one result per line, the newest last
    else:
        data = _summary_from_text(text)
    if not data.get("duration") or "total_input_tokens" not in data:
        raise ValueError("not a vLLM or SGLang serving benchmark result (no duration and token totals)")
    duration = float(data["duration"])
    total_in = float(data["total_input_tokens"])
    total_out = float(data.get("total_output_tokens") or 0)
    total = data.get("total_token_throughput") or data.get("total_throughput") or (total_in + total_out) / duration
    itl = data.get("itls")
    if isinstance(itl, list) and itl and isinstance(itl[0], list):
        raw = [float(g) for request in itl for g in request]
    else:
        raw = []
    median_ttft = data.get("median_ttft_ms")
    prefill_s = float(median_ttft) / 1e3 if median_ttft is not None else 0.0
    return RunResult(
        index=index, wall_s=duration, prefill_s=prefill_s, decode_s=max(duration - prefill_s, 0.0),
        tokens_per_s=float(total), prefill_tokens_per_s=float(data.get("input_throughput") or total_in / duration),
        decode_tokens_per_s=float(data.get("output_throughput") or total_out / duration),
        decode_step_ms=Percentiles(p50=_float(data.get("median_itl_ms")), p90=_float(data.get("p90_itl_ms")),
                                   p99=_float(data.get("p99_itl_ms"))),
        decode_step_s=raw,
    )


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


# --- the running server -------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_model_dir(spec: WorkloadSpec, folder: Path) -> Path:
    """The reduced model's config.json, which the server loads with dummy weights."""
    from apex_core.workloads.hf import hf_config

    config = hf_config(spec)
    config.architectures = [_architecture(spec)]
    config.dtype = spec.dtype
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(config.to_json_string(use_diff=False), encoding="utf-8")
    return folder


def _architecture(spec: WorkloadSpec) -> str:
    from apex_core.models import get_model
    from apex_core.workloads.families import FAMILIES

    return FAMILIES[get_model(spec.model).family].architecture


def health_ok(base_url: str, timeout: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


class ServerWorkload:
    """A running vLLM/SGLang server as a workload: ``.step()`` sends one request mix."""

    model = None
    """No torch module in this process: the model lives in the server."""
    decode_mode = None
    """The server decides how it decodes (its own graphs unless the spec's graphs is False)."""
    graph_fallback = None

    def __init__(self, spec: WorkloadSpec, base_url: str, process: subprocess.Popen | None = None,
                 cleanup: list[list[str]] | None = None, scratch: Path | None = None, log: Path | None = None) -> None:
        self.spec = spec
        self.base_url = base_url.rstrip("/")
        self.process = process
        self.notes = [f"{spec.stack} server at {self.base_url} (unverified on hardware)"]
        self.timing_method = "client wall clock over the server's streamed tokens"
        self._cleanup = cleanup or []
        self._scratch = scratch
        self.log = log
        self.vocab_size = _vocab(spec)
        self.prompts = prompt_lists(self.vocab_size, spec.batch, spec.prompt_tokens, spec.seed)

    def _one(self, prompt: list[int], results: list[RequestTrace | BaseException], slot: int) -> None:
        body = json.dumps(completion_request(self.spec, prompt)).encode()
        request = urllib.request.Request(f"{self.base_url}/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            sent = time.perf_counter()
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                events = ((time.perf_counter(), raw.decode("utf-8", "replace")) for raw in response)
                results[slot] = parse_stream(events, sent)
        except BaseException as error:  # reported by step() for every request
            results[slot] = error

    def step(self, seed: int | None = None) -> StepTiming:
        """``batch`` concurrent requests; ``seed`` draws their prompts (None: the spec's seed)."""
        request_seed = self.spec.seed if seed is None else int(seed)
        prompts = self.prompts if seed is None else prompt_lists(self.vocab_size, self.spec.batch, self.spec.prompt_tokens, request_seed)
        results: list[RequestTrace | BaseException] = [RuntimeError("no answer")] * len(prompts)
        threads = [threading.Thread(target=self._one, args=(p, results, i), daemon=True) for i, p in enumerate(prompts)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - start
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise RuntimeError(f"{len(failed)} of {len(results)} requests to {self.base_url} failed: {failed[0]}")
        timing = step_from_traces(self.spec, [r for r in results if isinstance(r, RequestTrace)], wall)
        return timing.model_copy(update={"request_seed": request_seed})

    def close(self) -> None:
        for command in self._cleanup:
            subprocess.run(command, capture_output=True, check=False, timeout=60)
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)


def _vocab(spec: WorkloadSpec) -> int:
    from apex_core.models import get_model

    return get_model(spec.model).vocab_size


def wait_ready(base_url: str, process: subprocess.Popen | None, timeout: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if health_ok(base_url):
            return
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode} before it was ready{_tail(log)}")
        time.sleep(2.0)
    raise RuntimeError(f"the server at {base_url} was not ready after {timeout:.0f} s{_tail(log)}")


def _tail(log: Path | None, lines: int = 20) -> str:
    if log is None or not log.exists():
        return ""
    return "; its log ends:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def load_server(spec: WorkloadSpec, base_url: str | None = None, patched: list[tuple[str, str]] = ()) -> ServerWorkload:
    """Start the workload's server (local, else Docker) and wait until it answers; or attach to
    ``base_url`` (``APEX_SERVER_URL``), a server already started with the same model.

    ``patched``: (host file, its path relative to site-packages) of each file a patch of this
    server's stack changed. A local server imports them from this environment as they are; a
    container gets each mounted over its own copy (the adapters load their solution copies from
    beside the patched module, so the mounted pair works at any path)."""
    base_url = base_url or os.environ.get("APEX_SERVER_URL")
    if base_url:
        if not health_ok(base_url):
            raise ApexUserError(f"APEX_SERVER_URL {base_url}: no server answers GET /health there")
        return ServerWorkload(spec, base_url)
    preflight_server(spec)
    scratch = Path(tempfile.mkdtemp(prefix=f"apex-{spec.stack}-"))
    model_dir = write_model_dir(spec, scratch / "model")
    port = _free_port()
    log = scratch / "server.log"
    cleanup: list[list[str]] = []
    if spec.docker_image is None and local_server_installed(spec.stack):
        command = local_command(spec, str(model_dir), port)
    else:
        name = f"apex-{spec.stack}-{port}"
        image = spec.docker_image or DEFAULT_IMAGES[spec.stack]
        site = container_site_packages(image) if patched else ""
        command = docker_command(spec, image, str(model_dir), port, name, amd=Path("/dev/kfd").exists(),
                                 patched=[(host, f"{site}/{relative}") for host, relative in patched])
        cleanup.append(["docker", "rm", "-f", name])
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    workload = ServerWorkload(spec, f"http://127.0.0.1:{port}", process, cleanup, scratch, log)
    try:
        wait_ready(workload.base_url, process, READY_TIMEOUT_S, log)
    except BaseException:
        workload.close()
        raise
    workload.notes.append("command: " + " ".join(command))
    return workload

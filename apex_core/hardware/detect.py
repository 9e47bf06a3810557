"""Finding out which accelerator this machine has.

Detection asks PyTorch first (``torch.version.hip`` / ``torch.version.cuda`` and the device
properties), then the vendor tools (rocminfo, amd-smi, rocm-smi on AMD; nvidia-smi on NVIDIA) to
fill in what PyTorch does not know, such as the driver version, or to find a GPU that a CPU-only
torch build cannot see. The parsers are plain functions over the tools' text so they are tested
against recorded outputs; the AMD paths have been checked only against recorded outputs, not on an
AMD machine.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

Vendor = Literal["amd", "nvidia", "cpu"]
CommandRunner = Callable[[list[str]], "str | None"]


class DetectedDevice(BaseModel):
    """What this machine reports about its accelerator (or its CPU when it has none)."""

    vendor: Vendor
    product_name: str
    arch: str | None = None
    compute_units: int | None = None
    memory_bytes: int | None = None
    l2_cache_bytes: int | None = None
    max_clock_mhz: int | None = None
    device_count: int = 0
    driver_version: str | None = None
    runtime: str | None = None
    """The GPU runtime torch was built for: 'ROCm 7.2' / 'CUDA 13.0' (None on CPU)."""
    torch_version: str | None = None
    detected_by: list[str] = []


def run_command(argv: list[str], timeout: float = 20.0) -> str | None:
    """Run a vendor tool; None when it is missing, fails or hangs (detection must never crash)."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout


# --- parsers over recorded tool output -------------------------------------------------------


def _leading_int(text: str) -> int | None:
    match = re.match(r"\s*(\d+)", text)
    return int(match.group(1)) if match else None


def parse_rocminfo(text: str) -> list[dict[str, Any]]:
    """GPU agents of ``rocminfo`` output: name (gfx arch), marketing name, CUs, caches, clock."""
    agents: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    in_cache = False
    for raw in text.splitlines():
        line = raw.rstrip()
        if re.match(r"^\s*Agent \d+\s*$", line):
            current = {}
            agents.append(current)
            in_cache = False
            continue
        if current is None or ":" not in line:
            continue
        key, _, value = line.strip().partition(":")
        key, value = key.strip(), value.strip()
        indent = len(line) - len(line.lstrip())
        if key == "Cache Info":
            in_cache = True
            continue
        if in_cache and indent >= 4 and key in ("L1", "L2", "L3"):
            kib = _leading_int(value)
            if kib is not None:
                current[f"cache_{key.lower()}_kib"] = kib
            continue
        if indent <= 2:
            in_cache = False
        # Only the agent's own top-level keys; ISA and pool sections repeat 'Name'.
        if indent > 2 or key in current:
            continue
        if key in ("Name", "Marketing Name", "Device Type", "Vendor Name"):
            current[key] = value
        elif key in ("Compute Unit", "Max Clock Freq. (MHz)", "Wavefront Size"):
            number = _leading_int(value)
            if number is not None:
                current[key] = number
    gpus = []
    for agent in agents:
        if agent.get("Device Type") != "GPU":
            continue
        arch = agent.get("Name", "").split(":")[0].lower()
        gpus.append(
            {
                "arch": arch if arch.startswith("gfx") else None,
                "product_name": agent.get("Marketing Name") or agent.get("Name", ""),
                "compute_units": agent.get("Compute Unit"),
                "max_clock_mhz": agent.get("Max Clock Freq. (MHz)"),
                "wavefront_size": agent.get("Wavefront Size"),
                "l2_kib": agent.get("cache_l2_kib"),
                "l3_kib": agent.get("cache_l3_kib"),
            }
        )
    return gpus


def _size_to_bytes(value: Any) -> int | None:
    """amd-smi sizes come as {"value": n, "unit": "MB"}, "196592 MB" or a bare number of MB."""
    units = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3}
    if isinstance(value, dict):
        number, unit = value.get("value"), str(value.get("unit", "MB")).upper()
    elif isinstance(value, str):
        match = re.match(r"\s*([\d.]+)\s*([A-Za-z]*)", value)
        if not match:
            return None
        number, unit = float(match.group(1)), (match.group(2) or "MB").upper()
    elif isinstance(value, (int, float)):
        number, unit = value, "MB"
    else:
        return None
    try:
        return int(float(number) * units.get(unit, 1024**2))
    except (TypeError, ValueError):
        return None


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None


def parse_amd_smi_static(text: str) -> list[dict[str, Any]]:
    """``amd-smi static --json``: a list of GPUs (ROCm 6.x) or ``{"gpu_data": [...]}`` (ROCm 7.x)."""
    data = _json_or_none(text)
    if isinstance(data, dict):
        data = data.get("gpu_data", data.get("gpus", []))
    if not isinstance(data, list):
        return []
    gpus = []
    for entry in data:
        if not isinstance(entry, dict):
            continue
        asic = entry.get("asic", {}) or {}
        vram = entry.get("vram", {}) or {}
        driver = entry.get("driver", {}) or {}
        cus = asic.get("num_compute_units")
        gpus.append(
            {
                "product_name": asic.get("market_name"),
                "arch": str(asic.get("target_graphics_version", "")).lower() or None,
                "compute_units": cus if isinstance(cus, int) else None,
                "memory_bytes": _size_to_bytes(vram.get("size")) if "size" in vram else None,
                "driver_version": driver.get("version") if isinstance(driver, dict) else None,
            }
        )
    return gpus


def parse_rocm_smi_json(text: str) -> list[dict[str, Any]]:
    """``rocm-smi --showproductname --showdriverversion --json``: one key per card plus 'system'."""
    data = _json_or_none(text)
    if not isinstance(data, dict):
        return []
    driver = None
    system = data.get("system")
    if isinstance(system, dict):
        driver = system.get("Driver version")
    cards = []
    for key, card in data.items():
        if not key.startswith("card") or not isinstance(card, dict):
            continue
        name = card.get("Card Series") or card.get("Card SKU") or card.get("Card Model")
        arch = card.get("GFX Version")
        cards.append(
            {
                "product_name": name,
                "arch": str(arch).lower() if arch else None,
                "driver_version": driver,
            }
        )
    return cards


NVIDIA_SMI_QUERY = "index,name,driver_version,memory.total,compute_cap,clocks.max.sm"


def parse_nvidia_smi_csv(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=<NVIDIA_SMI_QUERY> --format=csv,noheader,nounits``."""
    gpus = []
    for line in text.strip().splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 6:
            continue
        _, name, driver, memory_mib, compute_cap, max_sm_clock = fields[:6]
        arch = None
        if re.fullmatch(r"\d+\.\d+", compute_cap):
            major, minor = compute_cap.split(".")
            arch = f"sm_{major}{minor}"
        gpus.append(
            {
                "product_name": name,
                "driver_version": driver or None,
                "memory_bytes": int(memory_mib) * 1024**2 if memory_mib.isdigit() else None,
                "arch": arch,
                "max_clock_mhz": int(max_sm_clock) if max_sm_clock.isdigit() else None,
            }
        )
    return gpus


def read_amdgpu_driver_version(sys_root: Path = Path("/sys")) -> str | None:
    version = sys_root / "module" / "amdgpu" / "version"
    try:
        return version.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def read_rocm_version(rocm_root: Path = Path(os.environ.get("ROCM_PATH", "/opt/rocm"))) -> str | None:
    try:
        return (rocm_root / ".info" / "version").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


# --- probes -----------------------------------------------------------------------------------


GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")
"""On Linux, CUDA cannot reach a GPU without the NVIDIA control node, ROCm without the KFD node, and
WSL's GPU paravirtualization without dxg: a process that sees none of them sees no GPU."""


def no_gpu_reachable(root: Path = Path("/")) -> bool:
    """True only where no GPU can be reached (Linux without any of ``GPU_DEVICE_NODES``): importing
    PyTorch there only to hear that it sees no GPU costs 1.5-2.5 s of every CLI command and MCP
    server that reports the machine (2-core CI machine, 2026-12-06)."""
    return sys.platform == "linux" and not any((root / node.lstrip("/")).exists() for node in GPU_DEVICE_NODES)


def probe_torch() -> dict[str, Any] | None:
    """What PyTorch sees; None when torch is missing or sees no GPU."""
    if no_gpu_reachable():
        return None
    try:
        import torch
    except Exception:  # a broken torch install must not break detection
        return None
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    hip = getattr(torch.version, "hip", None)
    if hip:
        arch = str(getattr(props, "gcnArchName", "")).split(":")[0].lower() or None
        vendor: Vendor = "amd"
        runtime = f"ROCm {hip}"
    else:
        arch = f"sm_{props.major}{props.minor}"
        vendor = "nvidia"
        runtime = f"CUDA {torch.version.cuda}"
    return {
        "vendor": vendor,
        "product_name": props.name,
        "arch": arch,
        "compute_units": props.multi_processor_count,
        "memory_bytes": props.total_memory,
        "l2_cache_bytes": getattr(props, "L2_cache_size", None) or None,
        "device_count": torch.cuda.device_count(),
        "runtime": runtime,
        "torch_version": torch.__version__,
    }


def torch_version() -> str | None:
    """The installed PyTorch's version, from its package metadata (the same string as
    ``torch.__version__``, without importing it), or from torch itself where that is already loaded."""
    loaded = getattr(sys.modules.get("torch"), "__version__", None)  # absent while another thread imports it
    if loaded:
        return str(loaded)
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        pass  # importable without metadata (a source build on the path): ask torch itself
    try:
        import torch
    except Exception:
        return None
    return str(torch.__version__)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if value is not None and base.get(key) in (None, ""):
            base[key] = value


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def detect(
    run: CommandRunner = run_command,
    torch_probe: Callable[[], dict[str, Any] | None] = probe_torch,
) -> DetectedDevice:
    """Detect the accelerator; a machine without one is reported as its CPU."""
    found: dict[str, Any] = {}
    detected_by: list[str] = []
    seen = torch_probe()
    if seen:
        found.update(seen)
        detected_by.append("torch")

    if found.get("vendor") in (None, "amd"):
        rocminfo = run(["rocminfo"])
        gpus = parse_rocminfo(rocminfo) if rocminfo else []
        if gpus:
            first = gpus[0]
            # rocminfo reports L2 per XCD on MI300-class parts, so its L2 is not the device total;
            # the total comes from the spec table.
            _merge(found, {"vendor": "amd", "product_name": first["product_name"], "arch": first["arch"],
                           "compute_units": first["compute_units"], "max_clock_mhz": first["max_clock_mhz"],
                           "device_count": len(gpus)})
            detected_by.append("rocminfo")
        smi = run(["amd-smi", "static", "--asic", "--vram", "--driver", "--json"])
        cards = parse_amd_smi_static(smi) if smi else []
        if not cards:
            legacy = run(["rocm-smi", "--showproductname", "--showdriverversion", "--json"])
            cards = parse_rocm_smi_json(legacy) if legacy else []
            if cards:
                detected_by.append("rocm-smi")
        else:
            detected_by.append("amd-smi")
        if cards:
            _merge(found, {"vendor": "amd", **cards[0]})
            found.setdefault("device_count", len(cards))
        if found.get("vendor") == "amd":
            _merge(found, {"driver_version": read_amdgpu_driver_version()})
            rocm = read_rocm_version()
            if rocm and not found.get("runtime"):
                found["runtime"] = f"ROCm {rocm}"

    if found.get("vendor") in (None, "nvidia"):
        csv = run(["nvidia-smi", f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"])
        gpus = parse_nvidia_smi_csv(csv) if csv else []
        if gpus:
            _merge(found, {"vendor": "nvidia", **gpus[0]})
            if not found.get("device_count"):
                found["device_count"] = len(gpus)
            detected_by.append("nvidia-smi")

    if not found.get("vendor"):
        return DetectedDevice(
            vendor="cpu",
            product_name=cpu_name(),
            arch=platform.machine() or None,
            compute_units=os.cpu_count(),
            device_count=0,
            torch_version=torch_version(),
            detected_by=["none: no GPU found by torch, rocminfo, amd-smi, rocm-smi or nvidia-smi"],
        )
    found.setdefault("torch_version", torch_version())
    found["detected_by"] = detected_by
    found.setdefault("product_name", "unknown GPU")
    found["product_name"] = found.get("product_name") or "unknown GPU"
    return DetectedDevice(**{k: v for k, v in found.items() if k in DetectedDevice.model_fields})

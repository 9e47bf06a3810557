"""What a grade was measured on: the environment fingerprint in every result's provenance.

Timings are only comparable between identical environments, so cached results and baseline
timings are keyed on this fingerprint. Clocks and temperature are read where the vendor tool
answers (nvidia-smi here; AMD's equivalent is not wired yet) and left out otherwise.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
from functools import lru_cache

from pydantic import BaseModel

from apex_core.hardware.detect import DetectedDevice, cpu_name, detect, run_command


class Clocks(BaseModel):
    sm_mhz: int | None = None
    memory_mhz: int | None = None
    temperature_c: int | None = None


class Environment(BaseModel):
    device: str
    arch: str | None
    driver: str | None
    runtime: str | None
    python: str
    packages: dict[str, str]

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.model_dump(), sort_keys=True).encode()).hexdigest()[:16]


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def detected_device() -> DetectedDevice:
    return detect()


def environment(on_gpu: bool) -> Environment:
    packages = {name: v for name in ("torch", "triton", "numpy") if (v := _version(name))}
    if on_gpu:
        device = detected_device()
        return Environment(
            device=device.product_name,
            arch=device.arch,
            driver=device.driver_version,
            runtime=device.runtime,
            python=platform.python_version(),
            packages=packages,
        )
    return Environment(
        device=cpu_name(), arch=platform.machine(), driver=None, runtime=None, python=platform.python_version(), packages=packages
    )


def read_clocks(on_gpu: bool) -> Clocks | None:
    if not on_gpu:
        return None
    text = run_command(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,temperature.gpu", "--format=csv,noheader,nounits"])
    if not text:
        return None
    fields = [f.strip() for f in text.splitlines()[0].split(",")]
    numbers = [int(f) if f.isdigit() else None for f in fields[:3]]
    while len(numbers) < 3:
        numbers.append(None)
    return Clocks(sm_mhz=numbers[0], memory_mhz=numbers[1], temperature_c=numbers[2])

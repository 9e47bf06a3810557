"""The hardware model's facts as passages: every number of every GPU, with its public source.

One passage per GPU says what the part is (vendor, arch, family, notes); one per sourced number
says the number in words, with its unit and the document it was read from, so "LDS size of the
MI355X" finds "AMD Instinct MI355X (mi355x, gfx950, CDNA4): LDS per CU is 160 KiB. Source: ...".
The line range is the line of ``apex_core/hardware/specs.py`` that sets the number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from apex_core.hardware import specs as specs_module
from apex_core.hardware.specs import GPU_SPECS, SOURCED_FIELDS, GpuSpec

SPECS_FILE = Path(specs_module.__file__).resolve()

FIELD_WORDS: dict[str, tuple[str, str]] = {
    "compute_units": ("compute units (CUs on AMD, streaming multiprocessors (SMs) on NVIDIA)", ""),
    "memory_gb": ("memory capacity (HBM)", "GB"),
    "hbm_bandwidth_tbs": ("peak memory (HBM) bandwidth", "TB/s"),
    "peak_bf16_tflops": ("peak dense BF16 matrix throughput", "TFLOP/s"),
    "peak_fp16_tflops": ("peak dense FP16 matrix throughput", "TFLOP/s"),
    "peak_fp8_tflops": ("peak dense FP8 matrix throughput", "TFLOP/s"),
    "lds_per_cu_kib": ("LDS (local data share; shared memory on NVIDIA) per CU", "KiB"),
    "l2_cache_mib": ("L2 cache (whole device)", "MiB"),
    "infinity_cache_mib": ("Infinity Cache (memory-side last-level cache, MALL)", "MiB"),
    "wavefront_size": ("wavefront size (threads per wavefront; warp size on NVIDIA)", "threads"),
    "max_clock_mhz": ("peak engine clock", "MHz"),
    "xcds": ("accelerator complex dies (XCDs, chiplets)", ""),
    "l1_vector_cache_kib": ("L1 vector cache per CU", "KiB"),
    "register_file_kib": ("vector register file (VGPRs; registers on NVIDIA) per CU", "KiB"),
    "peak_fp4_tflops": ("peak dense FP4 matrix throughput", "TFLOP/s"),
}
"""How each sourced field is said in words: a question never names ``lds_per_cu_kib``. A field the
hardware model gains later without an entry here is said by its name until one is added."""


@dataclass(frozen=True)
class Fact:
    section: str
    text: str
    line: int | None


def hardware_facts() -> list[Fact]:
    """A passage for each GPU of the hardware model and one for each of its sourced numbers."""
    lines = SPECS_FILE.read_text(encoding="utf-8").splitlines()
    facts: list[Fact] = []
    for spec in GPU_SPECS:
        start = _line_of(lines, rf'^\s*key="{re.escape(spec.key)}"', 0)
        title = f"{spec.product_name} ({spec.key}, {spec.arch}, {spec.family})"
        overview = (f"{title}: a {spec.vendor.upper()} GPU of the {spec.family} family, architecture {spec.arch}, "
                    f"{spec.memory_gb:g} GB {spec.memory_type}. Name patterns: {', '.join(spec.name_patterns)}.")
        if spec.notes:
            overview += f" Notes: {spec.notes}"
        facts.append(Fact(f"{spec.key}", overview, start))
        for field in SOURCED_FIELDS:
            value = getattr(spec, field)
            if value is None:
                continue
            words, unit = FIELD_WORDS.get(field, (field.replace("_", " "), ""))
            line = _line_of(lines, rf"^\s*{field}=", start - 1 if start else 0)
            facts.append(Fact(f"{spec.key} {field}", _fact_text(title, spec, field, words, value, unit), line))
    return facts


def _fact_text(title: str, spec: GpuSpec, field: str, words: str, value: object, unit: str) -> str:
    amount = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{title}: {words} is {amount}{' ' + unit if unit else ''}. Source: {spec.sources[field]}."


def _line_of(lines: list[str], pattern: str, after: int) -> int | None:
    """1-based number of the first line from index ``after`` on that matches ``pattern``."""
    compiled = re.compile(pattern)
    for index in range(after, len(lines)):
        if compiled.search(lines[index]):
            return index + 1
    return None

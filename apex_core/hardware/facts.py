"""The hardware model's sourced numbers as facts: value, unit, what it is in words, and the source.

What an agent asks for ("the LDS size of the MI355X, and where does it say so") rather than a
field name: the source server's ``hardware_facts`` tool returns these, and the documentation
search indexes the same words, so the two never describe a number differently.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from apex_core.hardware.specs import SOURCED_FIELDS, GpuSpec

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


class HardwareFact(BaseModel):
    field: str = Field(description="the hardware model's field name")
    value: float | int
    unit: str
    description: str = Field(description="what the number is, in words")
    source: str = Field(description="the public document (or measurement) it was read from")


def field_words(field: str) -> tuple[str, str]:
    """(description, unit) of a sourced field."""
    return FIELD_WORDS.get(field, (field.replace("_", " "), ""))


def sourced_facts(spec: GpuSpec, fields: list[str] | None = None) -> list[HardwareFact]:
    """Every sourced number of ``spec`` (or those of ``fields``), in the model's field order."""
    chosen = SOURCED_FIELDS if fields is None else tuple(f for f in SOURCED_FIELDS if f in fields)
    facts: list[HardwareFact] = []
    for field in chosen:
        value = getattr(spec, field)
        if value is None:
            continue
        words, unit = field_words(field)
        facts.append(HardwareFact(field=field, value=value, unit=unit, description=words, source=spec.sources[field]))
    return facts

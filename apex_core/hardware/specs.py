"""Peak numbers of the GPUs Apex targets, each with the public source it was read from.

These numbers feed roofline floors, cache-flush sizes, prompts and skills; nothing else in Apex
may hard-code a hardware number. Peak FLOP/s are *dense* (vendors often print with-sparsity
figures; those were halved, as the notes say). Research of 2026-11-29: rows marked "via a quoting
copy" were read through third-party transcriptions of the vendor page or PDF and agree with the
per-CU arithmetic; rows marked "measured" were read off a real device, not a document.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MIB = 1024**2

ROCM_GPU_SPECS = "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html (AMD Instinct table)"
ROCM_MI300 = "https://rocm.docs.amd.com/en/docs-6.2.2/conceptual/gpu-arch/mi300.html (peak-performance table)"
MI355X_BROCHURE = (
    "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/product-briefs/"
    "amd-instinct-mi355x-gpu-brochure.pdf (via a quoting copy)"
)
MI350X_BROCHURE = (
    "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/product-briefs/"
    "amd-instinct-mi350x-gpu-brochure.pdf (via a quoting copy)"
)
MI355X_PAGE = "https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html (via a quoting copy)"
MI350X_PAGE = "https://www.amd.com/en/products/accelerators/instinct/mi350/mi350x.html (via a quoting copy)"
MI325X_DATASHEET = (
    "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/product-briefs/"
    "instinct-mi325x-datasheet.pdf (via a quoting copy)"
)
MI325X_PAGE = "https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html (via a quoting copy)"
MI300X_PAGE = "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html (via a quoting copy)"
HOPPER_TUNING = "https://docs.nvidia.com/cuda/hopper-tuning-guide/index.html"
HOPPER_BLOG = "https://developer.nvidia.com/blog/nvidia-hopper-architecture-in-depth/ (Tables 1 and 3)"
H100_WHITEPAPER = "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper v1.04 (via a quoting copy)"
H100_PAGE = "https://www.nvidia.com/en-us/data-center/h100/ (via a quoting copy)"
H200_PAGE = "https://www.nvidia.com/en-us/data-center/h200/ (via a quoting copy)"
CUDA_GUIDE_CC90 = "CUDA C++ Programming Guide, Compute Capability 9.0, Shared Memory"
BLACKWELL_TUNING = "https://docs.nvidia.com/cuda/blackwell-tuning-guide/"
BLACKWELL_DATASHEET = (
    "https://nvdam.widen.net/s/wwnsxrhm2w/blackwell-datasheet-3384703, HGX B200 column (via a quoting copy)"
)
H200_MEASURED = "measured on an NVIDIA H200 (torch.cuda device properties / nvidia-smi), 2026-11"
CUDA_GUIDE_REGISTERS = "CUDA C++ Programming Guide, technical specifications per compute capability: 64K 32-bit registers per SM"
MATRIX_CORES_BLOG = (
    "https://rocm.blogs.amd.com/software-tools-optimization/matrix-cores-cdna/README.html (AMD ROCm blog, "
    "Matrix Core Programming on CDNA3 and CDNA4): on CDNA4 FP6/FP4 matrix math runs at 64x, FP8 at 32x the FP32 rate"
)

SOURCED_FIELDS = (
    "compute_units",
    "memory_gb",
    "hbm_bandwidth_tbs",
    "peak_bf16_tflops",
    "peak_fp16_tflops",
    "peak_fp8_tflops",
    "lds_per_cu_kib",
    "l2_cache_mib",
    "infinity_cache_mib",
    "wavefront_size",
    "max_clock_mhz",
    "xcds",
    "l1_vector_cache_kib",
    "register_file_kib",
    "peak_fp4_tflops",
)


class GpuSpec(BaseModel):
    """Peak capabilities of one GPU product, with a source for every number."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    product_name: str
    vendor: Literal["amd", "nvidia"]
    arch: str
    family: str
    name_patterns: tuple[str, ...]
    """Lower-case substrings of the names drivers report for this product ('mi355x', 'h200')."""
    compute_units: int = Field(gt=0)
    """CUs on AMD, SMs on NVIDIA."""
    memory_gb: float = Field(gt=0)
    memory_type: str
    hbm_bandwidth_tbs: float = Field(gt=0)
    peak_bf16_tflops: float = Field(gt=0)
    peak_fp16_tflops: float = Field(gt=0)
    peak_fp8_tflops: float = Field(gt=0)
    lds_per_cu_kib: float = Field(gt=0)
    """LDS per CU on AMD; the largest shared-memory carve-out per SM on NVIDIA."""
    l2_cache_mib: float = Field(gt=0)
    """Total L2 of the device (on MI300-class parts: 4 MiB per XCD times the XCDs)."""
    infinity_cache_mib: float = Field(ge=0)
    """AMD Infinity Cache (a memory-side last-level cache); 0 where the L2 is the last level."""
    wavefront_size: Literal[32, 64]
    max_clock_mhz: int | None = None
    xcds: int | None = Field(default=None, gt=0)
    """Accelerator complex dies (AMD chiplets, each with its own L2); None on single-die or NVIDIA parts."""
    l1_vector_cache_kib: float | None = Field(default=None, gt=0)
    """L1 vector (data) cache per CU on AMD; None where the vendor quotes L1 only combined with shared memory."""
    register_file_kib: float | None = Field(default=None, gt=0)
    """Vector register file per CU/SM (on CDNA3/CDNA4 the unified file of VGPRs and AccVGPRs)."""
    peak_fp4_tflops: float | None = Field(default=None, gt=0)
    """Dense FP4 (MXFP4) matrix peak; None where the part has no FP4 matrix math or no source states it."""
    notes: str = ""
    sources: dict[str, str]

    @model_validator(mode="after")
    def _every_number_has_a_source(self) -> GpuSpec:
        missing = [f for f in SOURCED_FIELDS if getattr(self, f) is not None and f not in self.sources]
        if missing:
            raise ValueError(f"{self.key}: no source for {', '.join(missing)}")
        return self

    @property
    def last_level_cache_bytes(self) -> int:
        """Everything a cache flush must evict: L2 plus the Infinity Cache where there is one."""
        return int((self.l2_cache_mib + self.infinity_cache_mib) * MIB)

    @property
    def cache_flush_bytes(self) -> int:
        """Size of the buffer written before each timed sample: twice the last-level caches."""
        return 2 * self.last_level_cache_bytes

    @property
    def peak_bandwidth_bytes_per_s(self) -> float:
        return self.hbm_bandwidth_tbs * 1e12

    def peak_flops(self, dtype: str) -> float:
        """Dense matrix peak in FLOP/s for a dtype name; fp32 and others fall back to bf16's rate."""
        table = {"bfloat16": self.peak_bf16_tflops, "float16": self.peak_fp16_tflops}
        if dtype.startswith("float8") or dtype.startswith("fp8"):
            return self.peak_fp8_tflops * 1e12
        return table.get(dtype, self.peak_bf16_tflops) * 1e12


_CDNA_L2 = "4 MiB per XCD x 8 XCDs"

GPU_SPECS: tuple[GpuSpec, ...] = (
    GpuSpec(
        key="mi355x",
        product_name="AMD Instinct MI355X",
        vendor="amd",
        arch="gfx950",
        family="CDNA4",
        name_patterns=("mi355x", "mi355"),
        compute_units=256,
        memory_gb=288,
        memory_type="HBM3E",
        hbm_bandwidth_tbs=8.0,
        peak_bf16_tflops=2516.6,
        peak_fp16_tflops=2516.6,
        peak_fp8_tflops=5033.2,
        lds_per_cu_kib=160,
        l2_cache_mib=32,
        infinity_cache_mib=256,
        wavefront_size=64,
        max_clock_mhz=2400,
        xcds=8,
        l1_vector_cache_kib=32,
        register_file_kib=512,
        peak_fp4_tflops=10066.4,
        notes=f"L2 {_CDNA_L2}; dense rate = 256 CU x 2.4 GHz x 4096 FLOP/clk/CU (CDNA4 whitepaper).",
        sources={
            "compute_units": ROCM_GPU_SPECS + ": 256 (32 per XCD)",
            "memory_gb": MI355X_BROCHURE + ": 288 GB HBM3E",
            "hbm_bandwidth_tbs": MI355X_BROCHURE + ": 8 TB/s peak",
            "peak_bf16_tflops": MI355X_BROCHURE + ": 2.5166 PF dense (5.0332 PF with sparsity)",
            "peak_fp16_tflops": MI355X_BROCHURE + ": 2.5166 PF dense",
            "peak_fp8_tflops": MI355X_BROCHURE + ": 5.0332 PF dense OCP FP8",
            "lds_per_cu_kib": ROCM_GPU_SPECS + ": LDS 160 KiB",
            "l2_cache_mib": ROCM_GPU_SPECS + ": L2 32 MiB (4 per XCD)",
            "infinity_cache_mib": ROCM_GPU_SPECS + ": L3 (Infinity Cache) 256 MiB",
            "wavefront_size": ROCM_GPU_SPECS + ": wavefront 64",
            "max_clock_mhz": MI355X_PAGE + ": peak engine clock 2400 MHz",
            "xcds": ROCM_GPU_SPECS + ": 256 (32 per XCD) CUs, so 8 XCDs",
            "l1_vector_cache_kib": ROCM_GPU_SPECS + ": L1 vector cache 32 KiB",
            "register_file_kib": ROCM_GPU_SPECS + ": VGPR file 512 KiB (per CU)",
            "peak_fp4_tflops": MATRIX_CORES_BLOG + "; 2 x the 5033.2 TF dense FP8 = 10066.4 TF",
        },
    ),
    GpuSpec(
        key="mi350x",
        product_name="AMD Instinct MI350X",
        vendor="amd",
        arch="gfx950",
        family="CDNA4",
        name_patterns=("mi350x", "mi350"),
        compute_units=256,
        memory_gb=288,
        memory_type="HBM3E",
        hbm_bandwidth_tbs=8.0,
        peak_bf16_tflops=2306.9,
        peak_fp16_tflops=2306.9,
        peak_fp8_tflops=4614.0,
        lds_per_cu_kib=160,
        l2_cache_mib=32,
        infinity_cache_mib=256,
        wavefront_size=64,
        max_clock_mhz=2200,
        xcds=8,
        l1_vector_cache_kib=32,
        register_file_kib=512,
        peak_fp4_tflops=9228.0,
        notes=(
            f"L2 {_CDNA_L2}. The brochure prints 2.3096 PF for FP16; 256 CU x 2.2 GHz x 4096 FLOP/clk "
            "gives 2306.9 TF, which also matches its own FP8 figure, so 2306.9 is used."
        ),
        sources={
            "compute_units": ROCM_GPU_SPECS + ": 256 (32 per XCD)",
            "memory_gb": MI350X_PAGE + ": 288 GB HBM3E",
            "hbm_bandwidth_tbs": MI350X_BROCHURE + ": 8 TB/s",
            "peak_bf16_tflops": MI350X_PAGE + ": 2.3 PF dense; 256 x 2.2 GHz x 4096 = 2306.9 TF",
            "peak_fp16_tflops": MI350X_PAGE + ": 2.3 PF dense; 256 x 2.2 GHz x 4096 = 2306.9 TF",
            "peak_fp8_tflops": MI350X_BROCHURE + ": 4.614 PF dense OCP FP8",
            "lds_per_cu_kib": ROCM_GPU_SPECS + ": LDS 160 KiB",
            "l2_cache_mib": ROCM_GPU_SPECS + ": L2 32 MiB (4 per XCD)",
            "infinity_cache_mib": ROCM_GPU_SPECS + ": L3 (Infinity Cache) 256 MiB",
            "wavefront_size": ROCM_GPU_SPECS + ": wavefront 64",
            "max_clock_mhz": MI350X_PAGE + ": peak engine clock 2200 MHz",
            "xcds": ROCM_GPU_SPECS + ": 256 (32 per XCD) CUs, so 8 XCDs",
            "l1_vector_cache_kib": ROCM_GPU_SPECS + ": L1 vector cache 32 KiB",
            "register_file_kib": ROCM_GPU_SPECS + ": VGPR file 512 KiB (per CU)",
            "peak_fp4_tflops": MATRIX_CORES_BLOG + "; 2 x the 4614.0 TF dense FP8 = 9228.0 TF",
        },
    ),
    GpuSpec(
        key="mi325x",
        product_name="AMD Instinct MI325X",
        vendor="amd",
        arch="gfx942",
        family="CDNA3",
        name_patterns=("mi325x", "mi325"),
        compute_units=304,
        memory_gb=256,
        memory_type="HBM3E",
        hbm_bandwidth_tbs=6.0,
        peak_bf16_tflops=1307.4,
        peak_fp16_tflops=1307.4,
        peak_fp8_tflops=2614.9,
        lds_per_cu_kib=64,
        l2_cache_mib=32,
        infinity_cache_mib=256,
        wavefront_size=64,
        max_clock_mhz=2100,
        xcds=8,
        l1_vector_cache_kib=32,
        register_file_kib=512,
        notes=f"L2 {_CDNA_L2}; FP8 in the FNUZ formats.",
        sources={
            "compute_units": ROCM_GPU_SPECS + ": 304 (38 per XCD)",
            "memory_gb": MI325X_DATASHEET + ": 256 GB HBM3E",
            "hbm_bandwidth_tbs": MI325X_DATASHEET + ": 6 TB/s",
            "peak_bf16_tflops": MI325X_DATASHEET + ": 1307.4 TF dense (2614.9 with sparsity)",
            "peak_fp16_tflops": MI325X_DATASHEET + ": 1307.4 TF dense",
            "peak_fp8_tflops": MI325X_DATASHEET + ": 2614.9 TF dense",
            "lds_per_cu_kib": ROCM_GPU_SPECS + ": LDS 64 KiB",
            "l2_cache_mib": ROCM_GPU_SPECS + ": L2 32 MiB (4 per XCD)",
            "infinity_cache_mib": ROCM_GPU_SPECS + ": L3 (Infinity Cache) 256 MiB",
            "wavefront_size": ROCM_GPU_SPECS + ": wavefront 64",
            "max_clock_mhz": MI325X_PAGE + ": peak engine clock 2100 MHz",
            "xcds": ROCM_GPU_SPECS + ": 304 (38 per XCD) CUs, so 8 XCDs",
            "l1_vector_cache_kib": ROCM_GPU_SPECS + ": L1 vector cache 32 KiB",
            "register_file_kib": ROCM_GPU_SPECS + ": VGPR file 512 KiB (per CU)",
        },
    ),
    GpuSpec(
        key="mi300x",
        product_name="AMD Instinct MI300X",
        vendor="amd",
        arch="gfx942",
        family="CDNA3",
        name_patterns=("mi300x",),
        compute_units=304,
        memory_gb=192,
        memory_type="HBM3",
        hbm_bandwidth_tbs=5.3,
        peak_bf16_tflops=1307.4,
        peak_fp16_tflops=1307.4,
        peak_fp8_tflops=2614.9,
        lds_per_cu_kib=64,
        l2_cache_mib=32,
        infinity_cache_mib=256,
        wavefront_size=64,
        max_clock_mhz=2100,
        xcds=8,
        l1_vector_cache_kib=32,
        register_file_kib=512,
        notes=f"L2 {_CDNA_L2}; each XCD has 40 CUs of which 38 are active.",
        sources={
            "compute_units": ROCM_MI300 + ": 8 XCDs for up to 304 CUs",
            "memory_gb": MI300X_PAGE + ": 192 GB HBM3",
            "hbm_bandwidth_tbs": ROCM_MI300 + ": aggregated peak memory bandwidth 5.3 TB/s",
            "peak_bf16_tflops": ROCM_MI300 + ": 1307.4 TF (2048 FLOP/clock/CU)",
            "peak_fp16_tflops": ROCM_MI300 + ": 1307.4 TF",
            "peak_fp8_tflops": ROCM_MI300 + ": 2614.9 TF (4096 FLOP/clock/CU)",
            "lds_per_cu_kib": ROCM_GPU_SPECS + ": LDS 64 KiB",
            "l2_cache_mib": ROCM_GPU_SPECS + ": L2 32 MiB (4 per XCD)",
            "infinity_cache_mib": ROCM_GPU_SPECS + ": L3 (Infinity Cache) 256 MiB",
            "wavefront_size": ROCM_GPU_SPECS + ": wavefront 64",
            "max_clock_mhz": MI300X_PAGE + ": peak engine clock 2100 MHz",
            "xcds": ROCM_MI300 + ": 8 XCDs",
            "l1_vector_cache_kib": ROCM_GPU_SPECS + ": L1 vector cache 32 KiB",
            "register_file_kib": ROCM_GPU_SPECS + ": VGPR file 512 KiB (per CU)",
        },
    ),
    GpuSpec(
        key="h200",
        product_name="NVIDIA H200",
        vendor="nvidia",
        arch="sm_90",
        family="Hopper",
        name_patterns=("h200",),
        compute_units=132,
        memory_gb=141,
        memory_type="HBM3e",
        hbm_bandwidth_tbs=4.8,
        peak_bf16_tflops=989.5,
        peak_fp16_tflops=989.5,
        peak_fp8_tflops=1979.0,
        lds_per_cu_kib=228,
        l2_cache_mib=60,
        infinity_cache_mib=0,
        wavefront_size=32,
        max_clock_mhz=1980,
        register_file_kib=256,
        notes=(
            "Same GH100 die as the H100 SXM5. NVIDIA publishes no H200 L2 size; third-party pages say 50 MB "
            "(the H100's), while the device reports 60 MiB, which is used here so cache flushes are large enough."
        ),
        sources={
            "compute_units": H200_MEASURED + ": 132 multiprocessors",
            "memory_gb": H200_PAGE + ": 141 GB HBM3e",
            "hbm_bandwidth_tbs": H200_PAGE + ": 4.8 TB/s",
            "peak_bf16_tflops": H200_PAGE + ": 1,979 TF with sparsity, halved for dense",
            "peak_fp16_tflops": H200_PAGE + ": 1,979 TF with sparsity, halved for dense",
            "peak_fp8_tflops": H200_PAGE + ": 3,958 TF with sparsity, halved for dense",
            "lds_per_cu_kib": CUDA_GUIDE_CC90 + ": 228 KB per SM (227 KB per block)",
            "l2_cache_mib": H200_MEASURED + ": L2_cache_size 62,914,560 B",
            "infinity_cache_mib": "NVIDIA parts have no memory-side cache beyond L2",
            "wavefront_size": HOPPER_BLOG + ": 32 threads per warp",
            "max_clock_mhz": H200_MEASURED + ": nvidia-smi clocks.max.sm 1980 MHz",
            "register_file_kib": CUDA_GUIDE_REGISTERS + " (compute capability 9.0) x 4 B = 256 KiB",
        },
    ),
    GpuSpec(
        key="h100",
        product_name="NVIDIA H100 SXM5",
        vendor="nvidia",
        arch="sm_90",
        family="Hopper",
        name_patterns=("h100",),
        compute_units=132,
        memory_gb=80,
        memory_type="HBM3",
        hbm_bandwidth_tbs=3.35,
        peak_bf16_tflops=989.4,
        peak_fp16_tflops=989.4,
        peak_fp8_tflops=1978.9,
        lds_per_cu_kib=228,
        l2_cache_mib=50,
        infinity_cache_mib=0,
        wavefront_size=32,
        max_clock_mhz=None,
        register_file_kib=256,
        notes="The PCIe H100 differs (114 SMs, 2 TB/s); this entry is the SXM5 part. No public peak clock.",
        sources={
            "compute_units": HOPPER_BLOG + ": 132 SMs (H100 SXM5)",
            "memory_gb": HOPPER_BLOG + ": 80 GB HBM3",
            "hbm_bandwidth_tbs": H100_PAGE + ": 3.35 TB/s (whitepaper v1.04: 3352 GB/s)",
            "peak_bf16_tflops": H100_WHITEPAPER + ": 989.4 dense / 1978.9 with sparsity",
            "peak_fp16_tflops": H100_WHITEPAPER + ": 989.4 dense",
            "peak_fp8_tflops": H100_WHITEPAPER + ": 1978.9 dense",
            "lds_per_cu_kib": HOPPER_TUNING + ": shared memory capacity per SM is 228 KB",
            "l2_cache_mib": HOPPER_TUNING + ": 50 MB L2 in the H100",
            "infinity_cache_mib": "NVIDIA parts have no memory-side cache beyond L2",
            "wavefront_size": HOPPER_BLOG + ": 32 threads per warp",
            "register_file_kib": CUDA_GUIDE_REGISTERS + " (compute capability 9.0) x 4 B = 256 KiB",
        },
    ),
    GpuSpec(
        key="b200",
        product_name="NVIDIA B200",
        vendor="nvidia",
        arch="sm_100",
        family="Blackwell",
        name_patterns=("b200",),
        compute_units=148,
        memory_gb=180,
        memory_type="HBM3e",
        hbm_bandwidth_tbs=7.7,
        peak_bf16_tflops=2250.0,
        peak_fp16_tflops=2250.0,
        peak_fp8_tflops=4500.0,
        lds_per_cu_kib=228,
        l2_cache_mib=126,
        infinity_cache_mib=0,
        wavefront_size=32,
        max_clock_mhz=None,
        register_file_kib=256,
        notes=(
            "HGX/DGX B200 per GPU. Launch material said up to 192 GB / 8 TB/s; the 2025 datasheet says 180 GB / "
            "7.7 TB/s. The tuning guide's 126 MB L2 sentence names the GB200 GPU. No public peak clock."
        ),
        sources={
            "compute_units": "https://developer.nvidia.com/blog/boost-gpu-memory-performance-with-no-code-changes-"
            "using-nvidia-cuda-mps/ (via a quoting copy): 148 SMs",
            "memory_gb": BLACKWELL_DATASHEET + ": 180 GB HBM3e",
            "hbm_bandwidth_tbs": BLACKWELL_DATASHEET + ": 7.7 TB/s",
            "peak_bf16_tflops": BLACKWELL_DATASHEET + ": 4.5 PF with sparsity, halved for dense",
            "peak_fp16_tflops": BLACKWELL_DATASHEET + ": 4.5 PF with sparsity, halved for dense",
            "peak_fp8_tflops": BLACKWELL_DATASHEET + ": 9 PF with sparsity, halved for dense",
            "lds_per_cu_kib": BLACKWELL_TUNING + ": 228 KB shared memory per SM",
            "l2_cache_mib": BLACKWELL_TUNING + ": 126 MB L2",
            "infinity_cache_mib": "NVIDIA parts have no memory-side cache beyond L2",
            "wavefront_size": "CUDA C++ Programming Guide: warp size 32",
            "register_file_kib": CUDA_GUIDE_REGISTERS + " (compute capability 10.0) x 4 B = 256 KiB",
        },
    ),
)

SPECS_BY_KEY: dict[str, GpuSpec] = {spec.key: spec for spec in GPU_SPECS}

DEFAULT_PRODUCT_FOR_ARCH: dict[str, str] = {"gfx950": "mi355x", "gfx942": "mi300x", "sm_90": "h100", "sm_100": "b200"}
"""An arch names a family of products; this is the one assumed when only the arch is known."""

DEFAULT_TARGET = "gfx950"

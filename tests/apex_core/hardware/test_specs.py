import pytest
from pydantic import ValidationError

from apex_core.hardware.specs import GPU_SPECS, SOURCED_FIELDS, SPECS_BY_KEY, GpuSpec

REQUIRED = {"mi355x", "mi350x", "mi325x", "mi300x", "h200", "h100", "b200"}


def test_the_table_covers_every_required_product():
    assert REQUIRED <= set(SPECS_BY_KEY)


@pytest.mark.parametrize("spec", GPU_SPECS, ids=lambda s: s.key)
def test_every_number_names_its_source(spec: GpuSpec):
    for field in SOURCED_FIELDS:
        if getattr(spec, field) is not None:
            assert spec.sources.get(field), f"{spec.key}.{field} has no source"


def test_a_spec_without_a_source_is_refused():
    data = SPECS_BY_KEY["mi355x"].model_dump()
    del data["sources"]["hbm_bandwidth_tbs"]
    with pytest.raises(ValidationError, match="no source for hbm_bandwidth_tbs"):
        GpuSpec(**data)


def test_mi300_class_parts_flush_l2_plus_infinity_cache_twice():
    for key in ("mi355x", "mi350x", "mi325x", "mi300x"):
        spec = SPECS_BY_KEY[key]
        assert spec.infinity_cache_mib == 256
        assert spec.cache_flush_bytes == 2 * (32 + 256) * 1024**2


def test_nvidia_parts_flush_twice_their_l2():
    assert SPECS_BY_KEY["h200"].cache_flush_bytes == 2 * 60 * 1024**2


def test_known_facts_of_the_primary_target():
    mi355x = SPECS_BY_KEY["mi355x"]
    assert (mi355x.arch, mi355x.compute_units, mi355x.lds_per_cu_kib, mi355x.wavefront_size) == ("gfx950", 256, 160, 64)
    assert mi355x.hbm_bandwidth_tbs == 8.0


def test_peak_flops_picks_the_dtype_rate():
    h100 = SPECS_BY_KEY["h100"]
    assert h100.peak_flops("float8_e4m3fn") == pytest.approx(1978.9e12)
    assert h100.peak_flops("bfloat16") == pytest.approx(989.4e12)


def test_chiplet_parts_split_their_cus_and_l2_evenly_over_the_xcds():
    for spec in GPU_SPECS:
        if spec.xcds is not None:
            assert spec.compute_units % spec.xcds == 0, spec.key
            assert spec.l2_cache_mib / spec.xcds == 4, spec.key  # 4 MiB of L2 per XCD on CDNA3 and CDNA4


def test_cdna_register_file_is_512_registers_of_64_lanes_on_each_of_4_simds():
    for key in ("mi355x", "mi350x", "mi325x", "mi300x"):
        assert SPECS_BY_KEY[key].register_file_kib * 1024 == 4 * 512 * 64 * 4


def test_fp4_runs_at_twice_the_fp8_rate_on_cdna4_and_not_at_all_on_cdna3():
    for key in ("mi355x", "mi350x"):
        spec = SPECS_BY_KEY[key]
        assert spec.peak_fp4_tflops == pytest.approx(2 * spec.peak_fp8_tflops, rel=1e-4)
    assert SPECS_BY_KEY["mi300x"].peak_fp4_tflops is None

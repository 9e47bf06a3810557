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

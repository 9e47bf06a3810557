import pytest

from apex_core.errors import UnknownNameError
from apex_core.hardware.detect import DetectedDevice
from apex_core.hardware.target import resolve_target, spec_for_name

CPU = DetectedDevice(vendor="cpu", product_name="Some CPU")
H200 = DetectedDevice(vendor="nvidia", product_name="NVIDIA H200", arch="sm_90")
MYSTERY = DetectedDevice(vendor="amd", product_name="AMD Radeon Experimental", arch="gfx1250")


def test_without_gpu_or_override_the_target_is_gfx950():
    target = resolve_target(detected=CPU)
    assert target.origin == "default"
    assert target.arch == "gfx950" and target.spec.key == "mi355x"


def test_an_override_wins_over_the_detected_gpu():
    target = resolve_target("gfx942", detected=H200)
    assert target.origin == "override" and target.spec.key == "mi300x"
    assert not target.runs_here


def test_the_detected_gpu_is_matched_by_product_name():
    target = resolve_target(detected=H200)
    assert target.origin == "detected" and target.spec.key == "h200"
    assert target.runs_here


def test_an_unknown_detected_gpu_keeps_its_facts_but_has_no_peak_numbers():
    target = resolve_target(detected=MYSTERY)
    assert target.spec is None and target.arch == "gfx1250"


@pytest.mark.parametrize("name", ["MI355X", "mi-355x", "AMD Instinct MI355X", "gfx950"])
def test_products_and_archs_are_accepted_in_common_spellings(name):
    assert spec_for_name(name).key == "mi355x"


def test_an_unknown_gpu_name_suggests_the_nearest_known_one():
    with pytest.raises(UnknownNameError, match="did you mean 'gfx950'"):
        spec_for_name("gfx905")

from apex_core.docsearch.hardware_facts import SPECS_FILE, hardware_facts
from apex_core.hardware.specs import GPU_SPECS, SOURCED_FIELDS


def test_every_sourced_number_of_every_gpu_is_a_passage_with_its_value_and_its_source():
    facts = {fact.section: fact for fact in hardware_facts()}
    for spec in GPU_SPECS:
        assert spec.product_name in facts[spec.key].text
        for field in SOURCED_FIELDS:
            value = getattr(spec, field)
            if value is None:
                assert f"{spec.key} {field}" not in facts
                continue
            fact = facts[f"{spec.key} {field}"]
            assert (f"{value:g}" if isinstance(value, float) else str(value)) in fact.text
            assert spec.sources[field] in fact.text


def test_a_fact_points_at_the_line_of_specs_py_that_sets_it():
    lines = SPECS_FILE.read_text().splitlines()
    fact = next(f for f in hardware_facts() if f.section == "mi355x lds_per_cu_kib")
    assert lines[fact.line - 1].strip().startswith("lds_per_cu_kib=")
    assert "LDS" in fact.text and "160 KiB" in fact.text

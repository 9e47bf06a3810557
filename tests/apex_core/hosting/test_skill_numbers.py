"""The skills' hardware numbers against the hardware model: every shipped skill passes, and the check bites."""

import re
from pathlib import Path

import pytest

from apex_core.hardware.specs import SPECS_BY_KEY
from apex_core.hosting.skill_numbers import audit_text, check_skill_folder, check_text
from apex_core.hosting.skills import SKILLS_DIR, validate_skill

SKILL_FOLDERS = sorted(p for p in SKILLS_DIR.iterdir() if (p / "SKILL.md").is_file())
SKILL_FILES = sorted(p for folder in SKILL_FOLDERS for p in folder.rglob("*.md"))


def _statuses(text: str) -> list[str]:
    return [f.status for f in audit_text(text)]


@pytest.mark.parametrize("folder", SKILL_FOLDERS, ids=lambda p: p.name)
def test_every_shipped_skill_states_only_numbers_the_model_or_a_cited_source_backs(folder):
    problems = check_skill_folder(folder)
    assert not problems, "\n".join(map(str, problems))


def test_the_shipped_skills_do_state_hardware_numbers_that_get_checked():
    confirmed = [f for path in SKILL_FILES for f in audit_text(path.read_text(), path) if f.status == "confirmed"]
    assert len(confirmed) >= 40, f"only {len(confirmed)} hardware numbers were checked against the model"
    fields = " ".join(f.message for f in confirmed)
    for field in ("compute_units", "lds_per_cu_kib", "hbm_bandwidth_tbs", "l2_cache_mib", "infinity_cache_mib",
                  "wavefront_size", "xcds", "peak_fp8_tflops"):
        assert field in fields, f"no skill number was checked against {field}"


def _mutated(written: str) -> str:
    """The same text with its first number changed to a value no GPU field takes by rounding."""
    number = re.search(r"\d[\d,]*(?:\.\d+)?", written).group(0)
    plain = float(number.replace(",", ""))
    return written.replace(number, f"{plain * 1.37 + 3:.{len(number.split('.')[1]) if '.' in number else 0}f}", 1)


@pytest.mark.parametrize("path", SKILL_FILES, ids=lambda p: str(p.relative_to(SKILLS_DIR)))
def test_changing_any_checked_number_of_a_shipped_skill_is_caught(path):
    text = path.read_text()
    lines = text.splitlines()
    for finding in (f for f in audit_text(text, path) if f.status == "confirmed"):
        line = lines[finding.line - 1]
        if finding.written not in line:
            continue  # a sentence that starts on this line and continues on the next
        changed = "\n".join(lines[: finding.line - 1] + [line.replace(finding.written, _mutated(finding.written), 1)]
                            + lines[finding.line:])
        caught = [p for p in check_text(changed, path) if p.line == finding.line]
        assert caught, f"line {finding.line}: {finding.written!r} changed to {_mutated(finding.written)!r} went unnoticed"


def _skill(tmp_path: Path, body: str, reference: str | None = None) -> Path:
    folder = tmp_path / "demo"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: demo\ndescription: Demonstrates. Use when testing.\n---\n{body}")
    if reference is not None:
        (folder / "references").mkdir()
        (folder / "references" / "facts.md").write_text(reference)
    return folder / "SKILL.md"


def test_a_deliberately_wrong_number_in_a_temporary_skill_fails_its_validation(tmp_path):
    report = validate_skill(_skill(tmp_path, "The MI355X has 128 KiB of LDS per CU.\n"))
    assert any("'128 KiB' contradicts the hardware model (mi355x lds_per_cu_kib = 160)" in p for p in report.problems), report.problems
    assert validate_skill(_skill(tmp_path / "right", "The MI355X has 160 KiB of LDS per CU.\n")).ok


def test_a_wrong_number_in_a_reference_file_fails_too(tmp_path):
    report = validate_skill(_skill(tmp_path, "See [facts](references/facts.md).\n", "MI300X: 5.2 TB/s of HBM3.\n"))
    assert any(p.startswith("references/facts.md:1: '5.2 TB/s'") for p in report.problems), report.problems


@pytest.mark.parametrize("text", [
    "The MI355X has 256 CUs (32 per XCD) and 160 KiB of LDS per CU; the MI300X has 304 CUs and 64 KiB.",
    "MI355X: 8 TB/s of HBM3E, 2.5 PFLOPS dense BF16, 5.0 PFLOPS FP8, 10.1 PFLOPS FP4, 32 MiB of L2 "
    "(4 MiB per XCD) and a 256 MiB Infinity Cache.",
    "On gfx942 the HBM delivers 5.3 TB/s (MI300X) or 6 TB/s (MI325X).",
    "The H100 has 132 SMs, 228 KB of shared memory per SM, 50 MB of L2 and warps of 32 threads.",
    "LDS per CU is 64 KiB on CDNA3 and 160 KiB on CDNA4.",
    "The MI355X's bf16 ridge is about 315 FLOP/byte (4096 FLOP/clk/CU at 2.4 GHz).",
    "The MI355X does 5033.2 TFLOPS FP8 dense and 10,066.4 TFLOPS with sparsity.",
    "A 128x64 bf16 tile takes 16 KiB of LDS.",  # no GPU named: a tile, not a product fact
    "On gfx942 a 256x256x32 bf16 tile takes 32 KiB of LDS per stage.",  # per stage: the kernel's, not the GPU's
    "| quantity | MI300X | MI355X |\n|---|---|---|\n| CUs | 304 (38 per XCD) | 256 (32 per XCD) |\n"
    "| LDS per CU (KiB) | 64 | 160 |\n| HBM | 5.3 TB/s | 8 TB/s |\n| wavefront size | 64 | 64 |",
    "| GPU | CUs | LDS per CU | HBM bandwidth |\n|---|---|---|---|\n| MI300X | 304 | 64 KiB | 5.3 TB/s |\n"
    "| H200 | 132 | 228 KB | 4.8 TB/s |",
])
def test_numbers_the_model_holds_pass_when_right(text):
    assert check_text(text) == [], [str(p) for p in check_text(text)]
    assert "confirmed" in _statuses(text) or "tile" in text


@pytest.mark.parametrize(("text", "written"), [
    ("The MI300X has about 300 CUs.", "300 CUs"),  # rounding is the number's own: 300 is not 304
    ("MI300X HBM bandwidth is 5.2 TB/s.", "5.2 TB/s"),
    ("The MI355X has 300 CUs\nacross its 8 XCDs.", "300 CUs"),  # a sentence over two lines
    ("LDS per CU is 64 KiB on CDNA3 and 64 KiB on CDNA4.", "64 KiB"),
    ("- The H200 runs warps of 64 threads.", "warps of 64 threads"),
    ("The MI355X does 5033.2 TFLOPS FP8 with sparsity.", "5033.2 TFLOPS"),
    ("MI355X: bf16 2.5 PF, FP8 2.5 PF.", "2.5 PF"),
    ("The MI325X has a 128 MiB Infinity Cache.", "128 MiB"),
    ("Each MI300X XCD holds 6 MiB of L2.", "6 MiB"),
    ("| quantity | MI300X | MI355X |\n|---|---|---|\n| LDS per CU (KiB) | 64 | 128 |", "128"),
    ("```\n// MI300X: 96 KiB LDS per CU\n```", "96 KiB"),
    ("The MI300X has 64 KiB of LDS (source: a made-up page) but 300 CUs (source: another).", "300 CUs"),
])
def test_numbers_the_model_holds_fail_when_wrong_whatever_they_cite(text, written):
    problems = check_text(text)
    assert [p.written for p in problems] == [written], [str(p) for p in problems]
    assert "contradicts the hardware model" in problems[0].message


@pytest.mark.parametrize("text", [
    "CDNA3 LDS has 32 banks of 4 bytes.",
    "gfx942 runs up to 8 waves per SIMD.",
    "The MI300X does 163.4 TFLOPS of FP32 matrix math.",
    "The H100's L1 cache holds 256 KB.",  # the model holds no L1 size for NVIDIA parts
])
def test_numbers_the_model_does_not_hold_need_a_citation(text):
    assert _statuses(text) == ["uncited"], _statuses(text)
    for citation in (" (source: CDNA3 ISA guide)", " See https://rocm.docs.amd.com/ for it.",
                     " The CDNA 3 white paper says so."):
        assert _statuses(text + citation) == ["cited"], text + citation


def test_the_model_fields_the_checker_reads_exist_for_the_primary_target():
    mi355x = SPECS_BY_KEY["mi355x"]
    for field in ("compute_units", "xcds", "lds_per_cu_kib", "l1_vector_cache_kib", "register_file_kib",
                  "l2_cache_mib", "infinity_cache_mib", "hbm_bandwidth_tbs", "memory_gb", "peak_bf16_tflops",
                  "peak_fp8_tflops", "peak_fp4_tflops", "max_clock_mhz", "wavefront_size"):
        assert getattr(mi355x, field) is not None, field

from pathlib import Path

import pytest

from apex_core.hosting.skills import SKILLS_DIR, discover_skills, validate_all, validate_skill


def test_every_shipped_skill_is_valid():
    reports = validate_all(SKILLS_DIR)
    assert reports, "no skill ships"
    assert all(r.ok for r in reports), {r.name: r.problems for r in reports if not r.ok}
    assert {s.name for s in discover_skills()} >= {"grade-a-kernel"}


def _skill(tmp_path: Path, folder: str, front: str, body: str = "Do the thing.\n") -> Path:
    path = tmp_path / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}\n---\n{body}")
    return path


GOOD = "name: demo\ndescription: Demonstrates skills. Use when testing."


def test_a_minimal_skill_passes(tmp_path):
    assert validate_skill(_skill(tmp_path, "demo", GOOD)).ok


@pytest.mark.parametrize(("folder", "front", "body", "expected"), [
    ("Demo", "name: Demo\ndescription: Use when testing.", "x\n", "breaks the rule"),
    ("demo-", "name: demo-\ndescription: Use when testing.", "x\n", "breaks the rule"),
    ("a--b", "name: a--b\ndescription: Use when testing.", "x\n", "breaks the rule"),
    ("other", GOOD, "x\n", "differs from its folder"),
    ("demo", "name: demo", "x\n", "'description' is missing"),
    ("demo", "name: demo\ndescription: Demonstrates skills.", "x\n", "say when to use"),
    ("demo", GOOD + "\nversion: 2", "x\n", "unknown front-matter keys ['version']"),
    ("demo", GOOD + "\nmetadata: {a: 1}", "x\n", "'metadata' must map strings"),
    ("demo", GOOD, "", "the body is empty"),
    ("demo", GOOD, "line\n" * 600, "keep it under 500"),
    ("demo", GOOD, "See [the table](references/missing.md).\n", "does not exist"),
    ("demo", GOOD, "Run `scripts/missing.sh`.\n", "does not exist"),
    ("demo", GOOD, "See [outside](../other/SKILL.md).\n", "leaves the skill folder"),
    ("demo", GOOD, "See [abs](/etc/passwd).\n", "is absolute"),
])
def test_each_rule_is_enforced(tmp_path, folder, front, body, expected):
    report = validate_skill(_skill(tmp_path, folder, front, body))
    assert any(expected in problem for problem in report.problems), report.problems


def test_urls_anchors_and_existing_references_are_fine(tmp_path):
    path = _skill(tmp_path, "demo", GOOD, "[a](https://example.com) [b](#top) [c](references/r.md#part) `references/r.md`\n")
    (path.parent / "references").mkdir()
    (path.parent / "references" / "r.md").write_text("r")
    assert validate_skill(path).ok


def test_a_file_without_front_matter_and_a_folder_without_skill_md_are_reported(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "SKILL.md").write_text("# no front matter\n")
    (tmp_path / "empty").mkdir()
    reports = {r.name: r for r in validate_all(tmp_path)}
    assert "no front matter" in reports["plain"].problems[0]
    assert "has no SKILL.md" in reports["empty"].problems[0]

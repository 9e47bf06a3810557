from pathlib import Path

from apex_core.docsearch.corpus import HARDWARE_KEY, PROJECT_ROOT, default_units, file_unit, package_units, units_for_paths
from apex_core.sources.packages import installed_package  # the source index's locator, to agree with


def test_the_default_corpus_has_the_skills_docs_readme_and_hardware_model_and_says_what_is_absent():
    units, skipped = default_units(packages=("triton", "surely_not_a_package"))
    by_key = {unit.key: unit for unit in units}
    assert by_key["README.md"].kind == "doc" and by_key["docs/layers.md"].kind == "doc"
    assert by_key["skills/grade-a-kernel/SKILL.md"].kind == "skill"
    assert by_key[HARDWARE_KEY].source == "apex_core/hardware/specs.py"
    assert "surely_not_a_package docstrings (not installed)" in skipped
    assert all(unit.default for unit in units)


def test_kernel_package_docstrings_are_one_unit_per_public_module():
    if installed_package("triton") is None:
        assert package_units("triton") is None
        return
    units = {unit.key: unit for unit in package_units("triton")}
    assert all(unit.path.is_relative_to(installed_package("triton").root) for unit in units.values())
    assert "triton:triton.language.core" not in units or units["triton:triton.language.core"].module == "triton.language.core"
    assert "triton:triton.runtime.autotuner" in units
    assert not any("._" in key.split(":", 1)[1] for key in units)  # private modules are internals


def test_a_files_kind_follows_from_its_type_and_place(tmp_path):
    (tmp_path / "a.txt").write_text("plain text")
    assert file_unit(tmp_path / "a.txt").kind == "doc"
    assert file_unit(PROJECT_ROOT / "skills" / "README.md").kind == "skill"
    python = file_unit(PROJECT_ROOT / "apex_core" / "docsearch" / "fusion.py")
    assert (python.kind, python.module, python.source) == ("docstring", "apex_core.docsearch.fusion", "apex_core/docsearch/fusion.py")


def test_a_folder_gives_its_supported_files_outside_hidden_and_cache_folders(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "__pycache__").mkdir()
    for name in ("sub/a.md", "b.py", "c.json", ".hidden/d.md", "__pycache__/e.py"):
        (tmp_path / name).write_text("# x\n")
    units, folders = units_for_paths([tmp_path])
    assert sorted(Path(unit.source).name for unit in units) == ["a.md", "b.py"]
    assert folders == [tmp_path.resolve()]

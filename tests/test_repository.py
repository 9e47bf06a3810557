"""Promises the repository makes about itself."""

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    readme = (REPO_ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [line for line in re.findall(r"^(bash setup\.sh.*)$", quick_start, flags=re.M)]


def test_ci_runs_exactly_the_readmes_test_command():
    commands = _readme_commands()
    test_command = next(c for c in commands if "pytest" in c)
    ci_lines = [line for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert test_command in ci_lines


def test_the_readmes_main_command_runs_the_mini_evaluation():
    assert any(c.endswith(".venv/bin/apex eval --dry-run") for c in _readme_commands())


def test_claude_md_imports_agents_md():
    assert (REPO_ROOT / "CLAUDE.md").read_text().strip() == "@AGENTS.md"


def test_the_design_card_layout_exists():
    for path in ("apex_core", "servers", "skills", "docs_index", "tests", ".mcp.json", "CLAUDE.md", "AGENTS.md", "pyproject.toml"):
        assert (REPO_ROOT / path).exists(), path


def test_apex_core_never_imports_mcp():
    for source in (REPO_ROOT / "apex_core").rglob("*.py"):
        text = source.read_text()
        assert not re.search(r"^\s*(from|import)\s+(mcp|fastmcp)\b", text, flags=re.M), source

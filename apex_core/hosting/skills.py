"""Agent Skills shipped in ``skills/``: discovered from their SKILL.md front matter, and validated.

Prompts list only the skills found here, so they can never name one that does not exist. Hosts
are pointed at the same folder (``apex_core.hosting.hosts``), so a skill that breaks the Agent Skills
format (agentskills.io specification) breaks every host at once: ``validate_skill`` checks what
hosts rely on, and a test runs it over every shipped skill.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel

from apex_core.hosting.skill_numbers import check_skill_folder

SKILLS_DIR = Path(__file__).resolve().parents[2] / "skills"

NAME_RULE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
"""1-64 characters: lowercase letters, digits and single hyphens, not at either end."""
ALLOWED_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
MAX_BODY_LINES = 500
"""The specification's budget for the body; details belong in references/ loaded on demand."""
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_PATH_IN_CODE = re.compile(r"`((?:references|scripts|assets)/[^`\s]+)`")


class Skill(BaseModel):
    name: str
    description: str
    path: Path


class SkillReport(BaseModel):
    """What is wrong with one SKILL.md (empty ``problems`` when nothing is)."""

    name: str
    path: Path
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def _split(text: str) -> tuple[str, str] | None:
    if not text.startswith("---\n"):
        return None
    front, separator, body = text[4:].partition("\n---")
    if not separator:
        return None
    return front, body.partition("\n")[2]


def discover_skills(root: Path = SKILLS_DIR) -> list[Skill]:
    skills = []
    for skill_file in sorted(root.glob("*/SKILL.md")):
        parts = _split(skill_file.read_text(encoding="utf-8"))
        if parts is None:
            continue
        try:
            meta = yaml.safe_load(parts[0]) or {}
        except yaml.YAMLError:
            continue
        if isinstance(meta, dict) and meta.get("name") and meta.get("description"):
            skills.append(Skill(name=str(meta["name"]), description=str(meta["description"]), path=skill_file))
    return skills


def _check_front_matter(meta: dict[str, object], folder: str) -> list[str]:
    problems = []
    unknown = sorted(set(meta) - ALLOWED_KEYS)
    if unknown:
        problems.append(f"unknown front-matter keys {unknown}; the format allows {sorted(ALLOWED_KEYS)}")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        problems.append("'name' is missing")
    else:
        if len(name) > 64 or not NAME_RULE.match(name):
            problems.append(f"name {name!r} breaks the rule: 1-64 lowercase letters, digits and single hyphens, "
                            "not starting or ending with a hyphen")
        if name != folder:
            problems.append(f"name {name!r} differs from its folder {folder!r}; hosts find skills by folder")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append("'description' is missing")
    else:
        if len(description) > 1024:
            problems.append(f"description has {len(description)} characters; at most 1024")
        if not re.search(r"\b(use|when)\b", description, flags=re.I):
            problems.append("description should say when to use the skill (e.g. 'Use when ...'): hosts pick skills by it")
    compatibility = meta.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > 500):
        problems.append("'compatibility' must be text of at most 500 characters")
    metadata = meta.get("metadata")
    if metadata is not None and not (isinstance(metadata, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                                        for k, v in metadata.items())):
        problems.append("'metadata' must map strings to strings")
    for key in ("license", "allowed-tools"):
        if key in meta and not isinstance(meta[key], str):
            problems.append(f"'{key}' must be text")
    return problems


def _check_references(body: str, folder: Path) -> list[str]:
    problems = []
    targets = [m.group(1) for m in _LINK.finditer(body)] + [m.group(1) for m in _PATH_IN_CODE.finditer(body)]
    for target in dict.fromkeys(targets):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.I) or target.startswith("#"):
            continue  # URLs, mailto:, in-page anchors
        relative = target.split("#", 1)[0]
        if relative.startswith("/"):
            problems.append(f"reference {target!r} is absolute; use a path relative to the skill folder")
            continue
        resolved = (folder / relative).resolve()
        if folder.resolve() not in (resolved, *resolved.parents):
            problems.append(f"reference {target!r} leaves the skill folder; a skill must be self-contained")
        elif not resolved.exists():
            problems.append(f"reference {target!r} does not exist")
    return problems


def validate_skill(skill_file: Path) -> SkillReport:
    """Check one SKILL.md against the Agent Skills format and our own rules: self-contained, and every
    hardware number in it or its references/ true to the hardware model or backed by a cited source."""
    folder = skill_file.parent
    text = skill_file.read_text(encoding="utf-8")
    parts = _split(text)
    if parts is None:
        return SkillReport(name=folder.name, path=skill_file,
                           problems=["no front matter: SKILL.md must start with '---', YAML, then '---'"])
    front, body = parts
    try:
        meta = yaml.safe_load(front) or {}
    except yaml.YAMLError as error:
        return SkillReport(name=folder.name, path=skill_file, problems=[f"front matter is not YAML: {error}"])
    if not isinstance(meta, dict):
        return SkillReport(name=folder.name, path=skill_file, problems=["front matter is not a mapping"])
    problems = _check_front_matter(meta, folder.name)
    if not body.strip():
        problems.append("the body is empty: it is what the agent reads when the skill applies")
    lines = body.count("\n") + 1
    if lines > MAX_BODY_LINES:
        problems.append(f"the body has {lines} lines; keep it under {MAX_BODY_LINES} and move detail to references/")
    problems += _check_references(body, folder)
    problems += [f"{p.path.relative_to(folder)}:{p.line}: {p.written!r} {p.message}" for p in check_skill_folder(folder)]
    return SkillReport(name=str(meta.get("name") or folder.name), path=skill_file, problems=problems)


def validate_all(root: Path = SKILLS_DIR) -> list[SkillReport]:
    """Every folder under ``root`` is a skill; one without SKILL.md is reported, not skipped."""
    reports = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        skill_file = folder / "SKILL.md"
        if skill_file.is_file():
            reports.append(validate_skill(skill_file))
        else:
            reports.append(SkillReport(name=folder.name, path=skill_file, problems=["the folder has no SKILL.md"]))
    return reports

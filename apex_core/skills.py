"""Agent Skills shipped in ``skills/``: discovered from their SKILL.md front matter.

Prompts list only the skills found here, so they can never name one that does not exist.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel

SKILLS_DIR = Path(__file__).resolve().parent.parent / "skills"


class Skill(BaseModel):
    name: str
    description: str
    path: Path


def discover_skills(root: Path = SKILLS_DIR) -> list[Skill]:
    skills = []
    for skill_file in sorted(root.glob("*/SKILL.md")):
        text = skill_file.read_text(encoding="utf-8")
        if not text.startswith("---"):
            continue
        front, _, _ = text[3:].partition("\n---")
        meta = yaml.safe_load(front) or {}
        if isinstance(meta, dict) and meta.get("name") and meta.get("description"):
            skills.append(Skill(name=str(meta["name"]), description=str(meta["description"]), path=skill_file))
    return skills

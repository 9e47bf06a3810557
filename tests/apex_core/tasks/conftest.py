"""What the scaffold tests share: the shipped task definitions with some tasks taken out, so
`apex tasks new` has to write them again as it would for a model that lacks them."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from apex_core.tasks import catalog
from apex_core.tasks.catalog import DEFINITIONS_DIR, TASK_DIRS_ENV


@pytest.fixture
def definitions_without(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Path]]:
    """``definitions_without("gpt-oss-20b__gemm_mxfp4", ...)``: the catalogue reads a copy of the
    shipped definitions without those tasks (an id, or a glob such as ``*__gemm_mxfp4``); returns an
    empty folder on the catalogue's path for the new definition."""

    def make(*task_ids: str) -> Path:
        shipped = tmp_path / "shipped"
        shutil.copytree(DEFINITIONS_DIR, shipped, ignore=shutil.ignore_patterns(*(f"{t}.toml" for t in task_ids)))
        monkeypatch.setattr(catalog, "DEFINITIONS_DIR", shipped)
        new = tmp_path / "new"
        new.mkdir()
        monkeypatch.setenv(TASK_DIRS_ENV, str(new))
        catalog.clear_cache()
        return new

    yield make
    catalog.clear_cache()

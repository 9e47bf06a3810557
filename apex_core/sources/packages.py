"""Which packages the index reads, and where each is installed, found without importing it.

The inference stack is named once here (``DEFAULT_PACKAGES``). A package that is not installed is
skipped, not an error: vLLM, SGLang and aiter exist only on some machines. Locating a package
uses ``importlib.util.find_spec`` on the top-level name, which finds the directory without running
the package's ``__init__``; the version comes from the installed distribution's metadata.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

DEFAULT_PACKAGES: tuple[str, ...] = ("torch", "triton", "transformers", "liger_kernel", "fla", "vllm", "sglang", "aiter")
"""Top-level import names of the inference stack whose kernels the identifier can point at."""


class PackageSource(BaseModel):
    """One package to index: its import name, installed version and source directory."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str
    root: Path


@lru_cache(maxsize=1)
def _distributions_by_top_level() -> dict[str, list[str]]:
    return {name: list(dists) for name, dists in importlib.metadata.packages_distributions().items()}


def package_version(name: str) -> str:
    """The installed distribution's version for import name ``name`` ('unknown' if it has none)."""
    for dist in _distributions_by_top_level().get(name, []) + [name, name.replace("_", "-")]:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def installed_package(name: str) -> PackageSource | None:
    """Where import name ``name`` lives on this machine, or None when it is not installed."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
    elif spec.origin and spec.origin not in ("built-in", "frozen"):
        root = Path(spec.origin)  # a single-module distribution: the index reads just this file
    else:
        return None
    return PackageSource(name=name, version=package_version(name), root=root.resolve())


def installed_packages(names: tuple[str, ...] | list[str] = DEFAULT_PACKAGES) -> tuple[list[PackageSource], list[str]]:
    """The installed ones of ``names`` and the names that were skipped as absent."""
    found: list[PackageSource] = []
    skipped: list[str] = []
    for name in names:
        package = installed_package(name)
        if package is None:
            skipped.append(name)
        else:
            found.append(package)
    return found, skipped

"""The source index: every kernel of the indexed packages, built incrementally and cached on disk.

Why a cache: torch alone has thousands of Python files, and the identifier, the source explorer
(issue 16) and the patcher all ask the index, often in separate processes. Each package's entries
are one JSON file under ``<cache dir>/sources/``, named by the package, its version and a hash of
its directory. Reading it again costs a ``stat`` per file: a file whose modification time and size
are unchanged keeps its entries, a changed, new or removed file is read again or dropped. A new
version of a package has another key, so it is scanned from scratch, and the older version's file
is removed. A cache file that cannot be read is ignored and rewritten, never trusted in part.

What is read: Python files for Triton kernels (``triton_scan``) and C++ sources and headers
(``SOURCE_SUFFIXES``) for HIP/CUDA ``__global__`` kernels (``cpp_scan``). A file that cannot hold
device code (no ``__global__``, ``<<<`` or ``LaunchKernel``) is read but not scanned, and kept in
the cache by its fingerprint like any other file. torch ships about 9,400 headers under
``torch/include``; 7,048 of them are ``ATen/ops``, generated operator declarations that never hold
device code, and that directory is skipped (``SKIPPED_SUBTREES``): reading it doubled the C++
part of a cold build and made the warm one three to four times slower, for nothing
(docs/identify.md has the figures).

Besides the installed packages, ``build_index`` indexes the source checkouts
(``packages.source_checkouts``: ``checkout:<name>``, versioned by git commit) unless told not to.

Links: a linked folder is never entered, and a linked file is indexed only when it really lies
inside the package's tree; every file is read through ``real_paths``, which checks where it really
is. Otherwise a ``.py`` linked to a file elsewhere would put that file's text (a kernel's name, a
launch's arguments) into the index, and from there into the explorer's answers.
"""

from __future__ import annotations

import hashlib
import os
import re
from stat import S_ISREG
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from apex_core.storage import cache_root as default_cache_dir
from apex_core.sources.cpp_scan import scan_cpp_source
from apex_core.sources.names import demangle, kernel_name_candidates, qualified_function_name
from apex_core.sources.packages import DEFAULT_PACKAGES, PackageSource, installed_packages, source_checkouts
from apex_core.sources.real_paths import is_inside, read_text_inside, real_root
from apex_core.sources.symbols import LaunchSite, SourceSymbol, SymbolLanguage
from apex_core.sources.triton_scan import might_define_triton_kernels, scan_python_source
from apex_core.storage import atomic_write_text

CACHE_FORMAT = 2
"""2: C++ files and the C++ fields of symbols and launch sites (format 1 cached Python only)."""
PYTHON_SUFFIXES = (".py",)
CPP_SUFFIXES = (".cu", ".cuh", ".hip", ".h", ".hpp", ".cpp", ".cc", ".cxx")
SOURCE_SUFFIXES = PYTHON_SUFFIXES + CPP_SUFFIXES
SKIPPED_DIRS = frozenset({"__pycache__", ".git", "node_modules"})
SKIPPED_SUBTREES = frozenset({("ATen", "ops")})
"""Directories (by their last path parts) that cannot hold kernels: torch's ``include/ATen/ops``
is 7,048 generated operator declaration headers (``*_ops.h``, ``*_native.h``, ``*_dispatch.h``)
without a ``__global__``, ``<<<`` or launch call; reading them cost most of the C++ part of a
cold build and tripled the size of torch's cache file."""


class FileEntry(BaseModel):
    """One file's fingerprint and what it defines and launches."""

    mtime_ns: int
    size: int
    kernels: list[SourceSymbol] = Field(default_factory=list)
    launches: list[LaunchSite] = Field(default_factory=list)


class PackageIndex(BaseModel):
    """The cached index of one installed package version."""

    format: int = CACHE_FORMAT
    package: str
    version: str
    root: str
    files: dict[str, FileEntry] = Field(default_factory=dict)
    rescanned: int = Field(default=0, exclude=True, description="files read in this build (0 = all from cache)")

    def symbols(self) -> list[SourceSymbol]:
        """Kernels with their launch sites attached (launches may be in other files of the package)."""
        launches: dict[str, list[LaunchSite]] = {}
        for entry in self.files.values():
            for launch in entry.launches:
                launches.setdefault(launch.kernel, []).append(launch)
        return [
            symbol.model_copy(update={"launch_sites": tuple(launches.get(symbol.name, ()))})
            for entry in self.files.values()
            for symbol in entry.kernels
        ]


def _source_files(root: Path) -> Iterator[Path]:
    """The source files of a tree, in path order: regular files, and links to regular files that
    really lie inside the tree; linked folders are not entered (``os.walk`` does not follow them)."""
    if root.is_file():
        yield root
        return
    inside = real_root(root)
    for directory, subdirs, files in os.walk(root):
        parent = Path(directory).name
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and (parent, d) not in SKIPPED_SUBTREES)
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                path = Path(directory, name)
                if not path.is_symlink() or (is_inside(os.path.realpath(path), inside) and path.is_file()):
                    yield path


def _module_name(package: PackageSource, relative: str) -> str:
    """The dotted module of a Python file; in a checkout, its path from the checkout's root
    (``aiter/ops/triton/rmsnorm.py`` gives ``aiter.ops.triton.rmsnorm``)."""
    if package.root.is_file():
        return package.name
    parts = [*([] if package.kind == "checkout" else [package.name]), *Path(relative).with_suffix("").parts]
    if len(parts) > 1 and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _read(path: Path, root: str) -> str | None:
    """The text of ``path`` if it really lies inside ``root`` (a real root) and can be read."""
    try:
        return read_text_inside(path, root)
    except OSError:
        return None


def _scan_file(package: PackageSource, path: Path, relative: str, stat: os.stat_result, text: str | None = None) -> FileEntry:
    """One file's entry: Triton kernels of a .py file, HIP/CUDA kernels of a C++ file."""
    text = _read(path, real_root(package.root)) if text is None else text
    if text is None:
        return FileEntry(mtime_ns=stat.st_mtime_ns, size=stat.st_size)
    if path.suffix in PYTHON_SUFFIXES:
        kernels, launches = _python_symbols(package, path, relative, text)
    else:
        kernels, launches = _cpp_symbols(package, path, relative, text)
    return FileEntry(mtime_ns=stat.st_mtime_ns, size=stat.st_size, kernels=kernels, launches=launches)


def _python_symbols(package: PackageSource, path: Path, relative: str, text: str) -> tuple[list[SourceSymbol], list[LaunchSite]]:
    module = _module_name(package, relative)
    found = scan_python_source(text, module)
    kernels = [
        SourceSymbol(
            name=k.name, language="triton", package=package.name, version=package.version, module=module,
            path=str(path), line=k.line, end_line=k.end_line, decorators=k.decorators,
        )
        for k in found.kernels
    ]
    launches = [LaunchSite(kernel=x.kernel, launcher=x.launcher, path=str(path), line=x.line, arguments=x.arguments) for x in found.launches]
    return kernels, launches


def _cpp_symbols(package: PackageSource, path: Path, relative: str, text: str) -> tuple[list[SourceSymbol], list[LaunchSite]]:
    found = scan_cpp_source(text, path.suffix, relative)
    kernels = [
        SourceSymbol(
            name=k.name, language=found.language, package=package.name, version=package.version,
            namespace=k.namespace or None, path=str(path), line=k.line, end_line=k.end_line, decorators=k.decorators,
            template_parameters=k.template_parameters, parameters=k.parameters,
        )
        for k in found.kernels
    ]
    launches = [
        LaunchSite(kernel=x.kernel, launcher=x.launcher, path=str(path), line=x.line, arguments=x.arguments,
                   configuration=x.configuration)
        for x in found.launches
    ]
    return kernels, launches


def cache_path(cache_dir: Path, package: PackageSource) -> Path:
    """``<cache>/sources/<name>-<version>-<hash of root>.json``: the key of one package version."""
    digest = hashlib.sha256(str(package.root).encode()).hexdigest()[:10]
    return cache_dir / "sources" / f"{_safe(package.name)}-{_safe(package.version)}-{digest}.json"


def _safe(text: str) -> str:
    """A name or version as a file name part (``checkout:aiter`` gives ``checkout_aiter``)."""
    return "".join(c if c.isalnum() or c in ".+-_" else "_" for c in text)


def _read_cache(path: Path, package: PackageSource) -> PackageIndex | None:
    try:
        cached = PackageIndex.model_validate_json(path.read_bytes())
    except (OSError, ValueError, ValidationError):
        return None
    if cached.format != CACHE_FORMAT or cached.package != package.name or cached.version != package.version or cached.root != str(package.root):
        return None
    return cached


def _write_cache(path: Path, index: PackageIndex) -> None:
    """Atomic write, then removal of other versions' files of the same package and root."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, index.model_dump_json(), durable=False)  # a lost entry is indexed again
    root_digest = path.stem.rsplit("-", 1)[-1]
    for other in path.parent.glob(f"{_safe(index.package)}-*-{root_digest}.json"):
        if other != path:
            other.unlink(missing_ok=True)


def index_package(package: PackageSource, cache_dir: Path) -> PackageIndex:
    """The package's index, reusing the cached entries of files that have not changed."""
    path = cache_path(cache_dir, package)
    cached = _read_cache(path, package)
    previous = cached.files if cached else {}
    files: dict[str, FileEntry] = {}
    rescanned = 0
    launch_only: list[tuple[Path, str, os.stat_result, str]] = []
    inside = real_root(package.root)
    for file in _source_files(package.root):
        relative = file.name if package.root.is_file() else file.relative_to(package.root).as_posix()
        try:
            stat = file.stat()
        except OSError:
            continue
        if not S_ISREG(stat.st_mode):
            continue  # a FIFO or a device under a source file's name: nothing to read, and reading a FIFO waits for ever
        old = previous.get(relative)
        if old is not None and old.mtime_ns == stat.st_mtime_ns and old.size == stat.st_size:
            files[relative] = old
            continue
        rescanned += 1
        text = _read(file, inside)
        if text is not None and file.suffix in PYTHON_SUFFIXES and not might_define_triton_kernels(text):
            launch_only.append((file, relative, stat, text))  # at most launches: decided once the kernels are known
        else:
            files[relative] = _scan_file(package, file, relative, stat, text)
    # A Python file that cannot define a Triton kernel is parsed only when it names one of the
    # package's kernels before a '[': most of transformers and torch is never parsed at all.
    launched = _kernel_subscript_pattern({k.name for entry in files.values() for k in entry.kernels if not k.is_cpp})
    for file, relative, stat, text in launch_only:
        if launched is not None and launched.search(text):
            files[relative] = _scan_file(package, file, relative, stat, text)
        else:
            files[relative] = FileEntry(mtime_ns=stat.st_mtime_ns, size=stat.st_size)
    index = PackageIndex(package=package.name, version=package.version, root=str(package.root), files=files, rescanned=rescanned)
    if cached is None or rescanned or set(files) != set(previous):
        try:
            _write_cache(path, index)
        except OSError:
            pass  # a read-only cache directory costs speed, not correctness
    return index


def _kernel_subscript_pattern(names: set[str]) -> re.Pattern[str] | None:
    """``name[`` for any of ``names`` (a launch is ``kernel[grid](...)``); None when there are none."""
    if not names:
        return None
    return re.compile(r"\b(?:" + "|".join(re.escape(n) for n in sorted(names)) + r")\s*\[")


class SourceIndex:
    """All kernels of a set of packages, looked up by the names profilers show."""

    def __init__(self, packages: Iterable[PackageIndex], skipped: Iterable[str] = ()) -> None:
        self.packages = list(packages)
        self.skipped = list(skipped)
        self.symbols: list[SourceSymbol] = [s for p in self.packages for s in p.symbols()]
        self._by_name: dict[str, list[SourceSymbol]] = {}
        order = {p.package: i for i, p in enumerate(self.packages)}
        for symbol in sorted(self.symbols, key=lambda s: (_preference(s), order[s.package], s.path, s.line)):
            self._by_name.setdefault(symbol.name, []).append(symbol)

    def kernels_named(self, name: str, languages: Collection[SymbolLanguage] | None = None) -> list[SourceSymbol]:
        """Every kernel defined under exactly ``name``, the likeliest first. A C++-qualified name
        (``at::native::reduce_kernel``, or just ``native::reduce_kernel``) matches C++ kernels in
        those namespaces. ``languages`` keeps only kernels of those languages."""
        name = name.strip()
        if "::" in name:
            found = [s for s in self._by_name.get(name.rsplit("::", 1)[-1], ()) if s.is_cpp and _qualifies(s, name)]
        else:
            found = list(self._by_name.get(name, ()))
        return [s for s in found if languages is None or s.language in languages]

    def find_kernels(self, profiler_name: str, languages: Collection[SymbolLanguage] | None = None) -> list[SourceSymbol]:
        """Kernels a profiler's kernel name may denote: the exact name first, then the function
        of a (mangled or demangled) C++ signature, then with Triton's suffixes removed. Of C++
        kernels sharing a name, those in the signature's namespaces come first."""
        readable = demangle(profiler_name.strip())
        qualified = qualified_function_name(readable)
        for candidate in kernel_name_candidates(readable):
            found = self.kernels_named(candidate, languages)
            if found:
                if "::" in qualified:
                    found.sort(key=lambda s: not _qualifies(s, qualified))  # stable: the order otherwise kept
                return found
        return []

    def find_kernel(self, profiler_name: str, languages: Collection[SymbolLanguage] | None = None) -> SourceSymbol | None:
        """The likeliest source of ``profiler_name``, or None for a kernel with no indexed source."""
        found = self.find_kernels(profiler_name, languages)
        return found[0] if found else None


def _qualifies(symbol: SourceSymbol, written: str) -> bool:
    """Whether ``written`` (``native::k`` or ``at::native::k``) names the C++ kernel ``symbol``."""
    full = symbol.qualified_name
    return full == written or full.endswith("::" + written)


def _preference(symbol: SourceSymbol) -> int:
    """Main code before vendor backends, tests and examples, where one name is defined twice."""
    parts = set(Path(symbol.path).parts)
    return 1 if parts & {"backends", "tests", "test", "testing", "examples", "benchmarks", "_internal"} else 0


SOURCE_CACHE_ENV = "APEX_SOURCE_CACHE_DIR"


def source_cache_dir() -> Path:
    """Where the index is cached: ``$APEX_SOURCE_CACHE_DIR``, else Apex's cache directory.

    A variable of its own because the index describes the installed packages, not any grading:
    test sessions and CI jobs share one built index (a cold build reads every file of torch and
    transformers) while each test keeps a private grade cache under ``APEX_CACHE_DIR``.
    """
    chosen = os.environ.get(SOURCE_CACHE_ENV)
    return Path(chosen).expanduser() if chosen else default_cache_dir()


def build_index(
    packages: Iterable[PackageSource] | None = None,
    cache_dir: Path | None = None,
    names: tuple[str, ...] | list[str] = DEFAULT_PACKAGES,
    checkouts: bool = True,
) -> SourceIndex:
    """The index of ``packages``, cached under ``cache_dir``. By default: the installed ones of
    ``names`` and, unless ``checkouts`` is False, the source checkouts (``source_checkouts``);
    an explicit ``packages`` list is indexed as given."""
    if cache_dir is None:
        cache_dir = source_cache_dir()
    skipped: list[str] = []
    if packages is None:
        found, skipped = installed_packages(names)
        packages = [*found, *(source_checkouts() if checkouts else [])]
    return SourceIndex([index_package(p, cache_dir) for p in packages], skipped)


def index_summary(index: SourceIndex) -> dict[str, object]:
    """Counts per package, for logs and the CLI: what was indexed and what was skipped."""
    return {
        "packages": [
            {"package": p.package, "version": p.version, "files": len(p.files), "kernels": sum(len(f.kernels) for f in p.files.values()),
             "languages": dict(Counter(k.language for f in p.files.values() for k in f.kernels)), "rescanned": p.rescanned}
            for p in index.packages
        ],
        "skipped": index.skipped,
    }



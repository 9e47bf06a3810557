"""Source checkouts are indexed as packages named checkout:<folder>, versioned by their git commit."""

import shutil
import subprocess
from pathlib import Path

import pytest

from apex_core.sources import build_index, index_package
from apex_core.sources.index import cache_path
from apex_core.sources.packages import CHECKOUTS_ENV, UNVERSIONED, git_commit, source_checkouts

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

KERNEL_HIP = '''#include <hip/hip_runtime.h>
namespace demo {
__global__ void vector_add_kernel(float* c, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
void vector_add(float* c, const float* a, const float* b, int n) {
  hipLaunchKernelGGL(vector_add_kernel, dim3((n + 255) / 256), dim3(256), 0, 0, c, a, b, n);
}
}  // namespace demo
'''


def git(folder: Path, *arguments: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), "-c", "user.name=apex-test", "-c", "user.email=apex-test@example.com",
                           "-c", "commit.gpgsign=false", *arguments], capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.strip()


@pytest.fixture
def checkouts(tmp_path: Path) -> Path:
    """A checkouts folder holding one git repository with a HIP example and one plain folder."""
    root = tmp_path / "sources"
    repo = root / "rocm-examples"
    (repo / "HIP-Basic" / "vector_add").mkdir(parents=True)
    (repo / "HIP-Basic" / "vector_add" / "main.hip").write_text(KERNEL_HIP)
    git(repo, "init", "-q", "-b", "develop")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "vector add")
    (root / "copied-by-hand" / "src").mkdir(parents=True)
    (root / ".aiter.partial").mkdir()  # a clone in progress
    return root


def test_each_checkout_is_a_package_versioned_by_its_commit_and_hidden_folders_are_left_out(checkouts):
    found = source_checkouts(checkouts)
    assert [(p.name, p.kind) for p in found] == [("checkout:copied-by-hand", "checkout"), ("checkout:rocm-examples", "checkout")]
    assert found[0].version == UNVERSIONED
    assert found[1].version == git(checkouts / "rocm-examples", "rev-parse", "HEAD")
    assert found[1].root == (checkouts / "rocm-examples").resolve()


def test_a_checkouts_hip_kernel_is_indexed_with_the_commit_as_its_version_and_its_launch(checkouts, tmp_path):
    (package,) = [p for p in source_checkouts(checkouts) if p.name == "checkout:rocm-examples"]
    index = build_index([package], cache_dir=tmp_path / "cache")
    kernel = index.find_kernel("_ZN4demo17vector_add_kernelEPfPKfS2_i")  # demo::vector_add_kernel(float*, float const*, float const*, int)
    assert kernel is not None
    assert (kernel.package, kernel.version, kernel.language) == ("checkout:rocm-examples", package.version, "hip")
    assert kernel.launchers == ("demo::vector_add",)


def test_a_new_commit_rekeys_the_checkouts_cache_and_the_old_file_is_removed(checkouts, tmp_path):
    cache, repo = tmp_path / "cache", checkouts / "rocm-examples"
    (before,) = [p for p in source_checkouts(checkouts) if p.name == "checkout:rocm-examples"]
    assert index_package(before, cache).rescanned == 1
    (repo / "README.md").write_text("# examples\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "readme")
    (after,) = [p for p in source_checkouts(checkouts) if p.name == "checkout:rocm-examples"]
    assert after.version != before.version
    assert index_package(after, cache).rescanned == 1  # a new version: scanned from scratch
    assert cache_path(cache, after).exists() and not cache_path(cache, before).exists()
    assert cache_path(cache, after).name.startswith("checkout_rocm-examples-")


def test_the_commit_is_read_from_packed_refs_and_from_a_detached_head(checkouts):
    repo = checkouts / "rocm-examples"
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "develop").exists()
    assert git_commit(repo) == head
    git(repo, "checkout", "-q", "--detach")
    assert git_commit(repo) == head
    assert git_commit(checkouts / "copied-by-hand") is None


def test_the_environment_variable_points_to_another_checkouts_folder_and_build_index_includes_it(checkouts, tmp_path, monkeypatch):
    monkeypatch.setenv(CHECKOUTS_ENV, str(checkouts))
    assert [p.name for p in source_checkouts()] == ["checkout:copied-by-hand", "checkout:rocm-examples"]
    with_checkouts = build_index(cache_dir=tmp_path / "cache", names=["no_such_package_apex"])
    assert [p.package for p in with_checkouts.packages] == ["checkout:copied-by-hand", "checkout:rocm-examples"]
    assert with_checkouts.find_kernel("vector_add_kernel") is not None
    without = build_index(cache_dir=tmp_path / "cache", names=["no_such_package_apex"], checkouts=False)
    assert without.packages == [] and without.skipped == ["no_such_package_apex"]


def test_a_missing_checkouts_folder_means_no_checkouts(tmp_path):
    assert source_checkouts(tmp_path / "never-downloaded") == []


def test_a_checkout_folder_linking_outside_is_left_out_and_nothing_under_its_target_can_be_read_or_grepped(
        checkouts, tmp_path, monkeypatch, caplog):
    from apex_core.errors import ApexUserError
    from apex_core.sources.explorer import SourceExplorer

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN PRIVATE KEY----- hunter2\n")
    (home / "notes.py").write_text("TOKEN = 'hunter2'\n")
    (checkouts / "evil").symlink_to(home, target_is_directory=True)
    (checkouts / "examples-alias").symlink_to(checkouts / "rocm-examples", target_is_directory=True)  # stays inside: kept
    monkeypatch.setenv(CHECKOUTS_ENV, str(checkouts))
    with caplog.at_level("WARNING"):
        names = [p.name for p in source_checkouts()]
    assert names == ["checkout:copied-by-hand", "checkout:examples-alias", "checkout:rocm-examples"]
    assert "evil is left out: it is a link to" in caplog.text
    explorer = SourceExplorer(build_index(cache_dir=tmp_path / "cache", names=["no_such_package_apex"]))
    assert explorer.grep("hunter2").hits == []
    for location in (checkouts / "evil" / "notes.py", checkouts / "evil" / ".ssh" / "id_rsa", home / "notes.py"):
        with pytest.raises(ApexUserError, match="outside the indexed sources"):
            explorer.show(f"{location}:1")
    with pytest.raises(ApexUserError, match="'checkout:evil' is not indexed here"):
        explorer.grep("hunter2", package="checkout:evil")
    assert explorer.show("demo::vector_add_kernel").package in {"checkout:examples-alias", "checkout:rocm-examples"}

"""The checkouts manifest is valid, and fetching clones sparse folders or reports why it could not.

GitHub is not reachable from the machines these tests were written on, so the clone path is tested
against a local repository served over file://, which takes the same git commands.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from apex_core.errors import ApexUserError
from apex_core.sources.checkouts import CheckoutSource, fetch_checkouts, main, read_checkouts
from apex_core.sources.packages import source_checkouts

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def test_the_shipped_manifest_lists_public_rocm_repositories_with_sparse_folders():
    entries = read_checkouts()
    assert {"aiter", "rocm-examples", "composable_kernel"} <= {e.name for e in entries}
    assert all(e.url.startswith("https://github.com/ROCm/") and e.what for e in entries)
    assert next(e for e in entries if e.name == "aiter").sparse == ("csrc/kernels", "csrc/include", "aiter/ops/triton")


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[[checkout]]\nname = "a/b"\nurl = "https://x.org/r"\nwhat = "w"\n', "plain folder name"),
        ('[[checkout]]\nname = "a"\nurl = "http://x.org/r"\nwhat = "w"\n', "neither an https nor a file URL"),
        ('[[checkout]]\nname = "a"\nurl = "https://x.org/r"\nwhat = "w"\nsparse = ["../up"]\n', "inside the repository"),
        ('[[checkout]]\nname = "a"\nurl = "https://x.org/r"\nwhat = "w"\n[[checkout]]\nname = "a"\nurl = "https://x.org/s"\nwhat = "w"\n',
         "share a folder name"),
    ],
)
def test_a_malformed_manifest_is_a_one_line_user_error(tmp_path, toml, message):
    manifest = tmp_path / "checkouts.toml"
    manifest.write_text(toml)
    with pytest.raises(ApexUserError, match=message) as error:
        read_checkouts(manifest)
    assert "\n" not in str(error.value)


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    """A repository with a kernels folder and a large folder nobody asked for, served over file://."""
    repo = tmp_path / "upstream"
    (repo / "csrc" / "kernels").mkdir(parents=True)
    (repo / "csrc" / "kernels" / "silu.hip").write_text("__global__ void silu_kernel(float* x) { x[0] = 0; }\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "big.md").write_text("not wanted\n")
    for arguments in (["init", "-q", "-b", "main"], ["config", "uploadpack.allowFilter", "true"], ["add", "."],
                      ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "kernels"]):
        subprocess.run(["git", "-C", str(repo), *arguments], check=True, capture_output=True, timeout=60)
    return repo


@needs_git
def test_a_sparse_shallow_clone_brings_only_the_asked_folders_and_is_indexed_as_a_checkout(upstream, tmp_path):
    folder = tmp_path / "sources"
    entry = CheckoutSource(name="kernels-demo", url=upstream.as_uri(), what="demo", sparse=("csrc/kernels",))
    report = fetch_checkouts([entry], folder)
    assert (report.cloned, report.failed) == (["kernels-demo"], {})
    assert (folder / "kernels-demo" / "csrc" / "kernels" / "silu.hip").is_file()
    assert not (folder / "kernels-demo" / "docs").exists()
    assert [p.name for p in folder.iterdir()] == ["kernels-demo"]  # no temporary folder left behind
    (checkout,) = source_checkouts(folder)
    head = subprocess.run(["git", "-C", str(upstream), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert (checkout.name, checkout.version) == ("checkout:kernels-demo", head)
    assert fetch_checkouts([entry], folder).present == ["kernels-demo"]


@needs_git
def test_an_unreachable_repository_is_reported_and_leaves_nothing_behind(tmp_path):
    folder = tmp_path / "sources"
    missing = CheckoutSource(name="gone", url=(tmp_path / "no-such-repo").as_uri(), what="missing")
    report = fetch_checkouts([missing], folder)
    assert report.cloned == [] and "gone" in report.failed and report.failed["gone"]
    assert not folder.exists() or list(folder.iterdir()) == []


def test_without_git_every_entry_is_skipped_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    entry = CheckoutSource(name="aiter", url="https://github.com/ROCm/aiter", what="w")
    assert fetch_checkouts([entry], tmp_path).failed == {"aiter": "git is not installed"}


def test_skip_downloads_clones_nothing_and_says_so(tmp_path, capsys):
    assert main(["--skip-downloads", "--folder", str(tmp_path)]) == 0
    assert "downloads skipped (--skip-downloads)" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_a_checkout_name_taken_by_a_link_to_a_place_outside_is_reported_not_counted_as_present(tmp_path):
    folder, home = tmp_path / "sources", tmp_path / "home"
    folder.mkdir()
    home.mkdir()
    (folder / "aiter").symlink_to(home, target_is_directory=True)
    entry = CheckoutSource(name="aiter", url="https://github.com/ROCm/aiter", what="w")
    report = fetch_checkouts([entry], folder)
    assert report.present == [] and report.cloned == []
    assert report.failed["aiter"] == (f"{folder / 'aiter'} is a link to {home}, outside {folder}, so the index leaves it out; "
                                      "remove the link and run again")

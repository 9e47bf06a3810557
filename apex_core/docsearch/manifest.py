"""The PDF manifest (``docs_index/manifest.toml``) and fetching its documents into ``docs_index/pdfs/``.

Each entry is a public AMD document with the file name it is stored under (the last part of its
URL, so two documents never share a file). Fetching is for machines with a network: a document
already present is left alone, one that cannot be fetched is reported and skipped, and a download
is kept only when it is a PDF (a login or error page is not), written under a temporary name and
renamed when complete. Nothing else in the documentation search touches the network.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from apex_core.docsearch.corpus import DOCS_INDEX_DIR, PDF_DIR
from apex_core.manifests import read_entries
from apex_core.progress import Progress, reporter


MANIFEST_FILE = DOCS_INDEX_DIR / "manifest.toml"


class PdfSource(BaseModel):
    """One public document: its file name, URL, what it is, and whether it was fetched where the
    manifest was written."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    url: str
    what: str
    fetched_here: bool = False

    @field_validator("url")
    @classmethod
    def _https(cls, url: str) -> str:
        if urlparse(url).scheme != "https":
            raise ValueError(f"{url!r} is not an https URL")
        return url

    @model_validator(mode="after")
    def _own_file_name(self) -> PdfSource:
        if self.name != PurePosixPath(urlparse(self.url).path).name or not self.name.endswith(".pdf"):
            raise ValueError(f"name {self.name!r} must be the .pdf file name that ends its URL")
        return self


class FetchReport(BaseModel):
    fetched: list[str] = []
    present: list[str] = []
    failed: dict[str, str] = {}


def read_manifest(path: Path = MANIFEST_FILE) -> list[PdfSource]:
    """The manifest's entries; a malformed manifest is a user error naming the file."""
    return read_entries(path, "pdf", PdfSource, what="PDF", help_hint="see docs_index/README.md", unique="file name")


def fetch_pdfs(entries: list[PdfSource], folder: Path = PDF_DIR, timeout_s: float = 60.0,
               progress: Progress | None = None) -> FetchReport:
    """Download the entries not yet in ``folder``; never raises for a network failure."""
    say = reporter(progress)
    folder.mkdir(parents=True, exist_ok=True)
    report = FetchReport()
    for number, entry in enumerate(entries):
        target = folder / entry.name
        if target.is_file() and target.stat().st_size > 0:
            report.present.append(entry.name)
            continue
        say(number / max(len(entries), 1), f"fetching {entry.name}")
        partial = target.with_name(target.name + ".part")
        try:
            request = urllib.request.Request(entry.url, headers={"User-Agent": "apex-docs-index"})
            with urllib.request.urlopen(request, timeout=timeout_s) as response, open(partial, "wb") as out:
                while block := response.read(1 << 20):
                    out.write(block)
            with open(partial, "rb") as check:
                if check.read(5) != b"%PDF-":
                    raise ValueError("the server sent something that is not a PDF")
            partial.replace(target)
            report.fetched.append(entry.name)
        except (urllib.error.URLError, OSError, ValueError) as error:
            partial.unlink(missing_ok=True)
            report.failed[entry.name] = str(getattr(error, "reason", error))
    return report

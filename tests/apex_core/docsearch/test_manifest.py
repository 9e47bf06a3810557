import functools
import http.server
import threading

import pytest

from apex_core.docsearch.manifest import PdfSource, fetch_pdfs, read_manifest
from apex_core.errors import ApexUserError

from .conftest import write_pdf


def test_the_shipped_manifest_lists_public_amd_pdfs_each_under_its_own_file_name():
    entries = read_manifest()
    assert len(entries) >= 4
    assert all(entry.url.startswith("https://www.amd.com/") and entry.name.endswith(".pdf") for entry in entries)
    names = " ".join(entry.name for entry in entries)
    for document in ("cdna3-instruction-set", "cdna4-instruction-set", "cdna-3-white-paper", "cdna-4-architecture-whitepaper"):
        assert document in names


@pytest.mark.parametrize(("text", "message"), [
    ('[[pdf]]\nname = "a.pdf"\nurl = "http://example.org/a.pdf"\nwhat = "x"\n', "not an https URL"),
    ('[[pdf]]\nname = "b.pdf"\nurl = "https://example.org/a.pdf"\nwhat = "x"\n', "must be the .pdf file name that ends its URL"),
    ("[[pdf]\n", "not a valid PDF manifest ("),
])
def test_a_malformed_manifest_is_a_one_line_user_error(tmp_path, text, message):
    path = tmp_path / "manifest.toml"
    path.write_text(text)
    with pytest.raises(ApexUserError, match="not a valid PDF manifest") as caught:
        read_manifest(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_fetching_keeps_real_pdfs_refuses_other_pages_skips_present_files_and_survives_no_network(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    write_pdf(served / "isa.pdf", [["MFMA"]])
    (served / "login.pdf").write_text("<html>please sign in</html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        entries = [PdfSource.model_construct(name=name, url=f"{base}/{name}", what="test", fetched_here=False)
                   for name in ("isa.pdf", "login.pdf", "missing.pdf")]
        entries.append(PdfSource.model_construct(name="nowhere.pdf", url="http://nowhere.invalid/nowhere.pdf", what="", fetched_here=False))
        folder = tmp_path / "pdfs"
        first = fetch_pdfs(entries, folder, timeout_s=10)
        assert first.fetched == ["isa.pdf"]
        assert set(first.failed) == {"login.pdf", "missing.pdf", "nowhere.pdf"}
        assert "not a PDF" in first.failed["login.pdf"]
        assert sorted(p.name for p in folder.iterdir()) == ["isa.pdf"]  # no partial or refused file is left
        assert fetch_pdfs(entries[:1], folder).present == ["isa.pdf"]
    finally:
        server.shutdown()
        server.server_close()

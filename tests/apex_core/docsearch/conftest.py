"""A small corpus made on the spot (Markdown, a Python module, a real PDF) and one index of it,
built once for the session: the tests that only read the index share it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


def write_pdf(path: Path, pages: list[list[str]], outline: list[tuple[str, int]] = ()) -> Path:
    """A valid PDF 1.4 with one text line per entry of each page (Helvetica) and, optionally, an
    outline of (title, 0-based page) entries: written byte by byte, so the test needs no PDF library."""
    objects: list[bytes] = []

    def add(body: str | bytes) -> int:
        objects.append(body.encode("latin-1") if isinstance(body, str) else body)
        return len(objects)

    catalog = add("")  # filled in below, once the page tree and the outline have numbers
    tree = add("")
    font = add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    page_ids = []
    for lines in pages:
        escaped = [line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for line in lines]
        stream = "BT /F1 11 Tf 14 TL 72 760 Td " + " ".join(f"({line}) Tj T*" for line in escaped) + " ET"
        content = add(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
        page_ids.append(add(f"<< /Type /Page /Parent {tree} 0 R /MediaBox [0 0 612 792] "
                            f"/Resources << /Font << /F1 {font} 0 R >> >> /Contents {content} 0 R >>"))
    objects[tree - 1] = f"<< /Type /Pages /Kids [{' '.join(f'{p} 0 R' for p in page_ids)}] /Count {len(page_ids)} >>".encode()
    outline_part = ""
    if outline:
        root = add("")
        items = [add("") for _ in outline]
        for position, ((title, page), item) in enumerate(zip(outline, items)):
            links = ""
            if position > 0:
                links += f" /Prev {items[position - 1]} 0 R"
            if position < len(items) - 1:
                links += f" /Next {items[position + 1]} 0 R"
            objects[item - 1] = (f"<< /Title ({title}) /Parent {root} 0 R /Dest [{page_ids[page]} 0 R /XYZ null null null]"
                                 f"{links} >>").encode()
        objects[root - 1] = f"<< /Type /Outlines /First {items[0]} 0 R /Last {items[-1]} 0 R /Count {len(items)} >>".encode()
        outline_part = f" /Outlines {root} 0 R"
    objects[catalog - 1] = f"<< /Type /Catalog /Pages {tree} 0 R{outline_part} >>".encode()
    data = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(data))
        data += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(data)
    data += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    data += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    data += f"trailer\n<< /Size {len(objects) + 1} /Root {catalog} 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(data))
    return path


GUIDE_MD = textwrap.dedent("""\
    # Tiling guide

    How to choose tiles for the kernels of this small corpus.

    ## Occupancy

    Occupancy is the number of wavefronts resident on a compute unit at once. More resident
    wavefronts hide memory latency; register pressure lowers occupancy.

    ## Swizzling

    Swizzling the program id groups neighbouring output tiles so that they share the operands
    they read from the L2 cache, which raises the hit rate of a large matrix multiplication.

    ```python
    # this comment is code, not a heading
    pid = tl.program_id(0)
    ```
    """)

KERNELS_PY = textwrap.dedent('''\
    """Reference kernels of the small corpus."""


    def fused_rmsnorm(x, weight, eps=1e-6):
        """Root-mean-square normalisation fused with the weight multiply, one row per program."""
        return x


    class TileConfig:
        """Block sizes of a tiled matmul launch: BLOCK_M, BLOCK_N and BLOCK_K."""

        def autotune_space(self, budget):
            """Every tile shape whose shared-memory footprint fits the budget in bytes."""
            return []

        def _private(self):
            """Never indexed: private names are internals."""


    def _helper():
        """Never indexed either."""
    ''')

MANUAL_PAGES = [
    ["Introduction to the accelerator.", "This manual describes the vector memory instructions."],
    ["Matrix cores execute MFMA instructions.", "Each MFMA multiplies small matrices held in accumulation registers."],
]


def write_corpus(folder: Path) -> Path:
    """The three documents of the small corpus in ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "guide.md").write_text(GUIDE_MD, encoding="utf-8")
    (folder / "kernels.py").write_text(KERNELS_PY, encoding="utf-8")
    write_pdf(folder / "manual.pdf", MANUAL_PAGES, outline=[("Introduction", 0), ("Matrix cores", 1)])
    return folder


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def small_index(small_corpus, tmp_path_factory) -> Path:
    """The small corpus indexed once; tests that read it must not change it."""
    from apex_core.docsearch import index

    folder = tmp_path_factory.mktemp("index")
    index([small_corpus], index_dir=folder)
    return folder

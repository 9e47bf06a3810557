"""Build the documentation index: fetch the manifest's PDFs (unless --skip-downloads) and index the
default corpus incrementally. ``setup.sh`` runs it; it never fails for want of a network.

    python docs_index/build.py [--fetch | --skip-downloads] [--index-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apex_core.docsearch import index  # noqa: E402
from apex_core.docsearch.manifest import fetch_pdfs, read_manifest  # noqa: E402
from apex_core.errors import ApexUserError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    fetching = parser.add_mutually_exclusive_group()
    fetching.add_argument("--skip-downloads", action="store_true", help="fetch nothing; index what is here")
    fetching.add_argument("--fetch", action="store_true", help="fetch the manifest's missing PDFs first (the default)")
    parser.add_argument("--index-dir", type=Path, default=None, help="default: $APEX_DOCS_INDEX, else docs_index/index/")
    args = parser.parse_args(argv)
    try:
        if args.skip_downloads:
            print("docs index: PDF downloads skipped (--skip-downloads)")
        else:
            fetched = fetch_pdfs(read_manifest())
            print(f"docs index: {len(fetched.fetched)} PDFs fetched, {len(fetched.present)} already here")
            for name, reason in fetched.failed.items():
                print(f"docs index: skipped {name}: {reason} (no network? run again where there is one)")
        report = index(index_dir=args.index_dir)
    except ApexUserError as error:
        print(f"docs index: error: {error}", file=sys.stderr)
        return 2
    print(f"docs index: {len(report.added)} added, {len(report.updated)} updated, {report.unchanged} unchanged, "
          f"{len(report.removed)} removed; {report.chunks} chunks in {report.index_dir} ({report.seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

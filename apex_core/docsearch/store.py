"""The index on disk and how it is brought up to date: chromadb for the vectors, bm25s for words.

An index folder (``docs_index/index/`` by default, ``$APEX_DOCS_INDEX`` or ``index_dir`` instead)
holds ``chroma/`` (a persistent chromadb collection: each chunk's vector, text and metadata),
``lexical/`` (the BM25 index and the chunk ids in its order), ``query_weights.npy`` (how much each
token of a query counts in the vector leg) and ``manifest.json`` (each indexed unit's content hash
and chunk count). ``index`` compares hashes: an unchanged unit costs one hash,
a changed one has its chunks deleted and written again, a vanished one has them deleted. The BM25
index and the query weights are rebuilt from the collection whenever anything changed (a second
for the default corpus); the stored vectors never depend on the rest of the corpus.

chromadb is opened with telemetry off and no embedding function: the vectors are computed here
(``embedding.py``) and handed over, so chromadb never loads or downloads a model of its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ValidationError

from apex_core.docsearch.corpus import DOCS_INDEX_DIR, SUFFIXES, Unit, default_units, file_unit, units_for_paths
from apex_core.docsearch.embedding import MODEL_NAME, embedder
from apex_core.docsearch.lexical import IDS_FILE, LexicalIndex
from apex_core.docsearch.models import Chunk, IndexReport
from apex_core.errors import ApexUserError
from apex_core.progress import Progress, reporter
from apex_core.storage import atomic_write_text, cache_root

ENV_VAR = "APEX_DOCS_INDEX"
DEFAULT_INDEX_DIR = DOCS_INDEX_DIR / "index"
FORMAT = 2
"""Bumped when chunking or metadata change: an index of another format is rebuilt from scratch."""
COLLECTION = "apex_docs"
MANIFEST = "manifest.json"
CHROMA_DIR = "chroma"
LEXICAL_DIR = "lexical"
QUERY_WEIGHTS = "query_weights.npy"
"""The vector leg's weight per token, from the corpus's document frequencies (embedding.token_weights)."""
_BATCH = 512
MAX_TEXT_BYTES = 8 * 1024**2
"""The largest Markdown, text or Python file indexed (8 MiB, a few thousand pages of prose): a
bigger one is a dump (a log, a base64 blob), which would crowd every answer out; it is skipped,
with the reason, and nothing of it is stored."""
MAX_PDF_BYTES = 128 * 1024**2
"""The largest PDF indexed (the ISA and CDNA guides are 5-30 MiB)."""
DIRTY = ".indexing"
"""Present while an index run writes chunks; found by the next run, whose interrupted writes it
then clears (chunks of files the manifest does not list) before anything else."""


class UnitRecord(BaseModel):
    hash: str
    kind: str
    source: str
    path: str | None = None
    default: bool = False
    chunks: int = 0


class Manifest(BaseModel):
    format: int = FORMAT
    embedder: str = MODEL_NAME
    units: dict[str, UnitRecord] = {}


def resolve_index_dir(index_dir: Path | None = None) -> Path:
    """``index_dir`` if given, else ``$APEX_DOCS_INDEX`` if set, else ``docs_index/index/``."""
    chosen = index_dir if index_dir is not None else os.environ.get(ENV_VAR) or DEFAULT_INDEX_DIR
    return Path(chosen).expanduser().resolve()


def index_exists(index_dir: Path) -> bool:
    return (index_dir / MANIFEST).is_file()


def read_manifest(index_dir: Path) -> Manifest | None:
    try:
        return Manifest.model_validate_json((index_dir / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (ValidationError, ValueError, OSError):
        return None  # unreadable: rebuilt from scratch, as for another format


def open_collection(index_dir: Path):
    """The chromadb collection of this index (created empty if absent), telemetry off."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(index_dir / CHROMA_DIR), settings=Settings(anonymized_telemetry=False))
    return client.get_or_create_collection(COLLECTION, embedding_function=None, configuration={"hnsw": {"space": "cosine"}})


def open_for_search(index_dir: Path):
    """The collection to query: the index's own, or, where this process cannot write its chroma
    folder (a read-only mount, a shared index owned by someone else), a private copy of it.

    chromadb opens its SQLite file for writing even to read, and fails on a read-only one
    ("attempt to write a readonly database"); a shared, read-only index must still answer. The copy
    lives in the cache folder, one per index folder, and is made again when the index changes."""
    chroma = index_dir / CHROMA_DIR
    if _writable(chroma):
        return open_collection(index_dir)
    stamp = f"{(index_dir / MANIFEST).stat().st_mtime_ns}"
    copy = cache_root() / "docs-index-copies" / hashlib.sha256(str(index_dir).encode()).hexdigest()[:16]
    if not (copy / "stamp").is_file() or (copy / "stamp").read_text() != stamp:
        import shutil

        fresh = copy.with_name(copy.name + f".{os.getpid()}.tmp")
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.copytree(chroma, fresh / CHROMA_DIR, copy_function=shutil.copyfile)  # files: new, so ours to write
        for folder, _, _ in os.walk(fresh):
            os.chmod(folder, 0o700)  # copytree gave the folders the read-only index's modes
        (fresh / "stamp").write_text(stamp)
        shutil.rmtree(copy, ignore_errors=True)
        os.replace(fresh, copy)
    return open_collection(copy)


def _writable(folder: Path) -> bool:
    files = [folder, *(p for p in folder.glob("*") if p.is_file())] if folder.is_dir() else [folder.parent]
    return all(os.access(p, os.W_OK) for p in files)


def _reset_collection(index_dir: Path):
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(index_dir / CHROMA_DIR), settings=Settings(anonymized_telemetry=False))
    with contextlib.suppress(Exception):  # absent already
        client.delete_collection(COLLECTION)
    return open_collection(index_dir)


@contextlib.contextmanager
def _locked(index_dir: Path) -> Iterator[None]:
    """One writer at a time per index folder (a second ``apex docs index`` waits for the first)."""
    with open(index_dir / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def chunk_metadata(unit_key: str, chunk: Chunk) -> dict[str, str | int]:
    """What chromadb stores beside a chunk's text (it takes no None values: absent ones are left out)."""
    data = {"unit": unit_key, **chunk.model_dump(exclude={"text"})}
    return {key: value for key, value in data.items() if value is not None}


def chunk_from_stored(text: str, metadata: dict) -> Chunk:
    return Chunk(text=text, **{key: metadata.get(key) for key in ("source", "kind", "section", "page", "line_start", "line_end")})


def retrieval_text(chunk: Chunk) -> str:
    """What both legs see of a chunk: where it is (source and section) and then its text."""
    return f"{chunk.heading()}\n{chunk.text}"


def index(paths: list[Path] | None = None, *, index_dir: Path | None = None, progress: Progress | None = None,
          rebuild: bool = False) -> IndexReport:
    """Bring the index up to date: the default corpus (and files added before) when ``paths`` is
    None, else just these files and folders. Incremental by content hash; see the module doc.
    ``rebuild``: start from an empty collection (the default corpus and the files added before,
    or just ``paths``)."""
    started = time.perf_counter()
    say = reporter(progress)
    folder = resolve_index_dir(index_dir)
    skipped: list[str] = []
    given_folders: list[Path] = []
    if paths is None:
        units, skipped = default_units()
    else:
        units, given_folders = units_for_paths([Path(p) for p in paths], skip=folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ApexUserError(f"index folder {folder}: cannot create it ({error.strerror}); give --index-dir in a folder you can write") from None
    units, too_big = _within_the_size_caps(units)
    report = IndexReport(index_dir=str(folder), skipped=skipped + too_big)
    with _locked(folder):
        manifest = read_manifest(folder)
        fresh = rebuild or manifest is None or manifest.format != FORMAT or manifest.embedder != MODEL_NAME
        if fresh:
            if rebuild and manifest is not None and paths is None:  # the files a user added stay in a rebuilt index
                units += [unit for unit in (_added_unit(record) for record in manifest.units.values()) if unit is not None]
                units, more = _within_the_size_caps(units)
                report.skipped += [line for line in more if line not in report.skipped]
            manifest = Manifest()  # no index, a rebuild, or one this version cannot extend: built anew
        interrupted = (folder / DIRTY).exists()
        wanted, stale = _plan(manifest, units, paths is None, given_folders)
        say(0.0, f"checking {len(wanted)} files")
        work = []
        for unit in wanted:  # hashes first: a run that changes nothing never opens chromadb (about a second)
            digest = unit.fingerprint()
            record = manifest.units.get(unit.key)
            if record is not None and record.hash == digest:
                report.unchanged += 1
            else:
                work.append((unit, digest, record))
        if work or stale or fresh or interrupted or not (folder / LEXICAL_DIR / IDS_FILE).is_file():
            (folder / DIRTY).write_text(f"{os.getpid()}\n", encoding="ascii")
            collection = _reset_collection(folder) if fresh else open_collection(folder)
            reported = -1.0
            for number, (unit, digest, record) in enumerate(work):
                fraction = 0.9 * number / len(work)
                if fraction - reported >= 0.05:
                    say(fraction, f"indexing {unit.source}")  # about twenty lines for a whole corpus, not one per file
                    reported = fraction
                try:
                    chunks = unit.chunks()
                    _replace_chunks(collection, unit.key, chunks)
                except (ApexUserError, OSError, ValueError, RuntimeError) as error:
                    # All or nothing per file: what it wrote goes, and so does its record (its old chunks were replaced).
                    collection.delete(where={"unit": unit.key})
                    manifest.units.pop(unit.key, None)
                    report.failed.append(f"{unit.source}: {_one_line(error)}")
                    continue
                manifest.units[unit.key] = UnitRecord(hash=digest, kind=unit.kind, source=unit.source,
                                                      path=str(unit.path) if unit.path else None,
                                                      default=unit.default or bool(record and record.default), chunks=len(chunks))
                report.chunks_written += len(chunks)
                (report.updated if record is not None else report.added).append(unit.source)
            for key in stale:
                collection.delete(where={"unit": key})
                report.removed.append(manifest.units.pop(key).source)
            say(0.95, "building the lexical (BM25) index")
            report.orphans_removed = _save_lexical(collection, folder, set(manifest.units))
            _write_manifest(folder, manifest)
            (folder / DIRTY).unlink(missing_ok=True)
        report.chunks = sum(record.chunks for record in manifest.units.values())
    report.seconds = round(time.perf_counter() - started, 3)
    say(1.0, "index up to date" if not report.changed else f"indexed {report.chunks_written} chunks")
    return report


def _plan(manifest: Manifest, units: list[Unit], whole_corpus: bool, folders: list[Path]) -> tuple[list[Unit], list[str]]:
    """The units to check and the keys to drop. A whole-corpus run also re-checks the files a user
    added before and drops every unit that is no longer there; a run over given paths drops only
    vanished files that were inside the folders given."""
    wanted = {unit.key: unit for unit in units}
    if whole_corpus:
        for key, record in manifest.units.items():
            if key in wanted or record.default or record.path is None:
                continue
            path = Path(record.path)
            if path.is_file() and path.suffix.lower() in SUFFIXES:
                wanted[key] = file_unit(path)
        return list(wanted.values()), [key for key in manifest.units if key not in wanted]
    stale = []
    for key, record in manifest.units.items():
        if key in wanted or record.path is None:
            continue
        path = Path(record.path)
        if not path.exists() and any(_inside(path, folder) for folder in folders):
            stale.append(key)
    return list(wanted.values()), stale


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def _within_the_size_caps(units: list[Unit]) -> tuple[list[Unit], list[str]]:
    """The units small enough to index, and one line for each file over its cap."""
    kept, refused = [], []
    for unit in units:
        if unit.path is not None and unit.path.is_file():
            size = unit.path.stat().st_size
            cap = MAX_PDF_BYTES if unit.kind == "pdf" else MAX_TEXT_BYTES
            if size > cap:
                refused.append(f"{unit.source}: {size / 1024**2:.1f} MiB, over the {cap // 1024**2} MiB cap for "
                               f"{'PDFs' if unit.kind == 'pdf' else 'text files'}; not indexed (split it, or index the parts you need)")
                continue
        kept.append(unit)
    return kept, refused


def _added_unit(record: UnitRecord) -> Unit | None:
    if record.default or record.path is None:
        return None
    path = Path(record.path)
    return file_unit(path) if path.is_file() and path.suffix.lower() in SUFFIXES else None


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def remove(paths: list[Path], *, index_dir: Path | None = None) -> IndexReport:
    """Take these files (or every indexed file under these folders) out of the index, whatever
    their state on disk (a file deleted since is taken out too)."""
    started = time.perf_counter()
    folder = resolve_index_dir(index_dir)
    report = IndexReport(index_dir=str(folder))
    manifest = read_manifest(folder) if index_exists(folder) else None
    if manifest is None:
        raise ApexUserError(f"no index in {folder} to remove files from; build one with 'apex docs index'")
    targets = [Path(os.path.abspath(p)) for p in paths]
    with _locked(folder):
        keys = [key for key, record in manifest.units.items() if record.path is not None and
                any(Path(record.path) == t or _inside(Path(record.path), t) for t in targets)]
        if not keys:
            given = ", ".join(str(p) for p in paths)
            raise ApexUserError(f"{given}: not in the index {folder}; its {MANIFEST} lists the files indexed")
        (folder / DIRTY).write_text(f"{os.getpid()}\n", encoding="ascii")
        collection = open_collection(folder)
        for key in keys:
            collection.delete(where={"unit": key})
            report.removed.append(manifest.units.pop(key).source)
        report.orphans_removed = _save_lexical(collection, folder, set(manifest.units))
        _write_manifest(folder, manifest)
        (folder / DIRTY).unlink(missing_ok=True)
        report.chunks = sum(record.chunks for record in manifest.units.values())
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _replace_chunks(collection, unit_key: str, chunks: list[Chunk]) -> None:
    collection.delete(where={"unit": unit_key})
    prefix = hashlib.sha1(unit_key.encode()).hexdigest()[:16]
    model = embedder()
    size = _batch_size(collection)
    for begin in range(0, len(chunks), size):
        batch = chunks[begin:begin + size]
        vectors = model.embed([retrieval_text(chunk) for chunk in batch])
        collection.add(
            ids=[f"{prefix}:{begin + offset}" for offset in range(len(batch))],
            embeddings=vectors,
            documents=[chunk.text for chunk in batch],
            metadatas=[chunk_metadata(unit_key, chunk) for chunk in batch],
        )


def _batch_size(collection) -> int:
    """Chunks per write: ours, or fewer where chromadb's SQLite takes fewer at once."""
    client = getattr(collection, "_client", None)
    limit = client.get_max_batch_size() if client is not None and hasattr(client, "get_max_batch_size") else _BATCH
    return max(1, min(_BATCH, int(limit)))


def _save_lexical(collection, folder: Path, listed: set[str]) -> int:
    """Rebuild the BM25 index and query weights from the collection, first deleting the chunks of
    units the manifest does not list (an interrupted run's); how many were deleted."""
    stored = collection.get(include=["metadatas"])
    orphans = {metadata.get("unit") for metadata in stored["metadatas"]} - listed
    for key in orphans:
        collection.delete(where={"unit": key})
    removed = sum(1 for metadata in stored["metadatas"] if metadata.get("unit") in orphans)
    stored = collection.get(include=["documents", "metadatas"])
    ids, kinds, texts = [], [], []
    for chunk_id, text, metadata in zip(stored["ids"], stored["documents"], stored["metadatas"]):
        chunk = chunk_from_stored(text, metadata)
        ids.append(chunk_id)
        kinds.append(chunk.kind)
        texts.append(retrieval_text(chunk))
    target = folder / LEXICAL_DIR
    if target.exists():
        for old in target.iterdir():
            old.unlink()
    weights_file = folder / QUERY_WEIGHTS
    if ids:
        LexicalIndex.build(ids, kinds, texts).save(target)
        with open(weights_file, "wb") as handle:
            np.save(handle, embedder().token_weights(texts))
    else:
        weights_file.unlink(missing_ok=True)
    return removed


def _write_manifest(folder: Path, manifest: Manifest) -> None:
    atomic_write_text(folder / MANIFEST, json.dumps(manifest.model_dump(), indent=1, sort_keys=True))

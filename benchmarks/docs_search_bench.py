"""Documentation search: index build time, retrieval quality and query latency (docs/benchmarks.md,
"Documentation search").

Builds the default corpus into a fresh index folder (cold build), runs the build again (the
incremental no-op, in this process and as ``apex docs index`` in a fresh one), then asks every question of ``benchmarks/docs_eval.jsonl`` and reports recall@5,
MRR@10 and the query latency p50/p95 of a warm process, and recall@5 and MRR@10 of the held-out
questions (``docs_eval_heldout.jsonl``, written after the design was chosen) (the index is opened by one query first,
whose time is reported on its own). ``--repeat N`` asks the whole set N times for steadier
latencies. Targets (issue 16): recall@5 >= 0.9, p50 <= 100 ms.

Run: ``python benchmarks/docs_search_bench.py --out benchmarks/results/docs-search-cpu-DATE-COMMIT.json``.
Record what it prints, with machine, date and commit, in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apex_core.docsearch import index, search  # noqa: E402
from apex_core.docsearch.evaluation import evaluate, load_items, percentile  # noqa: E402
from apex_core.docsearch.store import FORMAT  # noqa: E402
from apex_core.docsearch.embedding import MODEL_NAME  # noqa: E402


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", type=Path, default=ROOT / "benchmarks" / "docs_eval.jsonl")
    parser.add_argument("--heldout", type=Path, default=ROOT / "benchmarks" / "docs_eval_heldout.jsonl",
                        help="questions written after the design was fixed, reported apart")
    parser.add_argument("--index-dir", type=Path, default=None, help="default: a fresh temporary folder")
    parser.add_argument("--repeat", type=int, default=3, help="ask the whole set this many times for the latencies")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    items = load_items(args.eval)
    folder = args.index_dir or Path(tempfile.mkdtemp(prefix="apex-docs-bench-"))
    cold = index(index_dir=folder)
    noop = index(index_dir=folder)
    for _ in range(3):  # others may be editing the corpus: a no-op is timed on a run that changed nothing
        if not noop.changed:
            break
        noop = index(index_dir=folder)

    started = time.perf_counter()  # the no-op as `apex docs index` meets it: a fresh process
    fresh = subprocess.run([sys.executable, "-m", "apex_core.cli.main", "docs", "index", "--index-dir", str(folder), "--json"],
                           cwd=ROOT, capture_output=True, text=True, check=True)
    fresh_noop_wall_s = time.perf_counter() - started
    fresh_noop = json.loads(fresh.stdout)

    started = time.perf_counter()
    search("open the index", 5, index_dir=folder)
    first_query_ms = (time.perf_counter() - started) * 1000

    reports = [evaluate(items, k=5, depth=10, index_dir=folder) for _ in range(max(1, args.repeat))]
    latencies = [item.latency_ms for report in reports for item in report.items]
    quality = reports[0]
    heldout = evaluate(load_items(args.heldout), k=5, depth=10, index_dir=folder) if args.heldout.is_file() else None
    misses = [{"question": item.question, "rank": item.rank, "top": item.top}
              for item in [*quality.items, *(heldout.items if heldout else [])] if item.rank is None or item.rank > 5]
    result = {
        "machine": f"{platform.node()} ({platform.machine()}, {len(__import__('os').sched_getaffinity(0))} CPUs usable), "
                   f"Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
        "commit": _commit(),
        "embedder": MODEL_NAME,
        "index_format": FORMAT,
        "corpus": {"files": len(cold.added), "chunks": cold.chunks, "not_indexed": cold.skipped},
        "build_cold_s": cold.seconds,
        "build_noop_s": noop.seconds if not noop.changed else None,
        "build_noop_fresh_process_s": fresh_noop["seconds"],
        "apex_docs_index_noop_wall_s": round(fresh_noop_wall_s, 2),
        "questions": quality.questions,
        "recall_at_5": round(quality.recall_at_k, 4),
        "mrr_at_10": round(quality.mrr, 4),
        "heldout_questions": heldout.questions if heldout else 0,
        "heldout_recall_at_5": round(heldout.recall_at_k, 4) if heldout else None,
        "heldout_mrr_at_10": round(heldout.mrr, 4) if heldout else None,
        "first_query_ms": round(first_query_ms, 1),
        "query_p50_ms": round(percentile(latencies, 0.5), 2),
        "query_p95_ms": round(percentile(latencies, 0.95), 2),
        "queries_timed": len(latencies),
        "stable_across_repeats": all(r.recall_at_k == quality.recall_at_k for r in reports),
        "misses": misses,
        "ranks": [item.rank for item in quality.items],
        "heldout_ranks": [item.rank for item in heldout.items] if heldout else [],
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

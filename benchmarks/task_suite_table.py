"""Render docs/tasks.md's tables of the suite: tasks by kernel kind and language, tasks by model
(a task stands for every model in its ``also_models``), what is verified on a GPU, and how many
tasks a GPU identify run observed.

Usage::

    python benchmarks/task_suite_table.py [--verified VERIFY.jsonl ...] [--identify IDENTIFY.json ...]
    python benchmarks/task_suite_table.py --verified benchmarks/results/verify-*.jsonl --list-unverified
    python benchmarks/task_suite_table.py --identify benchmarks/results/identify-models-*/identify.json --list-unidentified

``--verified`` files are ``apex tasks verify --jsonl`` outputs taken on a GPU: a task counts as
verified when its latest timed record there (files ordered by the date and time in their names) passed; an
untimed record (a CPU run, or ``--no-timing``) neither verifies a task nor undoes a verification. ``--identify`` files are ``workloads_bench.py --out`` results: a task is "observed" when
one of its models' runs spent at least ``--min-share`` of its device time in the task's kind, so
the task's kernel is one that model really runs (its shapes are the model's, by construction).
The CPU demo tasks are left out: they are the grader's smoke test, not kernels of a model.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apex_core.identify.task_map import kind_of_task_kernel  # noqa: E402
from apex_core.tasks import all_tasks  # noqa: E402
from apex_core.tasks.schema import Task  # noqa: E402

MIN_SHARE = 0.005
DATE = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{4})?")
"""A result's date, and the UTC time (HHMM) its device session started where several ran that day."""


def model_tasks() -> list[Task]:
    """Every task of a registry model (not the synthetic CPU demo models), by id."""
    return sorted((t for t in all_tasks().values() if not t.architecture.synthetic), key=lambda t: t.id)


def by_date(paths: Iterable[Path]) -> list[Path]:
    """The files in the order they were taken: by the YYYY-MM-DD date in their names (results are
    named verify-<machine>-<date>[T<HHMM>]-<commit>...), then by the session's start time after the
    date, then by name; a name without a date comes first, and on one day a name without a time
    before those with one. The names' commits say nothing of order."""
    def key(path: Path) -> tuple[str, str]:
        found = DATE.search(path.name)
        return (found.group(0) if found else "", path.name)  # "2026-12-06" < "2026-12-06T0741"

    return sorted(paths, key=key)


def verified_ids(paths: Iterable[Path]) -> set[str]:
    """Tasks whose latest GPU record in ``paths`` (in ``by_date`` order) passed with its speed measured."""
    latest: dict[str, bool] = {}
    for path in by_date(paths):
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                if record.get("timed"):  # an untimed record (a CPU run, --no-timing) verifies nothing
                    latest[record["task_id"]] = bool(record.get("passed"))
    return {task_id for task_id, passed in latest.items() if passed}


def observed_kinds(paths: Iterable[Path], min_share: float = MIN_SHARE) -> dict[str, set[str]]:
    """Model slug -> the kinds its identify run spent at least ``min_share`` of the device time in."""
    shares: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for path in paths:
        data = json.loads(path.read_text())
        for case in data if isinstance(data, list) else [data]:
            if not isinstance(case, dict) or "case" not in case:
                raise ValueError(f"{path} is not a workloads_bench.py --out file (an `apex identify` result has no cases)")
            if "error" in case or "+" in case["case"]:
                continue  # a failed case observed nothing; a kernel stack's run is the same model's
            for kernel in case["top"]:  # a transformers workload's id is its model's slug
                shares[case["case"]][kernel["kind"]] += float(kernel["share"])
    return {model: {kind for kind, share in kinds.items() if share >= min_share} for model, kinds in shares.items()}


def unidentified_models(tasks: list[Task], observed: dict[str, set[str]]) -> list[str]:
    """The registry models some task stands for that no identify run has measured yet (a failed case
    measured nothing), by slug: what the next GPU identify run still owes."""
    return sorted({model for t in tasks for model in t.models} - set(observed))


def is_observed(task: Task, observed: dict[str, set[str]]) -> bool:
    kind = kind_of_task_kernel(task.kernel)
    return any(kind in observed.get(model, set()) for model in task.models)


def by_kind(tasks: list[Task], verified: set[str], observed: dict[str, set[str]] | None) -> str:
    rows: dict[tuple[str, str], list[Task]] = defaultdict(list)
    for task in tasks:
        rows[(task.kernel, task.language)].append(task)
    head = "| kernel | language | tasks | models served | verified on a GPU |" + (" observed by identify |" if observed is not None else "")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for (kernel, language), group in sorted(rows.items()):
        served = len({m for t in group for m in t.models})
        cells = [kernel, language, str(len(group)), str(served), str(sum(t.id in verified for t in group))]
        if observed is not None:
            cells.append(str(sum(is_observed(t, observed) for t in group)))
        lines.append("| " + " | ".join(cells) + " |")
    total = [f"**{len(tasks)}**", f"**{len({m for t in tasks for m in t.models})}**", f"**{sum(t.id in verified for t in tasks)}**"]
    if observed is not None:
        total.append(f"**{sum(is_observed(t, observed) for t in tasks)}**")
    lines.append("| **all** | | " + " | ".join(total) + " |")
    return "\n".join(lines)


def by_model(tasks: list[Task], verified: set[str]) -> str:
    own: dict[str, list[Task]] = defaultdict(list)
    shared: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        own[task.model].append(task)
        for model in task.also_models:
            shared[model].append(task)
    lines = ["| model | its own tasks | tasks it shares with a model of the same shapes | verified |", "|---|---|---|---|"]
    for model in sorted(set(own) | set(shared)):
        mine, theirs = own.get(model, []), shared.get(model, [])
        kernels = ", ".join(t.kernel for t in mine) or "-"
        borrowed = ", ".join(f"{t.kernel} (`{t.model}`)" for t in theirs) or "-"
        done = sum(t.id in verified for t in mine + theirs)
        lines.append(f"| {model} | {len(mine)}: {kernels} | {borrowed} | {done} of {len(mine) + len(theirs)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verified", nargs="*", type=Path, default=[], help="apex tasks verify --jsonl files from a GPU")
    parser.add_argument("--identify", nargs="*", type=Path, default=None, help="workloads_bench.py --out files")
    parser.add_argument("--min-share", type=float, default=MIN_SHARE, help="a kind observed at this share of device time or more")
    parser.add_argument("--list-unverified", action="store_true", help="print the ids of the model tasks not verified, one a line")
    parser.add_argument("--list-unidentified", action="store_true",
                        help="print the models no --identify file has measured, comma-separated (workloads_bench.py --cases)")
    args = parser.parse_args(argv)
    missing = [str(p) for p in [*args.verified, *(args.identify or [])] if not p.is_file()]
    if missing:
        print(f"task_suite_table: no such file {', '.join(missing)}", file=sys.stderr)
        return 2
    tasks = model_tasks()
    verified = verified_ids(args.verified)
    if args.list_unverified:
        print("\n".join(t.id for t in tasks if t.id not in verified))
        return 0
    try:
        observed = observed_kinds(args.identify, args.min_share) if args.identify is not None else None
    except (ValueError, KeyError) as error:
        print(f"task_suite_table: {error}", file=sys.stderr)
        return 2
    if args.list_unidentified:
        print(",".join(unidentified_models(tasks, observed or {})))
        return 0
    print(by_kind(tasks, verified, observed))
    print()
    print(by_model(tasks, verified))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""NVIDIA Nsight Systems and Nsight Compute CSV outputs read into the kernel table.

Formats, written from NVIDIA's documentation (Nsight Systems "Post-Collection Analysis Guide",
Nsight Compute "CLI" guide) and public examples of their output; not yet checked against a file
from the H200 (neither tool was run here):

- ``nsys stats --report cuda_gpu_kern_sum --format csv``: one row per kernel with ``Time (%)``,
  ``Total Time (ns)``, ``Instances``, ``Avg (ns)``, ..., ``Name``. The unit in the headers follows
  ``--timeunit``. Printed to stdout it comes after progress lines (``Processing [...]``), which
  are skipped; a file holding several reports is read from the kernel summary's header on.
- ``ncu --csv`` (details page): one row per metric per launch, ``"ID","Process ID",...,"Kernel
  Name",...,"Metric Name","Metric Unit","Metric Value"``; the launch's time is
  ``gpu__time_duration.sum`` (from ``--metrics gpu__time_duration.sum``) or the ``Duration`` row of
  the Speed Of Light section. ``ncu --csv --page raw``: one row per launch, a row of units under
  the header, and a ``gpu__time_duration.sum`` column.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from apex_core.profiling.readers.common import ProfileFormatError, csv_rows, number, read_text, unit_us
from apex_core.profiling.records import KernelRecord
from apex_core.profiling.table import Launch, finish, summarize_launches

NSYS_KERN_SUM = "an nsys 'cuda_gpu_kern_sum' CSV (nsys stats --report cuda_gpu_kern_sum --format csv)"
NCU_CSV = "an ncu CSV (ncu --csv, with gpu__time_duration.sum)"
_TOTAL_TIME = re.compile(r"^Total Time \((\w+)\)$")
_DURATION_METRICS = ("gpu__time_duration.sum", "Duration")


def read_nsys_kern_sum(path: Path) -> list[KernelRecord]:
    """One record per row of the kernel summary."""
    lines = read_text(path, NSYS_KERN_SUM).splitlines()
    start = next((i for i, line in enumerate(lines) if "Total Time (" in line and "Instances" in line and "Name" in line), None)
    if start is None:
        raise ProfileFormatError(f"{path} is not {NSYS_KERN_SUM}: no header with 'Total Time', 'Instances' and 'Name'")
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip() or lines[i].startswith("**")), len(lines))
    rows = csv_rows(lines[start:end])
    header = list(rows[0].keys()) if rows else next(csv.reader(io.StringIO(lines[start])))
    total_column = next(column for column in header if _TOTAL_TIME.match(column))
    scale = unit_us(_TOTAL_TIME.match(total_column).group(1), path)  # type: ignore[union-attr]
    records = []
    for row in rows:
        calls = int(number(row["Instances"], path, "Instances"))
        total_us = number(row[total_column], path, total_column) * scale
        records.append(
            KernelRecord(name=row["Name"], device="cuda", calls=calls, total_time_us=total_us,
                         mean_time_us=total_us / calls if calls else 0.0, share=0.0)
        )
    return finish(records)


def read_ncu_csv(path: Path) -> list[KernelRecord]:
    """One record per kernel name, summing the durations of its profiled launches."""
    lines = read_text(path, NCU_CSV).splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"') and "Kernel Name" in line), None)
    if start is None:
        raise ProfileFormatError(f"{path} is not {NCU_CSV}: no header starting with \"ID\" and naming \"Kernel Name\"")
    lines = [line for line in lines[start:] if line.startswith('"')]  # program output and ==PROF== lines interleave
    rows = csv_rows(lines)
    header = next(csv.reader(io.StringIO(lines[0])))
    if "Metric Name" in header:
        launches = _details_launches(rows, path)
    elif "gpu__time_duration.sum" in header:
        launches = _raw_launches(rows, path)
    else:
        raise ProfileFormatError(f"{path} is not {NCU_CSV}: neither a 'Metric Name' nor a 'gpu__time_duration.sum' column")
    if not launches:
        raise ProfileFormatError(f"{path}: no launch has a duration; profile with --metrics gpu__time_duration.sum")
    return summarize_launches(launches, "cuda")


def _details_launches(rows: list[dict[str, str]], path: Path) -> list[Launch]:
    """Long format: the first duration metric found for each launch ID."""
    found: dict[str, Launch] = {}
    for row in rows:
        if row.get("Metric Name") not in _DURATION_METRICS or row["ID"] in found:
            continue
        value = number(row["Metric Value"], path, "Metric Value") * unit_us(row["Metric Unit"], path)
        found[row["ID"]] = Launch(name=row["Kernel Name"], time_us=value)
    return list(found.values())


def _raw_launches(rows: list[dict[str, str]], path: Path) -> list[Launch]:
    """Raw page: the first row under the header gives each column's unit."""
    if not rows:
        return []
    units, data = rows[0], rows[1:]
    scale = unit_us(units["gpu__time_duration.sum"], path)
    return [
        Launch(name=row["Kernel Name"], time_us=number(row["gpu__time_duration.sum"], path, "gpu__time_duration.sum") * scale)
        for row in data
    ]

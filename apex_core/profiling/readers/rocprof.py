"""rocprofv3 outputs (AMD ROCm) read into the kernel table.

Formats, all written from AMD's rocprofiler-sdk documentation ("Using rocprofv3", "Kernel naming
and filtering"); none was checked against a real run, because no AMD GPU is reachable here:

- ``--kernel-trace --output-format csv``: ``<pid>_kernel_trace.csv``, one row per dispatch, with
  ``Kernel_Name``, ``Start_Timestamp`` and ``End_Timestamp`` (nanoseconds) among its columns;
- ``--stats``: ``<pid>_kernel_stats.csv``, one row per kernel (``Name``, ``Calls``,
  ``TotalDurationNs``, ...);
- ``--output-format json``: ``<pid>_results.json``, ``{"rocprofiler-sdk-tool": [{"kernel_symbols":
  [...], "buffer_records": {"kernel_dispatch": [...]}}]}``, each dispatch naming its kernel by
  ``dispatch_info.kernel_id``.

rocprofv3 demangles names by default (``--mangled-kernels`` keeps them mangled; the table then
demangles them itself). The Perfetto (``pftrace``), OTF2 and rocpd (SQLite) outputs are not read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from apex_core.profiling.readers.common import ProfileFormatError, csv_rows, number, read_text
from apex_core.profiling.records import KernelRecord
from apex_core.profiling.table import Launch, finish, summarize_launches

KERNEL_TRACE = "a rocprofv3 kernel trace CSV (*_kernel_trace.csv)"
KERNEL_STATS = "a rocprofv3 kernel stats CSV (*_kernel_stats.csv)"
RESULTS_JSON = "a rocprofv3 JSON output (*_results.json)"


def read_kernel_trace_csv(path: Path) -> list[KernelRecord]:
    """One record per kernel from a ``--kernel-trace`` CSV, summing its dispatches."""
    lines = read_text(path, KERNEL_TRACE).splitlines()
    if not lines or not {"Kernel_Name", "Start_Timestamp", "End_Timestamp"} <= set(_header(lines[0])):
        raise ProfileFormatError(f"{path} is not {KERNEL_TRACE}: its header lacks Kernel_Name, Start_Timestamp, End_Timestamp")
    launches = []
    for row in csv_rows(lines):
        start = number(row["Start_Timestamp"], path, "Start_Timestamp")
        end = number(row["End_Timestamp"], path, "End_Timestamp")
        launches.append(Launch(name=row["Kernel_Name"], time_us=max(end - start, 0.0) / 1e3))
    return summarize_launches(launches, "cuda")


def read_kernel_stats_csv(path: Path) -> list[KernelRecord]:
    """One record per row of a ``--stats`` kernel summary."""
    lines = read_text(path, KERNEL_STATS).splitlines()
    if not lines or not {"Name", "Calls", "TotalDurationNs"} <= set(_header(lines[0])):
        raise ProfileFormatError(f"{path} is not {KERNEL_STATS}: its header lacks Name, Calls, TotalDurationNs")
    records = []
    for row in csv_rows(lines):
        calls = int(number(row["Calls"], path, "Calls"))
        total_us = number(row["TotalDurationNs"], path, "TotalDurationNs") / 1e3
        records.append(
            KernelRecord(name=row["Name"], device="cuda", calls=calls, total_time_us=total_us,
                         mean_time_us=total_us / calls if calls else 0.0, share=0.0)
        )
    return finish(records)


def read_results_json(path: Path) -> list[KernelRecord]:
    """One record per kernel from the JSON output's kernel dispatch records."""
    try:
        data = json.loads(read_text(path, RESULTS_JSON))
        tools = data["rocprofiler-sdk-tool"]
        tools = tools if isinstance(tools, list) else [tools]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ProfileFormatError(f"{path} is not {RESULTS_JSON}: no 'rocprofiler-sdk-tool' section") from None
    launches = []
    for tool in tools:
        names = _kernel_names(tool.get("kernel_symbols", []))
        for dispatch in tool.get("buffer_records", {}).get("kernel_dispatch", []):
            try:
                kernel_id = dispatch["dispatch_info"]["kernel_id"]
                time_ns = dispatch["end_timestamp"] - dispatch["start_timestamp"]
            except (KeyError, TypeError):
                raise ProfileFormatError(f"{path}: a kernel_dispatch record lacks dispatch_info.kernel_id or its timestamps") from None
            launches.append(Launch(name=names.get(kernel_id, f"kernel_id {kernel_id}"), time_us=max(time_ns, 0) / 1e3))
    return summarize_launches(launches, "cuda")


def _kernel_names(symbols: list[dict[str, Any]] | dict[str, Any]) -> dict[int, str]:
    """kernel_id -> the name rocprofv3's CSV would print (formatted, else demangled, else the symbol)."""
    entries = symbols.values() if isinstance(symbols, dict) else symbols
    names = {}
    for entry in entries:
        if "kernel_id" not in entry:
            continue
        name = entry.get("formatted_kernel_name") or entry.get("demangled_kernel_name") or entry.get("kernel_name") or ""
        names[entry["kernel_id"]] = name.removesuffix(".kd")
    return names


def _header(line: str) -> list[str]:
    return [cell.strip().strip('"') for cell in line.split(",")]

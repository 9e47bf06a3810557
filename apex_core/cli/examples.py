"""Examples for every ``apex`` command's ``--help``, in one table.

A command's help ends with how it is typed in practice. They are kept here, apart from the
commands, so ``tests/cli/test_examples.py`` can hold every command to having them and check that
each names options the command has; a command that carries its examples in its docstring (the
newer ones: run, optimize-kernel, doctor, docs index, runs, env serve) is left as it is.
"""

from __future__ import annotations

from typing import Any

EXAMPLES: dict[str, tuple[str, ...]] = {
    "hardware": ("apex hardware", "apex hardware --gpu mi355x --json"),
    "prompt": ("apex prompt --task-id cpu-mini__rms_norm", "apex prompt --list", "apex prompt --all > prompts.jsonl"),
    "grade": ("apex grade --task cpu-mini__rms_norm --solution output/cpu-mini__rms_norm/solution.py",
              "apex grade --task llama-3-1-8b-instruct__rms_norm --solution a.py b.py --json > grades.json",
              "apex grade --task cpu-mini__rms_norm --solution candidates/   # every .py in it, then a summary table"),
    "eval": ("apex eval --dry-run", "apex eval --task-id cpu-mini__rms_norm --agent claude --max-turns 10"),
    "benchmark": ("apex benchmark --workload cpu-mini", "apex benchmark --workload llama-3-1-8b-instruct --kernels liger --runs 5",
                  "apex benchmark --list"),
    "profile": ("apex profile --workload cpu-mini", "apex profile --workload qwen3-5-27b --kernels fla --top 20"),
    "identify": ("apex identify", "apex identify --top-k 5 --kernel-types triton --json"),
    "benchmark-final": ("apex benchmark-final --workload cpu-mini", "apex benchmark-final --workload llama-3-1-8b-instruct --runs 8"),
    "integrate": ("apex integrate --results output/", "apex integrate --min-speedup 1.10 --json"),
    "optimize": ("apex optimize", "apex optimize --run results/runs/20261204-1012-cpu-mini-a1b2c3"),
    "score": ("apex score", "apex score --run results/runs/20261204-1012-cpu-mini-a1b2c3 --json"),
    "report": ("apex report", "apex report --run results/runs/20261204-1012-cpu-mini-a1b2c3"),
    "list-kernels": ("apex list-kernels", "apex list-kernels --run results/runs/20261204-1012-cpu-mini-a1b2c3 --json"),
    "leaderboard": ("apex leaderboard", "apex leaderboard --agent claude --task cpu-mini__rms_norm --json"),
    "export-rl": ("apex export-rl --output datasets/", "apex export-rl --output datasets/ --sft --min-score 0.5 --format parquet"),
    "knowledge": ("apex knowledge", "apex knowledge --task cpu-mini__rms_norm --gpu gfx950"),
    "tasks list": ("apex tasks list", "apex tasks list --model llama-3-1-8b-instruct --json"),
    "tasks show": ("apex tasks show cpu-mini__rms_norm", "apex tasks show llama-3-1-8b-instruct__rms_norm --gpu h200 --json"),
    "tasks new": ("apex tasks new --model mistral-7b-v0-3 --kernel rms_norm",
                  "apex tasks new --model mistral-7b-v0-3 --kernel rms_norm --dir my_tasks/"),
    "tasks verify": ("apex tasks verify --task cpu-mini__rms_norm", "apex tasks verify --all --gpus 8 --jsonl verify.jsonl"),
    "tasks export": ("apex tasks export --format jsonl --output tasks.jsonl",
                     "apex tasks export --format jsonl --with-solutions --output sft.jsonl"),
    "mcp list": ("apex mcp list", "apex mcp list --json"),
    "mcp serve": ("apex mcp serve apex-grader", "apex mcp serve apex --http 127.0.0.1:8000"),
    "mcp install": ("apex mcp install --client claude", "apex mcp install --client all --scope user --gateway"),
    "mcp uninstall": ("apex mcp uninstall --client codex",),
    "mcp config": ("apex mcp config --client cursor",),
    "mcp skills": ("apex mcp skills",),
    "workloads list": ("apex workloads list", "apex workloads list --json"),
    "workloads show": ("apex workloads show llama-3-1-8b-instruct", "apex workloads show cpu-mini --json"),
    "docs search": ('apex docs search "LDS bank conflicts"', 'apex docs search "MFMA fp8 layout" --kind pdf --json'),
    "source find": ("apex source find LigerRMSNormFunction", "apex source find _rms_norm_forward_kernel --json"),
    "source show": ("apex source show liger_kernel/ops/rms_norm.py:40-90", "apex source show _rms_norm_forward_kernel --context 5"),
    "source callers": ("apex source callers _rms_norm_forward_kernel", "apex source callers rms_norm_forward --package liger_kernel"),
    "source callees": ("apex source callees LigerRMSNormFunction",),
    "source launches": ("apex source launches _rms_norm_forward_kernel",),
    "source grep": ('apex source grep "tl.dot" --package fla --limit 20', 'apex source grep "num_warps" --glob "*rms*"'),
    "source index": ("apex source index",),
    "patch apply": ("apex patch apply --task cpu-mini__rms_norm --solution output/cpu-mini__rms_norm/solution_best.py",),
    "patch status": ("apex patch status", "apex patch status --json"),
    "patch check": ("apex patch check --workload cpu-mini", "apex patch check --workload llama-3-1-8b-instruct --prompts 8 --tokens 32"),
    "patch restore": ("apex patch restore",),
    "runs list": ("apex runs list", "apex runs list --results-dir /data/results --json"),
    "runs show": ("apex runs show latest", "apex runs show 20261204-1012 --json"),
    "runs rm": ("apex runs rm 20261204-1012", "apex runs rm 20261203-0915 20261203-1140"),
}


def add_examples(app: Any, prefix: str = "") -> None:
    """Set each command's help epilog to its examples (typer shows the epilog after the options)."""
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__.replace("_command", "").replace("_", "-") if info.callback else "")
        examples = EXAMPLES.get(f"{prefix}{name}")
        if examples and not info.epilog:
            info.epilog = "Examples: " + ";  ".join(examples)
    for group in app.registered_groups:
        add_examples(group.typer_instance, f"{prefix}{group.name} ")

"""Kernel families: for each operation, its references, input generator, roofline and baselines.

A task (``apex_core/tasks/definitions/*.toml``) points into one family here; several models share a
family and differ only in shapes, dtypes and parameters, which the task file carries as data.
"""

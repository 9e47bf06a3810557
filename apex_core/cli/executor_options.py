"""The options that choose where gradings run, shared by ``apex grade``, ``apex run`` and
``apex optimize-kernel``: ``--executor local|ray`` and ``--ray-address``."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

ExecutorOption = Annotated[str, typer.Option(
    "--executor", help="Where gradings run: local (this machine's GPUs) or ray (one grading actor per GPU of a Ray cluster).")]
RayAddressOption = Annotated[Optional[str], typer.Option(
    "--ray-address", help="With --executor ray: the cluster to join (host:6379 or ray://host:10001); "
                          "default RAY_ADDRESS, else Ray started on this machine.")]

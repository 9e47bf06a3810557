"""What a caller may choose about one grading: the boundary model of the CLI, the MCP tools and
the library (``GradeOptions``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field



class GradeOptions(BaseModel):
    device: str | None = None
    """'cuda', 'cuda:1' or 'cpu'; by default the GPU when the task needs one and torch sees one."""
    seeds_per_shape: int = Field(default=2, ge=1)
    public_seed: int = Field(default=0, ge=0)
    timeout_s: float = Field(default=180.0, gt=0)
    time_budget_s: float = Field(default=0.6, gt=0)
    """Timing budget per benchmark shape (both solutions together)."""
    target_rse: float = Field(default=0.005, gt=0)
    min_samples: int = Field(default=10, ge=3)
    inputs_per_shape: int = Field(default=8, ge=2)
    """Distinct input sets staged per timed shape: the warm-up's inputs (timed calls draw their own)."""
    timing: bool = True
    warm_pool: bool = True
    """Take workers from the warm pool (libraries already imported) and top it up afterwards."""
    hidden_shapes: bool = True
    """Check the hidden shapes too; only a timing-focused run ('benchmark') turns this off."""
    memory_bytes: int | None = Field(default=None, gt=0)
    """Resident memory one solution's processes may hold; default half the machine, at most 16 GiB."""
    bootstrap_draws: int = Field(default=1000, ge=100)
    backend: Literal["apex", "magpie"] = "apex"
    """Who times: our interleaved harness, or an installed Magpie (MAGPIE_ROOT). Correctness,
    the trace checks' verdicts, floors and ceilings stay ours either way."""
    unconfined: bool = False
    """Grade even where a solution cannot be confined (``sandbox.py``), or with the Magpie backend,
    whose processes Apex cannot confine: the solution then runs with the judge's own rights. The
    result says so (flag ``unconfined``, ``provenance.unconfined``)."""

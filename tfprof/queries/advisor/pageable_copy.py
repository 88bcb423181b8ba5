"""PageableCopyChecker (docs/ADVISOR.md, 'GPU checks'): host-to-device copies from pageable memory.

Kineto names each copy by its direction and the memory at both ends, e.g.
``Memcpy HtoD (Pageable -> Device)``; XSpace names it ``MemcpyH2D`` and puts the memory kinds in
its ``memcpy_details`` stat (``kind_src:pageable kind_dst:device size:…``). A copy from pageable (not page-locked) host memory is
staged through a pinned buffer by the driver and cannot overlap with compute; pinning the
source (``DataLoader(pin_memory=True)``, ``tensor.pin_memory()``) and copying with
``non_blocking=True`` lets it. A copy counts when it is host-to-device (``kernels.kind``
``memcpy_htod``) and from pageable memory (the name holds ``Pageable``, or ``memcpy_details``
``kind_src:pageable``).

Columns, one row per copy name, most time first: ``name``, ``count``, ``total_ns``, ``bytes``
(summed sizes; null when the trace records none), ``steps`` (how many steps had one),
``example_event`` (the longest copy's ``trace_events.event_id``).
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.advisor.base import CheckOptions, Evidence
from tfprof.queries.advisor.trace import device_events, gpu_status, step_of, step_windows

SCHEMA = {
    "name": pl.String, "count": pl.Int64, "total_ns": pl.Int64, "bytes": pl.Int64, "steps": pl.Int64,
    "example_event": pl.Int64,
}


def pageable_frame(prof: Profile) -> pl.DataFrame:
    """The check's rows (module doc)."""
    dev = device_events(prof)
    copies = dev.filter((pl.col("copy") == "memcpy_htod") & pl.col("pageable"))
    copies = copies.with_columns(step_of(step_windows(prof, dev), copies["start_ns"]))
    rows = copies.group_by("name").agg(
        pl.len().cast(pl.Int64).alias("count"),
        pl.col("duration_ns").sum().alias("total_ns"),
        pl.when(pl.col("bytes").is_not_null().any()).then(pl.col("bytes").sum()).alias("bytes"),
        pl.col("step").n_unique().cast(pl.Int64).alias("steps"),
        pl.col("event_id").sort_by("duration_ns", descending=True).first().alias("example_event"),
    )
    return rows.sort(["total_ns", "name"], descending=[True, False]).select(list(SCHEMA)).cast(SCHEMA)


def pageable_copy(prof: Profile, options: CheckOptions) -> Evidence:
    """The check (options unused)."""
    status = gpu_status(prof, device_events(prof))
    return Evidence(pl.DataFrame(schema=SCHEMA) if status else pageable_frame(prof), status=status)

"""HostSyncChecker (docs/ADVISOR.md, 'GPU checks'): where the host waited for the device, per step.

A sync is a span named in ``SYNC_CALLS``: the CUDA (and HIP, and MTIA) runtime's synchronize calls, and the
PyTorch ops that read a device value on the host (``aten::item`` and the
``aten::_local_scalar_dense`` inside it). Each stalls the host until the device's queue drains,
so the host stops running ahead of the device. A sync nested in another sync of the same
thread (``cudaStreamSynchronize`` inside ``aten::_local_scalar_dense`` inside ``aten::item``)
is one wait: the step's totals count only the outermost ones; the per-name counts count all.
A sync's step is the window its start falls in (``trace.step_windows``).

Columns, one row per (step, name): ``step``, ``name``, ``count``, ``total_ns``,
``outer_count`` / ``outer_ns`` (those not inside another sync), ``example_event`` (the
longest one's ``trace_events.event_id``); steps in time order, then the longest names first.
Only traces with device events are read: on a CPU-only capture ``aten::item`` waits for nothing.
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.advisor.base import CheckOptions, Evidence
from tfprof.queries.advisor.trace import device_events, gpu_status, named_events, step_of, step_windows

SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
              "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize",
              "synchronize", "synchronizeStream",  # MTIA's runtime (category mtia_runtime)
              "aten::item", "aten::_local_scalar_dense")

SCHEMA = {
    "step": pl.Int64, "name": pl.String, "count": pl.Int64, "total_ns": pl.Int64, "outer_count": pl.Int64,
    "outer_ns": pl.Int64, "example_event": pl.Int64,
}


def syncs(prof: Profile) -> pl.DataFrame:
    """Every sync span with ``outer`` (not inside another sync on its thread) and ``step``."""
    found = named_events(prof, SYNC_CALLS).sort("process", "thread", "start_ns", pl.col("end_ns"),
                                                descending=[False, False, False, True])
    thread = ["process", "thread"]
    reach = pl.col("end_ns").cum_max().shift(1).over(thread)  # furthest end of the thread's earlier syncs
    found = found.with_columns((reach.is_null() | (pl.col("start_ns") >= reach)).alias("outer"))
    windows = step_windows(prof, device_events(prof))
    return found.with_columns(step_of(windows, found["start_ns"]))


def sync_frame(prof: Profile) -> pl.DataFrame:
    """The check's rows (module doc)."""
    found = syncs(prof)
    order = found.group_by("step").agg(pl.col("start_ns").min().alias("_first"))
    outer = pl.col("outer")
    rows = found.group_by("step", "name").agg(
        pl.len().cast(pl.Int64).alias("count"),
        pl.col("duration_ns").sum().alias("total_ns"),
        outer.sum().cast(pl.Int64).alias("outer_count"),
        pl.col("duration_ns").filter(outer).sum().alias("outer_ns"),
        pl.col("event_id").sort_by("duration_ns", descending=True).first().alias("example_event"),
    ).join(order, on="step", how="left")
    return rows.sort(["_first", "step", "total_ns", "name"], descending=[False, False, True, False],
                     nulls_last=True).select(list(SCHEMA)).cast(SCHEMA)


def host_sync(prof: Profile, options: CheckOptions) -> Evidence:
    """The check (options unused)."""
    status = gpu_status(prof, device_events(prof))
    return Evidence(pl.DataFrame(schema=SCHEMA) if status else sync_frame(prof), status=status)

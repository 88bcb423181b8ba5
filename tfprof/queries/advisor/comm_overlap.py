"""CommOverlapChecker (docs/ADVISOR.md, 'GPU checks'): collective communication that compute did not hide.

A communication kernel is a kernel whose name holds ``nccl`` or ``rccl`` (any case:
``ncclKernel_AllReduce_RING_LL_Sum_float``, ``ncclDevKernel_…``); every other kernel on the
same device is compute (copies and memsets are neither). A communication kernel's exposed time
is the part of it during which no compute kernel ran on its device: its length minus its
overlap with the union of the device's compute kernels (``trace.union``/``trace.covered``).
Exposed communication is time the step waits on the network; overlapping it (bucketed
all-reduce in DDP, FSDP prefetch) hides it.

Columns, one row per (device, kernel name), devices in order and the most exposed first:
``device``, ``name``, ``count``, ``comm_ns``, ``exposed_ns``, ``exposed_share`` (exposed /
comm), ``example_event`` (the most exposed kernel's ``trace_events.event_id``).
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.advisor.base import CheckOptions, Evidence
from tfprof.queries.advisor.trace import covered, device_events, gpu_status, union

COMM_PATTERN = "(?i)nccl|rccl"

SCHEMA = {
    "device": pl.String, "name": pl.String, "count": pl.Int64, "comm_ns": pl.Int64, "exposed_ns": pl.Int64,
    "exposed_share": pl.Float64, "example_event": pl.Int64,
}


def exposed_comm(prof: Profile) -> pl.DataFrame:
    """Each communication kernel with ``exposed_ns`` (module doc)."""
    kernels = device_events(prof).filter(pl.col("kind") == "kernel")
    comm = pl.col("name").str.contains(COMM_PATTERN)
    talks, computes = kernels.filter(comm), kernels.filter(comm.not_())
    busy = union(computes, ["device"])
    overlap = covered(busy, talks, ["device"], "end_ns") - covered(busy, talks, ["device"], "start_ns")
    return talks.with_columns((pl.col("duration_ns") - overlap).alias("exposed_ns"))


def comm_frame(prof: Profile) -> pl.DataFrame:
    """The check's rows (module doc)."""
    rows = exposed_comm(prof).group_by("device", "name").agg(
        pl.len().cast(pl.Int64).alias("count"),
        pl.col("duration_ns").sum().alias("comm_ns"),
        pl.col("exposed_ns").sum(),
        pl.col("event_id").sort_by("exposed_ns", descending=True).first().alias("example_event"),
    ).with_columns((pl.col("exposed_ns") / pl.col("comm_ns")).fill_nan(0.0).alias("exposed_share"))
    return rows.sort(pl.col("device").cast(pl.Int64, strict=False), "device", pl.col("exposed_ns"), "name",
                     descending=[False, False, True, False]).select(list(SCHEMA)).cast(SCHEMA)


def comm_overlap(prof: Profile, options: CheckOptions) -> Evidence:
    """The check (options unused)."""
    status = gpu_status(prof, device_events(prof))
    return Evidence(pl.DataFrame(schema=SCHEMA) if status else comm_frame(prof), status=status)

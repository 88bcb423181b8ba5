"""LaunchQueueChecker (docs/ADVISOR.md, 'GPU checks'): steps where the GPU waited for the CPU to launch work.

A stream keeps the device busy only while the host queues work ahead of it. The rule, per
device operation k (kernel, copy, memset) that has an earlier operation on its (device, stream):

* ``gap``: k's start minus the latest end of the stream's earlier operations (the stream's idle
  time before k; 0 when k was queued behind them).
* k *waited for its launch* when gap > 0 and the host call that queued k (joined on
  ``correlation``) started at or after that end: the stream ran dry before the host even began
  to issue k, so nothing but the host delayed it.
* such a wait is *launch-bound* when the host call followed the previous host call of the same
  host thread within ``MAX_SPACING_NS``: the host was busy issuing calls back to back, not doing
  something else (a longer pause, e.g. waiting for data, is idle time that GpuIdleChecker shows
  but this check does not blame on the launch queue).

Per (step, device), by the operation's start: ``ops`` (operations with an earlier one on their
stream), ``bound_ops`` (launch-bound waits), ``bound_share`` (bound_ops / ops), ``gap_ns`` (all
stream gaps), ``bound_ns`` (the launch-bound ones), ``median_gap_ns`` and
``median_spacing_ns`` (of the launch-bound waits: the gap and the host calls' spacing, which
match when launching is the bottleneck), ``cpu_bound`` (bound_share >= ``CPU_BOUND_SHARE``),
``example_event`` (the longest launch-bound wait's operation, ``trace_events.event_id``),
``idle_ns`` (the device's idle time in the step, as ``tfprof steps`` and GpuIdleChecker define it)
and ``bound_idle_ns`` (the part of that idle time inside a launch-bound gap of some stream).

``gap_ns`` and ``bound_ns`` add up each stream's gaps, so on a device of several streams they can
exceed the step; the report speaks of ``bound_idle_ns`` against ``idle_ns``, which cannot.
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.advisor.base import CheckOptions, Evidence
from tfprof.queries.advisor.trace import device_events, gpu_status, host_calls, step_of, step_windows

MAX_SPACING_NS = 50_000  # host calls further apart than this: the host was not busy launching
CPU_BOUND_SHARE = 0.5  # a step is CPU-bound when at least this share of its operations waited

SCHEMA = {
    "step": pl.Int64, "device": pl.String, "ops": pl.Int64, "bound_ops": pl.Int64, "bound_share": pl.Float64,
    "gap_ns": pl.Int64, "bound_ns": pl.Int64, "median_gap_ns": pl.Int64, "median_spacing_ns": pl.Int64,
    "cpu_bound": pl.Boolean, "example_event": pl.Int64, "idle_ns": pl.Int64, "bound_idle_ns": pl.Int64,
}


def waits(prof: Profile) -> pl.DataFrame:
    """Each device operation with ``gap_ns``, ``spacing_ns`` (its host call's distance from the
    thread's previous call; null without a host call), ``bound`` and ``step``."""
    dev = device_events(prof)
    stream = ["device", "stream"]
    ops = dev.sort(*stream, "start_ns", "end_ns").with_columns(
        pl.col("end_ns").cum_max().shift(1).over(stream).alias("prev_end_ns"))
    ops = ops.filter(pl.col("prev_end_ns").is_not_null()).with_columns(
        (pl.col("start_ns") - pl.col("prev_end_ns")).clip(lower_bound=0).alias("gap_ns"))
    thread = ["process", "thread"]
    calls = host_calls(prof).sort(*thread, "call_start_ns").with_columns(
        (pl.col("call_start_ns") - pl.col("call_start_ns").shift(1).over(thread)).alias("spacing_ns"))
    ops = ops.join(calls.select("correlation", "call_start_ns", "spacing_ns"), on="correlation", how="left")
    waited = (pl.col("gap_ns") > 0) & (pl.col("call_start_ns") >= pl.col("prev_end_ns"))
    bound = (waited & (pl.col("spacing_ns") <= MAX_SPACING_NS)).fill_null(False)
    ops = ops.with_columns(bound.alias("bound"))
    return ops.with_columns(step_of(step_windows(prof, dev), ops["start_ns"]))


def _idle(prof: Profile, found: pl.DataFrame) -> pl.DataFrame:
    """Per (step, device): ``idle_ns`` (the window less the union of the device's operations) and
    ``bound_idle_ns`` (the idle time inside a launch-bound gap): the union of the operations and
    the bound gaps, less the operations' union, cut at the step windows."""
    from tfprof.queries.breakdown import busy_time  # (breakdown reads this package's trace module)

    dev = device_events(prof)
    windows = step_windows(prof, dev)
    keep = ["device", "event_id", "name", "start_ns", "end_ns"]
    gaps = found.filter("bound").select("device", "event_id", pl.lit("gap").alias("name"),
                                        pl.col("prev_end_ns").alias("start_ns"), pl.col("start_ns").alias("end_ns"))
    ops = dev.select(keep)
    both = pl.concat([ops, gaps.select(keep).cast(ops.schema)])
    grid = dev.select(pl.col("device").unique()).join(
        windows.with_row_index("w").with_columns(pl.col("w").cast(pl.Int64)), how="cross")
    rows = (grid.join(busy_time(ops, windows).rename({"busy_ns": "_busy"}), on=["device", "w"], how="left")
            .join(busy_time(both, windows).rename({"busy_ns": "_with_gaps"}), on=["device", "w"], how="left")
            .with_columns(pl.col("_busy", "_with_gaps").fill_null(0)))
    return rows.select("step", "device", (pl.col("window_ns") - pl.col("_busy")).alias("idle_ns"),
                       (pl.col("_with_gaps") - pl.col("_busy")).alias("bound_idle_ns"))


def queue_frame(prof: Profile) -> pl.DataFrame:
    """The check's rows (module doc)."""
    found = waits(prof)
    bound = pl.col("bound")
    rows = found.group_by("step", "device").agg(
        pl.len().cast(pl.Int64).alias("ops"),
        bound.sum().cast(pl.Int64).alias("bound_ops"),
        pl.col("gap_ns").sum(),
        pl.col("gap_ns").filter(bound).sum().alias("bound_ns"),
        pl.col("gap_ns").filter(bound).median().round(0).alias("median_gap_ns"),
        pl.col("spacing_ns").filter(bound).median().round(0).alias("median_spacing_ns"),
        pl.col("event_id").filter(bound).sort_by(pl.col("gap_ns").filter(bound), descending=True).first()
        .alias("example_event"),
        pl.col("start_ns").min().alias("_first"),
    ).with_columns((pl.col("bound_ops") / pl.col("ops")).alias("bound_share"))
    rows = rows.with_columns((pl.col("bound_share") >= CPU_BOUND_SHARE).alias("cpu_bound"))
    rows = rows.join(_idle(prof, found), on=["step", "device"], how="left")
    return rows.sort(pl.col("device").cast(pl.Int64, strict=False), "device", "_first").select(
        list(SCHEMA)).cast(SCHEMA)


def launch_queue(prof: Profile, options: CheckOptions) -> Evidence:
    """The check (options unused)."""
    status = gpu_status(prof, device_events(prof))
    return Evidence(pl.DataFrame(schema=SCHEMA) if status else queue_frame(prof), status=status)

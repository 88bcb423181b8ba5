"""GpuIdleChecker (docs/ADVISOR.md, 'GPU checks'): the share of each step a GPU ran nothing.

A device is busy while any kernel, copy or memset runs on it (any stream; overlapping events
count once); idle time is the rest of the step's window (``trace.step_windows``). The busy
intervals are cut at the window edges, so an interval running across a step boundary counts in
both steps, each for its part. The evidence also names the longest idle gap of the step: when it
starts, and the device events just before and after it (null at a window edge).

Columns: ``step``, ``device``, ``window_start_ns``, ``window_ns``, ``busy_ns``, ``idle_ns``,
``idle_share`` (idle / window), ``severity`` (``high`` >= 0.5, ``moderate`` >= 0.2, else ``low``),
``longest_gap_ns``, ``gap_start_ns``, ``gap_after_event``, ``gap_after_name``,
``gap_before_event``, ``gap_before_name`` (event ids are ``trace_events.event_id``).
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.advisor.base import CheckOptions, Evidence
from tfprof.queries.advisor.trace import cut_at_windows, device_events, gpu_status, step_windows, union

HIGH, MODERATE = 0.5, 0.2  # idle shares from which a step is `high` / `moderate`

SCHEMA = {
    "step": pl.Int64, "device": pl.String, "window_start_ns": pl.Int64, "window_ns": pl.Int64, "busy_ns": pl.Int64,
    "idle_ns": pl.Int64, "idle_share": pl.Float64, "severity": pl.String, "longest_gap_ns": pl.Int64,
    "gap_start_ns": pl.Int64, "gap_after_event": pl.Int64, "gap_after_name": pl.String,
    "gap_before_event": pl.Int64, "gap_before_name": pl.String,
}


def _gaps(pieces: pl.DataFrame) -> pl.DataFrame:
    """Every idle gap inside a window that has busy pieces: before each piece (from the previous
    piece's end, or the window's start) and after the last one (to the window's end)."""
    key = ["device", "w"]
    inner = pieces.select(
        *key,
        pl.col("end_ns").shift(1).over(key).fill_null(pl.col("window_start_ns")).alias("gap_start_ns"),
        pl.col("start_ns").alias("gap_end_ns"),
        pl.col("last_event").shift(1).over(key).alias("gap_after_event"),
        pl.col("last_name").shift(1).over(key).alias("gap_after_name"),
        pl.col("first_event").alias("gap_before_event"),
        pl.col("first_name").alias("gap_before_name"),
    )
    trailing = pieces.group_by(key).agg(
        pl.col("end_ns").last().alias("gap_start_ns"),
        pl.col("window_end_ns").first().alias("gap_end_ns"),
        pl.col("last_event").last().alias("gap_after_event"),
        pl.col("last_name").last().alias("gap_after_name"),
        pl.lit(None, pl.Int64).alias("gap_before_event"),
        pl.lit(None, pl.String).alias("gap_before_name"),
    )
    return pl.concat([inner, trailing.select(inner.columns)]).with_columns(
        (pl.col("gap_end_ns") - pl.col("gap_start_ns")).alias("longest_gap_ns"))


def idle_frame(prof: Profile) -> pl.DataFrame:
    """One row per (device, step), devices in order, steps in time order (module doc)."""
    dev = device_events(prof)
    if dev.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    windows = step_windows(prof, dev)
    pieces = cut_at_windows(union(dev, ["device"]), windows)
    busy = pieces.group_by("device", "w").agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("busy_ns"))
    longest = _gaps(pieces).sort("longest_gap_ns", "gap_start_ns", descending=[True, False]).group_by(
        "device", "w", maintain_order=True).first()
    grid = dev.select(pl.col("device").unique()).join(
        windows.with_row_index("w").with_columns(pl.col("w").cast(pl.Int64)), how="cross")
    rows = grid.join(busy, on=["device", "w"], how="left").join(longest, on=["device", "w"], how="left")
    idle = pl.col("window_ns") - pl.col("busy_ns")
    rows = rows.with_columns(pl.col("busy_ns").fill_null(0)).with_columns(
        idle.alias("idle_ns"),
        (idle / pl.col("window_ns")).fill_nan(0.0).alias("idle_share"),
        # a device idle through the whole window: the window is its gap
        pl.col("longest_gap_ns").fill_null(pl.col("window_ns")),
        pl.col("gap_start_ns").fill_null(pl.col("window_start_ns")),
    ).with_columns(
        pl.when(pl.col("idle_share") >= HIGH).then(pl.lit("high"))
        .when(pl.col("idle_share") >= MODERATE).then(pl.lit("moderate")).otherwise(pl.lit("low")).alias("severity"))
    rows = rows.sort(pl.col("device").cast(pl.Int64, strict=False), "device", "w")
    return rows.select(list(SCHEMA)).cast(SCHEMA)


def gpu_idle(prof: Profile, options: CheckOptions) -> Evidence:
    """The check: every (device, step) with its idle share (options unused)."""
    rows = idle_frame(prof)
    return Evidence(rows, status=gpu_status(prof, rows))

"""Where each step's time goes on each accelerator (``tfprof steps``, ``tfprof.steps``).

Per step and device, the step's window (``advisor.trace.step_windows``: from its
``ProfilerStep#N`` marker to the next; without markers, the span of its work) is split into
parts that add up to it exactly, as HTA's temporal breakdown does: **compute** (some compute
kernel runs), **communication** (a collective runs and no compute: the communication the
compute did not hide), **memcpy** (only copies or memsets run) and **idle** (nothing runs). Each
part is the length of a union of intervals cut at the window's edges, so overlapping kernels
count once and an event across a step boundary counts in both steps, each for its part.
``communication_total`` is all the time a collective ran, ``overlapped`` the part of it that
compute hid, ``utilization`` the busy share of the window (1 - idle / window).

The device events are the ``kernels`` table of a Kineto or XSpace trace (their ``kind``:
``compute``, ``communication``, ``memcpy_*``, ``memset``), or for tfprof's own profiles the
accelerator executions of ``execs`` (a device named ``…/memcpy`` copies, the others compute),
each step's window the span of all its executions. Times are integer ns.
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.advisor.trace import cut_at_windows, device_events, has_trace, step_windows, union

SCHEMA = {
    "step": pl.Int64, "device": pl.String, "window_start_ns": pl.Int64, "window_ns": pl.Int64, "compute_ns": pl.Int64,
    "communication_ns": pl.Int64, "memcpy_ns": pl.Int64, "idle_ns": pl.Int64, "utilization": pl.Float64,
    "communication_total_ns": pl.Int64, "overlapped_ns": pl.Int64,
}
_WINDOWS = {"step": pl.Int64, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64, "window_ns": pl.Int64}


def breakdown(prof: Profile) -> pl.DataFrame:
    """One row per (step, device), steps in time order, devices by number (module docstring);
    a profile without accelerator work gets one row per step with its window and no device."""
    events, windows = _events_and_windows(prof)
    if windows.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    if events.height == 0:
        return windows.select("step", pl.lit(None, pl.String).alias("device"), "window_start_ns", "window_ns").with_columns(
            *(pl.lit(None, SCHEMA[c]).alias(c) for c in list(SCHEMA)[4:])).select(list(SCHEMA)).cast(SCHEMA)
    compute = pl.col("kind") == "compute"
    communication = pl.col("kind") == "communication"
    parts = {
        "_compute": _busy(events.filter(compute), windows),
        "_with_comm": _busy(events.filter(compute | communication), windows),
        "_all": _busy(events, windows),
        "communication_total_ns": _busy(events.filter(communication), windows),
    }
    grid = events.select(pl.col("device").unique()).join(windows.with_row_index("w").with_columns(
        pl.col("w").cast(pl.Int64)), how="cross")
    for name, busy in parts.items():
        grid = grid.join(busy.rename({"busy_ns": name}), on=["device", "w"], how="left").with_columns(
            pl.col(name).fill_null(0))
    exposed = pl.col("_with_comm") - pl.col("_compute")
    rows = grid.with_columns(
        pl.col("_compute").alias("compute_ns"),
        exposed.alias("communication_ns"),
        (pl.col("_all") - pl.col("_with_comm")).alias("memcpy_ns"),
        (pl.col("window_ns") - pl.col("_all")).alias("idle_ns"),
        (pl.col("_all") / pl.col("window_ns")).fill_nan(0.0).alias("utilization"),
        (pl.col("communication_total_ns") - exposed).alias("overlapped_ns"),
    )
    rows = rows.sort("w", pl.col("device").cast(pl.Int64, strict=False), "device")
    return rows.select(list(SCHEMA)).cast(SCHEMA)


def _busy(events: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Per (device, window row ``w``), the length of the union of ``events`` inside the window."""
    if events.height == 0:
        return pl.DataFrame(schema={"device": pl.String, "w": pl.Int64, "busy_ns": pl.Int64})
    numbered = windows.with_row_index("w").with_columns(pl.col("w").cast(pl.Int64))
    if "step" in events.columns:  # tfprof's own: each execution is in its step, inside its window
        busy = union(events, ["device", "step"])
        return busy.join(numbered.select("step", "w"), on="step").group_by("device", "w").agg(
            (pl.col("end_ns") - pl.col("start_ns")).sum().cast(pl.Int64).alias("busy_ns"))
    pieces = cut_at_windows(union(events, ["device"]), windows)
    return pieces.group_by("device", "w").agg(
        (pl.col("end_ns") - pl.col("start_ns")).sum().cast(pl.Int64).alias("busy_ns"))


def _events_and_windows(prof: Profile) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The device events (``device``, ``kind``, ``start_ns``, ``end_ns``, ``event_id``, ``name``;
    for tfprof's own profiles also their ``step``) and the step windows of ``prof``."""
    if has_trace(prof):
        dev = device_events(prof).select(
            "event_id", "name", "device", pl.col("copy").alias("kind"), "start_ns", "end_ns")
        return dev, step_windows(prof, dev)
    execs = prof.lazy("execs").select(
        "step", pl.col("device").cast(pl.String), pl.col("kind").cast(pl.String),
        (pl.col("start_micros") * 1000).alias("start_ns"),
        ((pl.col("start_micros") + pl.col("duration_micros")) * 1000).alias("end_ns")).collect()
    windows = execs.group_by("step").agg(pl.col("start_ns").min().alias("window_start_ns"),
                                         pl.col("end_ns").max().alias("window_end_ns"))
    windows = windows.sort("window_start_ns", "step").with_columns(
        (pl.col("window_end_ns") - pl.col("window_start_ns")).alias("window_ns")).select(list(_WINDOWS)).cast(_WINDOWS)
    gpu = pl.col("device").str.extract(r"(?i)/device:gpu:(\d+)", 1)
    dev = execs.filter(pl.col("kind") == "accelerator").with_row_index("event_id").select(
        pl.col("event_id").cast(pl.Int64), "step", pl.col("device").alias("name"),
        pl.coalesce(gpu, pl.col("device")).alias("device"),
        pl.when(pl.col("device").str.to_lowercase().str.contains("memcpy")).then(pl.lit("memcpy_other"))
        .otherwise(pl.lit("compute")).alias("kind"), "start_ns", "end_ns")
    return dev, windows

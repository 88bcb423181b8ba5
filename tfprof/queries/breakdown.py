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

The peers draw these figures otherwise, and each of their conventions can be asked for (defaults:
ours): ``window`` ``marker`` (the step marker's own span: the host's step) or ``kernels`` (HTA's
and XProf's GPU step time: the span of the device events the step launched; for tfprof's own
profiles, of its accelerator executions); ``drop_last_step`` (HTA leaves the last step out; a capture of one step keeps it);
``total``, one more row per device (``step`` null) over the whole trace: from the first step
window's start to the last one's end, split the same way (under ``kernels`` with
``drop_last_step``, the window of HTA's temporal breakdown). ``unlinked`` adds, per reason, the
busy time of the device events linked to no op (``kernels.node_id`` null): ``unlinked_no_correlation_ns``
(the event carries no correlation id), ``unlinked_before_capture_ns`` (no launch call in the trace
carries its id: it was launched before the capture began) and ``unlinked_outside_ops_ns`` (its
launch call is inside no op, as apex's fused optimizers launch theirs). docs/FOREIGN.md, 'How our
numbers relate to HTA, XProf and the TensorBoard plugin', measures each difference.
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.advisor.trace import (
    check_window,
    covered,
    device_events,
    has_trace,
    host_calls,
    step_windows,
    union,
)

SCHEMA = {
    "step": pl.Int64, "device": pl.String, "window_start_ns": pl.Int64, "window_ns": pl.Int64, "compute_ns": pl.Int64,
    "communication_ns": pl.Int64, "memcpy_ns": pl.Int64, "idle_ns": pl.Int64, "utilization": pl.Float64,
    "communication_total_ns": pl.Int64, "overlapped_ns": pl.Int64,
}
_WINDOWS = {"step": pl.Int64, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64, "window_ns": pl.Int64}


UNLINKED = {"unlinked_no_correlation_ns": "no_correlation", "unlinked_before_capture_ns": "before_capture",
            "unlinked_outside_ops_ns": "outside_ops"}
"""The ``unlinked`` columns and the ``reason`` of the device events each one measures."""


def breakdown(prof: Profile, window: str = "next", drop_last_step: bool = False, total: bool = False,
              unlinked: bool = False) -> pl.DataFrame:
    """One row per (step, device), steps in time order, devices by number (module docstring);
    a profile without accelerator work gets one row per step with its window and no device. The
    peers' conventions, a whole-trace row and the unlinked time on request (module docstring)."""
    schema = {**SCHEMA, **dict.fromkeys(UNLINKED, pl.Int64)} if unlinked else SCHEMA
    events, windows = _events_and_windows(prof, window, unlinked)
    if drop_last_step and windows.height > 1:
        windows = windows.head(-1)
    if total and windows.height:
        start, end = windows["window_start_ns"].min(), windows["window_end_ns"].max()
        windows = pl.concat([windows, pl.DataFrame(
            {"step": [None], "window_start_ns": [start], "window_end_ns": [end], "window_ns": [end - start]},
            schema=_WINDOWS)])
    if windows.height == 0:
        return pl.DataFrame(schema=schema)
    if events.height == 0:
        return windows.select("step", pl.lit(None, pl.String).alias("device"), "window_start_ns", "window_ns").with_columns(
            *(pl.lit(None, schema[c]).alias(c) for c in list(schema)[4:])).select(list(schema)).cast(schema)
    compute = pl.col("kind") == "compute"
    communication = pl.col("kind") == "communication"
    parts = {
        "_compute": busy_time(events.filter(compute), windows),
        "_with_comm": busy_time(events.filter(compute | communication), windows),
        "_all": busy_time(events, windows),
        "communication_total_ns": busy_time(events.filter(communication), windows),
    }
    if "reason" in events.columns:
        parts.update({c: busy_time(events.filter(pl.col("reason") == r), windows) for c, r in UNLINKED.items()})
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
    if unlinked and "reason" not in events.columns:  # tfprof's own: every execution is an op's
        rows = rows.with_columns(*(pl.lit(None, pl.Int64).alias(c) for c in UNLINKED))
    rows = rows.sort("w", pl.col("device").cast(pl.Int64, strict=False), "device")
    return rows.select(list(schema)).cast(schema)


def busy_time(events: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Per (device, window row ``w``), the length of the union of ``events`` inside the window:
    ``busy_ns`` (a row only where some event runs)."""
    if events.height == 0:
        return pl.DataFrame(schema={"device": pl.String, "w": pl.Int64, "busy_ns": pl.Int64})
    numbered = windows.with_row_index("w").with_columns(pl.col("w").cast(pl.Int64))
    if "step" in events.columns:  # tfprof's own: each execution is in its step, inside its window
        busy = union(events, ["device", "step"])
        per_step = busy.join(numbered.select("step", "w"), on="step").group_by("device", "w").agg(
            (pl.col("end_ns") - pl.col("start_ns")).sum().cast(pl.Int64).alias("busy_ns"))
        whole = numbered.filter(pl.col("step").is_null())["w"]  # the total row: all of it
        if whole.len() == 0:
            return per_step
        every = union(events, ["device"]).group_by("device").agg(
            (pl.col("end_ns") - pl.col("start_ns")).sum().cast(pl.Int64).alias("busy_ns"))
        return pl.concat([per_step, every.select("device", pl.lit(whole[0], pl.Int64).alias("w"), "busy_ns")])
    busy = union(events, ["device"])  # busy in [a, b] is covered(b) - covered(a): windows may overlap
    points = busy.select("device").unique().join(numbered.select("w", "window_start_ns", "window_end_ns"), how="cross")
    inside = covered(busy, points, ["device"], "window_end_ns") - covered(busy, points, ["device"], "window_start_ns")
    return points.select("device", "w", inside.alias("busy_ns"))


def _events_and_windows(prof: Profile, window: str = "next", unlinked: bool = False) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The device events (``device``, ``kind``, ``start_ns``, ``end_ns``, ``event_id``, ``name``;
    for a trace with ``unlinked`` also the ``reason`` it links to no op, null when it does; for
    tfprof's own profiles their ``step``) and the step windows of ``prof``."""
    if has_trace(prof):
        full = device_events(prof)
        if not unlinked:
            return full.select("event_id", "name", "device", pl.col("copy").alias("kind"), "start_ns",
                               "end_ns"), step_windows(prof, full, window)
        calls = host_calls(prof).select("correlation", pl.lit(True).alias("_launched"))
        nodes = prof.lazy("kernels").select("event_id", "node_id").collect()
        reason = (pl.when(pl.col("node_id").is_not_null()).then(pl.lit(None, pl.String))
                  .when(pl.col("correlation").is_null()).then(pl.lit("no_correlation"))
                  .when(pl.col("_launched").is_null()).then(pl.lit("before_capture"))
                  .otherwise(pl.lit("outside_ops")))
        dev = full.join(calls, on="correlation", how="left", maintain_order="left").join(
            nodes, on="event_id", how="left", maintain_order="left").select(
            "event_id", "name", "device", pl.col("copy").alias("kind"), "start_ns", "end_ns", reason.alias("reason"))
        return dev, step_windows(prof, full, window)
    check_window(window)
    execs = prof.lazy("execs").select(
        "step", pl.col("device").cast(pl.String), pl.col("kind").cast(pl.String),
        (pl.col("start_micros") * 1000).alias("start_ns"),
        ((pl.col("start_micros") + pl.col("duration_micros")) * 1000).alias("end_ns")).collect()
    gpu = pl.col("device").str.extract(r"(?i)/device:gpu:(\d+)", 1)
    dev = execs.filter(pl.col("kind") == "accelerator").with_row_index("event_id").select(
        pl.col("event_id").cast(pl.Int64), "step", pl.col("device").alias("name"),
        pl.coalesce(gpu, pl.col("device")).alias("device"),
        pl.when(pl.col("device").str.to_lowercase().str.contains("memcpy")).then(pl.lit("memcpy_other"))
        .otherwise(pl.lit("compute")).alias("kind"), "start_ns", "end_ns")
    spanned = dev if window == "kernels" else execs  # a step's accelerator executions, or all of them
    windows = spanned.group_by("step").agg(pl.col("start_ns").min().alias("window_start_ns"),
                                           pl.col("end_ns").max().alias("window_end_ns"))
    windows = windows.sort("window_start_ns", "step").with_columns(
        (pl.col("window_end_ns") - pl.col("window_start_ns")).alias("window_ns")).select(list(_WINDOWS)).cast(_WINDOWS)
    return dev, windows

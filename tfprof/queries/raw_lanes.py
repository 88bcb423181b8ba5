"""One step of a foreign profile (Kineto, XSpace) laid out for a canvas: the events of its time
that ``raw_trace`` writes, each thread's (and GPU stream's) slices stacked by nesting.

A thread's slices are sorted by start (a longer one first on a tie) and each goes one level
below the slices still open when it starts: an op's children sit under it, a kernel that
overlaps another on its stream under that one. A lane is one (thread, level); its slices never
overlap, so a drawer finds the visible ones by bisection. Tracks are in the order of their first
slice. Instants are in the Chrome trace only.

Columns per slice, in lane then start order: ``ts`` and ``dur`` (µs from the window's start,
floats that keep the trace's ns), ``lane``, ``name`` and ``cat`` (indexes into ``names`` and
``cats``) and ``node`` (an index into ``nodes``, the scope-view name of the op it belongs to: a
kernel's is the op that launched it; -1 where none). Flows (launch to kernel, forward to
backward) join two slices: ``flow_from``, ``flow_to``. Counters: the series the trace recorded
in the window, or where it recorded none, each allocator's bytes in use (``memory_time``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from tfprof.kernels import compiled
from tfprof.profile import Profile
from tfprof.queries.memory_time import memory_points
from tfprof.queries.raw_trace import in_window, step_window


def _levels(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:  # pragma: no cover - numba
    """Each slice's nesting level in its group, over rows sorted by (group, start, end
    descending): the number of slices of its group still open when it starts."""
    n = start.shape[0]
    level = np.empty(n, np.int64)
    stack = np.empty(n, np.int64)
    top = 0
    for i in range(n):
        if i == 0 or group[i] != group[i - 1]:
            top = 0
        while top > 0 and end[stack[top - 1]] <= start[i]:
            top -= 1
        level[i] = top
        stack[top] = i
        top += 1
    return level


def _codes(col: pl.Series) -> tuple[np.ndarray, list[str]]:
    """``col``'s values as int32 indexes into its distinct values (nulls: -1)."""
    values = col.drop_nulls().unique(maintain_order=True)
    codes = col.replace_strict(values, pl.int_range(values.len(), eager=True), default=-1, return_dtype=pl.Int32)
    return codes.to_numpy(), values.cast(pl.String).to_list()


def step_lanes(prof: Profile, step: int) -> dict[str, Any]:
    """Step ``step`` of ``prof`` as lanes of slices (module docstring)."""
    lo, hi = step_window(prof, step)
    spans = (prof.lazy("trace_events").filter(in_window(lo, hi) & (pl.col("phase").cast(pl.String) == "X"))
             .select("event_id", "process", "thread", "category", "name", "start_ns", "duration_ns", "node_id").collect())
    # a track of device events (a GPU stream) is named after its device, as the trace's own
    # labels name it ("GPU 0"), not after the host process; the host's threads come first
    device = (prof.lazy("kernels").select("event_id", pl.col("device").cast(pl.String)).collect()
              .with_columns(pl.concat_str(pl.lit("GPU "), pl.col("device").str.extract(r"(?i)gpu:(\d+)$", 1))
                            .fill_null(pl.col("device")).alias("device")))
    tracks = (spans.join(device, on="event_id", how="left")
              .group_by("process", "thread").agg(pl.col("start_ns").min(), pl.col("event_id").min(),
                                                 pl.col("device").drop_nulls().first())
              .sort(pl.col("device").is_not_null(), "device", "start_ns", "event_id", nulls_last=False)
              .with_row_index("tn"))
    spans = (spans.join(tracks.select("process", "thread", "tn"), on=["process", "thread"], how="left")
             .with_columns((pl.col("start_ns") + pl.col("duration_ns")).alias("end_ns"))
             .sort("tn", "start_ns", "end_ns", "event_id", descending=[False, False, True, False]))
    tn = spans["tn"].to_numpy()
    level = compiled(_levels)(tn, spans["start_ns"].to_numpy(), spans["end_ns"].to_numpy())
    # a track's levels run 0..deepest: its lanes follow the tracks before it
    depth = np.zeros(tracks.height, np.int64)
    np.maximum.at(depth, tn, level + 1)
    base = np.concatenate([[0], np.cumsum(depth)[:-1]])
    lane = (base[tn] + level).astype(np.int32)
    order = np.argsort(lane, kind="stable")  # lane, then start (the sort above)
    spans = spans[order].with_columns(pl.Series("lane", lane[order])).with_row_index("k")
    names = prof.lazy("nodes").select("node_id", pl.col("name").cast(pl.String).alias("node_name")).collect()
    spans = spans.join(names, on="node_id", how="left", maintain_order="left")
    name, name_list = _codes(spans["name"])
    cat, cat_list = _codes(spans["category"])
    node, node_list = _codes(spans["node_name"])
    flows = (prof.lazy("flows").filter(pl.col("from_ns").is_between(lo, hi) & pl.col("to_ns").is_not_null())
             .select("from_event", "to_event").collect()
             .join(spans.select(pl.col("event_id").alias("from_event"), pl.col("k").alias("a")), on="from_event")
             .join(spans.select(pl.col("event_id").alias("to_event"), pl.col("k").alias("b")), on="to_event"))
    labels = tracks.select(pl.concat_str(pl.coalesce("device", pl.col("process").cast(pl.String)).fill_null(""),
                                         pl.lit(" · "), pl.col("thread").cast(pl.String).fill_null(""))).to_series().to_list()
    return {
        "step": step,
        "origin_ns": lo,
        "lanes": [{"label": labels[t] if lev == 0 else "", "track": t}
                  for t in range(tracks.height) for lev in range(depth[t])],
        "ts": (spans["start_ns"] - lo).to_numpy() / 1000,
        "dur": spans["duration_ns"].to_numpy() / 1000,
        "lane": spans["lane"].to_numpy(),
        "name": name, "names": name_list,
        "cat": cat, "cats": cat_list,
        "node": node, "nodes": node_list,
        "flow_from": flows["a"].cast(pl.Int32).to_numpy(),
        "flow_to": flows["b"].cast(pl.Int32).to_numpy(),
        "counters": _counters(prof, lo, hi),
    }


def _counters(prof: Profile, lo: int, hi: int) -> list[dict[str, Any]]:
    """The recorded counter series in the window, each as ``label``, ``unit`` (``bytes`` for a
    memory series), ``ts`` (µs from ``lo``) and ``values``; where none was recorded, each
    allocator's bytes in use."""
    c = (prof.lazy("counters").filter(pl.col("time_ns").is_between(lo, hi)).collect()
         .with_columns(pl.col("process", "name", "series").cast(pl.String).fill_null(""))
         .sort("process", "name", "series", "time_ns"))
    if c.height:
        return [{"label": " · ".join(p for p in key if p),
                 "unit": "bytes" if "memory" in f"{key[1]} {key[2]}".lower() else "",
                 "ts": ((part["time_ns"] - lo) / 1000).to_list(),
                 "values": part["value"].fill_nan(None).to_list()}
                for key, part in c.group_by("process", "name", "series", maintain_order=True)]
    points = memory_points(prof).filter(pl.col("time_micros").is_between(lo // 1000, -(-hi // 1000)))
    return [{"label": f"{allocator} bytes in use", "unit": "bytes",
             "ts": (part["time_micros"] - lo / 1000).to_list(), "values": part["in_use"].to_list()}
            for (allocator,), part in points.group_by("allocator", maintain_order=True)]

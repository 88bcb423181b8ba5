"""What the GPU checks share: a foreign trace's device events, host calls, step windows and busy time.

The GPU checks (docs/ADVISOR.md, 'GPU checks') read the ``kernels`` and ``trace_events`` tables
of a Kineto or XSpace trace, whole columns at a time:

* ``device_events``: kernels, copies and memsets: the ``kernels`` table the ingest fills for
  Kineto and XSpace alike (docs/FOREIGN.md, 'GPU events'), with a copy's size from its args.
* ``host_calls``: every other event carrying a correlation id (Kineto's ``correlation`` arg,
  XSpace's ``correlation_id`` stat): the runtime or driver call (``cudaLaunchKernel``,
  ``cudaMemcpyAsync`` …; XSpace names a launch after its kernel) that queued a device event.
* ``step_windows``: step N runs from the start of its ``ProfilerStep#N`` marker (host side, the
  earliest one; in an XSpace, the events with a ``step_num`` stat N, else the ``tf_function_call``
  events numbered in time order, as the ingest reads steps) to the start of the next marker; a marker with no other event starting inside
  it is no step (PyTorch opens an empty one as the profiler stops), and its time goes to the
  step before; the last step to the later of its marker's end
  and the end of the last device event starting in it. Without markers the whole capture is
  step 0, from the first device event's start to the last one's end. ``step_of`` puts a time in
  its window (before the first marker: the first step, as the ingest does for ops). Two peers'
  windows on request (``window``): ``marker``, the marker's own span (the host's step, as the
  trace draws it: from the marker's start to its end; the last step too), and ``kernels``, the
  span of the device events the step launched (HTA's temporal breakdown, XProf's GPU step time:
  from the first one's start to the last one's end, an event in the
  step of its launch call's start; events whose launch call is not in the trace shape no window
  unless no event has one). Such windows can leave gaps between steps or overlap.
* ``union`` and ``covered``: the busy intervals of a set of events (overlaps merged) and, for
  any time, how much busy time lies before it; the busy time in [a, b] is ``covered(b) -
  covered(a)``. Both are a sort, a running max and an as-of join: no loop over events.

Times are integer ns throughout.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tfprof.errors import OptionError
from tfprof.profile import Profile

FOREIGN_KINDS = ("kineto", "xspace")  # Profile.source of a foreign trace (tfprof.ingest.foreign.KINDS)
STEP_PREFIX = "ProfilerStep#"

_EVENT_SCHEMA = {
    "event_id": pl.Int64, "name": pl.String, "kind": pl.String, "copy": pl.String, "pageable": pl.Boolean,
    "device": pl.String, "stream": pl.String,
    "correlation": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "duration_ns": pl.Int64, "bytes": pl.Int64,
}


def has_trace(prof: Profile) -> bool:
    """Whether ``prof`` is a foreign trace (its ``trace_events`` are what these checks read)."""
    return prof.source in FOREIGN_KINDS


def gpu_status(prof: Profile, device: pl.DataFrame) -> str | None:
    """Why a GPU check has nothing to read (``Evidence.status``), or None when it has events."""
    if not has_trace(prof):
        return "no_trace"
    if "kernels" in prof.predates:
        return "store_predates_kernels"
    return None if device.height else "no_gpu_events"


def _arg(key: str) -> pl.Expr:
    return pl.col("args").str.json_path_match(f"$.{key}")


_KIND = {"compute": "kernel", "communication": "kernel", "memset": "memset"}  # kernels.kind -> kind (else memcpy)
_XSPACE_COPY = r"size:(\d+)"  # XSpace's `memcpy_details` stat: "kind_src:pageable kind_dst:device size:N …"


def device_events(prof: Profile) -> pl.DataFrame:
    """One row per kernel, copy and memset (the ``kernels`` table, for Kineto and XSpace alike):
    ``event_id``, ``name``, ``kind`` (kernel, memcpy, memset), ``copy`` (``kernels.kind``:
    ``memcpy_htod`` …), ``pageable`` (a copy from pageable host memory: Kineto's name says
    ``Pageable``, XSpace's ``memcpy_details`` ``kind_src:pageable``), ``device`` (the GPU's number
    in ``/device:gpu:N``), ``stream``, ``correlation``, ``start_ns``, ``end_ns``, ``duration_ns``,
    ``bytes`` (a copy's or memset's size: Kineto's ``bytes`` arg, an MTIA copy's ``size``, XSpace's
    ``memcpy_details``; null when not recorded)."""
    if not has_trace(prof):
        return pl.DataFrame(schema=_EVENT_SCHEMA)
    return prof.memo("gpu_device_events", lambda: _device_events(prof))  # each GPU check reads them


def _device_events(prof: Profile) -> pl.DataFrame:
    args = prof.lazy("trace_events").select("event_id", "args")
    details = _arg("memcpy_details").fill_null("")
    return prof.lazy("kernels").join(args, on="event_id", how="left").select(
        "event_id",
        pl.col("name").cast(pl.String),
        pl.col("kind").cast(pl.String).replace_strict(_KIND, default="memcpy", return_dtype=pl.String),
        pl.col("kind").cast(pl.String).alias("copy"),
        (pl.col("name").cast(pl.String).str.contains("Pageable", literal=True)
         | details.str.contains("kind_src:pageable", literal=True)).alias("pageable"),
        pl.col("device").cast(pl.String).str.extract(r"gpu:(.+)$", 1).alias("device"),
        pl.col("stream").cast(pl.String),
        "correlation",
        "start_ns",
        (pl.col("start_ns") + pl.col("duration_ns")).alias("end_ns"),
        "duration_ns",
        pl.coalesce(_arg("bytes"), details.str.extract(_XSPACE_COPY, 1),
                    pl.when(pl.col("kind").cast(pl.String).str.starts_with("memcpy")).then(_arg("size")))  # MTIA's
        .cast(pl.Int64, strict=False).alias("bytes"),
    ).sort("event_id").collect().cast(_EVENT_SCHEMA)


def host_calls(prof: Profile) -> pl.DataFrame:
    """The host-side events that queued device work (any event but a device one carrying a
    correlation id: Kineto's ``correlation`` arg, XSpace's ``correlation_id`` stat; XSpace names
    a launch after its kernel): ``correlation``, ``call_event``, ``call`` (its name),
    ``process``, ``thread``, ``call_start_ns``, ``call_end_ns``, ``call_ns``."""
    return prof.memo("gpu_host_calls", lambda: _host_calls(prof))


def _host_calls(prof: Profile) -> pl.DataFrame:
    ev = prof.lazy("trace_events").filter(pl.col("args").is_not_null() & (pl.col("phase").cast(pl.String) == "X"))
    ev = ev.join(prof.lazy("kernels").select("event_id"), on="event_id", how="anti")
    ev = ev.with_columns(pl.coalesce(_arg("correlation"), _arg("correlation_id")).cast(pl.Int64, strict=False)
                         .alias("correlation"))
    return ev.filter(pl.col("correlation").is_not_null()).sort("event_id").select(
        "correlation",
        pl.col("event_id").alias("call_event"),
        pl.col("name").cast(pl.String).alias("call"),
        pl.col("process").cast(pl.String),
        pl.col("thread").cast(pl.String),
        pl.col("start_ns").alias("call_start_ns"),
        (pl.col("start_ns") + pl.col("duration_ns")).alias("call_end_ns"),
        pl.col("duration_ns").alias("call_ns"),
    ).unique("correlation", keep="first", maintain_order=True).collect()


def named_events(prof: Profile, names: tuple[str, ...]) -> pl.DataFrame:
    """Spans whose name is one of ``names``: ``event_id``, ``name``, ``process``, ``thread``,
    ``start_ns``, ``end_ns``, ``duration_ns``."""
    ev = prof.lazy("trace_events").with_columns(pl.col("name").cast(pl.String))
    return ev.filter(pl.col("name").is_in(list(names)) & (pl.col("phase").cast(pl.String) == "X")).select(
        "event_id", "name", pl.col("process").cast(pl.String), pl.col("thread").cast(pl.String), "start_ns",
        (pl.col("start_ns") + pl.col("duration_ns")).alias("end_ns"), "duration_ns",
    ).collect()


WINDOWS = ("next", "marker", "kernels")
"""A step's window: from its marker to the next (ours), its marker's own span, the span of the
device events it launched (HTA's and XProf's GPU step) (module doc)."""

_WINDOW_SCHEMA = {"step": pl.Int64, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64, "window_ns": pl.Int64}


def step_windows(prof: Profile, device: pl.DataFrame, window: str = "next") -> pl.DataFrame:
    """``step``, ``window_start_ns``, ``window_end_ns``, ``window_ns`` in time order (module doc);
    ``device`` is ``device_events``' rows (for ``kernels``: with their ``correlation``)."""
    check_window(window)
    marks = prof.memo("gpu_step_marks", lambda: _step_marks(prof))  # each GPU check asks for the windows
    if marks.height == 0:
        if device.height == 0:
            return pl.DataFrame(schema=_WINDOW_SCHEMA)
        marks = pl.DataFrame({"step": [0], "window_start_ns": [device["start_ns"].min()],
                              "_mark_end": [device["end_ns"].max()]})
    last_start = marks["window_start_ns"][-1]
    tail = device.filter(pl.col("start_ns") >= last_start)["end_ns"].max()
    last_end = max(marks["_mark_end"][-1], tail if tail is not None else last_start)
    end = pl.col("_mark_end") if window == "marker" else pl.col("window_start_ns").shift(-1).fill_null(last_end)
    windows = marks.with_columns(end.alias("window_end_ns")).select(
        "step", "window_start_ns", "window_end_ns",
        (pl.col("window_end_ns") - pl.col("window_start_ns")).alias("window_ns")).cast(_WINDOW_SCHEMA)
    return _kernel_windows(prof, device, windows) if window == "kernels" else windows


def check_window(window: str) -> None:
    """Raise ``OptionError`` unless ``window`` is one of ``WINDOWS``."""
    if window not in WINDOWS:
        raise OptionError(f"--window {window}: give one of {', '.join(WINDOWS)}")


def _kernel_windows(prof: Profile, device: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Each step's ``kernels`` window: the span of the device events whose launch call starts in
    its marker-to-marker window (all device events by their own start when none has a launch
    call in the trace); a step with none has no window."""
    if device.height == 0 or windows.height == 0:
        return pl.DataFrame(schema=_WINDOW_SCHEMA)
    calls = host_calls(prof).select("correlation", "call_start_ns")
    launched = device.select("correlation", "start_ns", "end_ns").join(calls, on="correlation", how="inner")
    if launched.height == 0:
        launched = device.select("start_ns", "end_ns", pl.col("start_ns").alias("call_start_ns"))
    spans = launched.with_columns(step_of(windows, launched["call_start_ns"])).group_by("step").agg(
        pl.col("start_ns").min().alias("window_start_ns"), pl.col("end_ns").max().alias("window_end_ns"))
    return spans.sort("window_start_ns", "step").select(
        "step", "window_start_ns", "window_end_ns",
        (pl.col("window_end_ns") - pl.col("window_start_ns")).alias("window_ns")).cast(_WINDOW_SCHEMA)


def _step_marks(prof: Profile) -> pl.DataFrame:
    """The step markers that some other event starts inside: ``step``, ``window_start_ns``,
    ``_mark_end``, in time order (module doc)."""
    ev = prof.lazy("trace_events").with_columns(pl.col("name").cast(pl.String),
                                                pl.col("category").cast(pl.String).fill_null(""))
    if prof.source == "xspace":
        is_mark, step = _xspace_marks(ev)
    else:
        is_mark = pl.col("name").str.starts_with(STEP_PREFIX)
        step = pl.col("name").str.strip_prefix(STEP_PREFIX).cast(pl.Int64, strict=False)
    marks = (
        ev.filter(is_mark & pl.col("category").str.starts_with("gpu_").not_() & (pl.col("phase").cast(pl.String) == "X"))
        .with_columns(step.alias("step"))
        .filter(pl.col("step").is_not_null())
        .group_by("step")
        .agg(pl.col("start_ns").min().alias("window_start_ns"),
             (pl.col("start_ns") + pl.col("duration_ns")).max().alias("_mark_end"))
        .sort("window_start_ns", "step")
        .collect()
    )
    others = np.sort(ev.filter(is_mark.not_()).select("start_ns").collect().to_series().to_numpy())
    inside = (np.searchsorted(others, marks["_mark_end"].to_numpy(), side="right")
              - np.searchsorted(others, marks["window_start_ns"].to_numpy(), side="left"))
    return marks.filter(pl.Series(inside > 0))


def _xspace_marks(ev: pl.LazyFrame) -> tuple[pl.Expr, pl.Expr]:
    """(which events mark steps, the step each marks) in an XSpace's trace events: those with a
    ``step_num`` stat, that number; without any, the ``tf_function_call`` events, numbered 0, 1, …
    in time order (ties in event order)."""
    args = pl.col("args").fill_null("")
    numbered = args.str.contains('"step_num"', literal=True)
    if ev.select(numbered.any()).collect().item():
        return numbered, args.str.json_path_match("$.step_num").cast(pl.Int64, strict=False)
    calls = args.str.contains('"tf_function_call"', literal=True)
    rank = pl.struct("start_ns", "event_id").rank("dense").over(calls) - 1
    return calls, pl.when(calls).then(rank).cast(pl.Int64)


def window_index(windows: pl.DataFrame, times: pl.Series) -> np.ndarray:
    """For each time, the row of ``windows`` it falls in (-1 before the first window)."""
    starts = windows["window_start_ns"].to_numpy()
    return np.searchsorted(starts, times.to_numpy(), side="right") - 1


def cut_at_windows(busy: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """The busy intervals cut at the window edges: one row per (interval, window it overlaps),
    with ``w`` (the window's row) and the window's bounds."""
    last = windows.height - 1
    first_w = window_index(windows, busy["start_ns"])
    last_w = window_index(windows, busy["end_ns"] - 1).clip(max=last)  # an end is exclusive
    cut = busy.with_columns(pl.Series("_w0", first_w.clip(min=0)), pl.Series("_w1", last_w))
    cut = cut.filter(pl.col("_w1") >= pl.col("_w0"))
    cut = cut.with_columns(pl.int_ranges("_w0", pl.col("_w1") + 1).alias("w")).explode("w")
    cut = cut.join(windows.with_row_index("w").with_columns(pl.col("w").cast(pl.Int64)), on="w")
    return cut.with_columns(
        pl.max_horizontal("start_ns", "window_start_ns").alias("start_ns"),
        pl.min_horizontal("end_ns", "window_end_ns").alias("end_ns"),
    ).filter(pl.col("end_ns") > pl.col("start_ns")).sort("device", "w", "start_ns")


def step_of(windows: pl.DataFrame, times: pl.Series) -> pl.Series:
    """The step of each time: its window's, the first step's before the first window (null: no windows)."""
    if windows.height == 0:
        return pl.Series("step", [None] * len(times), pl.Int64)
    return pl.Series("step", windows["step"].to_numpy()[np.maximum(window_index(windows, times), 0)])


def union(events: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """The busy intervals of ``events`` (``start_ns``, ``end_ns``) per ``by``: overlapping or
    touching events merged. Columns: ``by``, ``start_ns``, ``end_ns``, ``first_event``/``first_name``
    (the event starting the interval), ``last_event``/``last_name`` (the event ending it) and
    ``before_ns`` (busy time of the group before the interval), sorted by ``by`` and start."""
    if events.height == 0:
        return pl.DataFrame(schema={**{b: events.schema[b] for b in by}, "start_ns": pl.Int64, "end_ns": pl.Int64,
                                    "first_event": pl.Int64, "first_name": pl.String, "last_event": pl.Int64,
                                    "last_name": pl.String, "before_ns": pl.Int64})
    ev = events.sort(*by, "start_ns", "end_ns")
    reach = pl.col("end_ns").cum_max().shift(1).over(by)  # the furthest end of the group's earlier events
    ev = ev.with_columns((reach.is_null() | (pl.col("start_ns") > reach)).cum_sum().over(by).alias("_run"))
    merged = ev.group_by(*by, "_run").agg(
        pl.col("start_ns").min(), pl.col("end_ns").max(),
        pl.col("event_id").first().alias("first_event"), pl.col("name").first().alias("first_name"),
        pl.col("event_id").sort_by("end_ns").last().alias("last_event"),
        pl.col("name").sort_by("end_ns").last().alias("last_name"),
    ).sort(*by, "start_ns")
    length = pl.col("end_ns") - pl.col("start_ns")
    return merged.with_columns((length.cum_sum().over(by) - length).alias("before_ns")).drop("_run")


def covered(busy: pl.DataFrame, points: pl.DataFrame, by: list[str], at: str) -> pl.Series:
    """For each row of ``points``, the busy time of its group (``by``) before time ``points[at]``
    (``busy`` is a ``union``): the intervals started before it, the last one cut at it."""
    keyed = points.select(*by, pl.col(at).alias("_t")).with_row_index("_row")
    found = keyed.sort("_t").join_asof(
        busy.select(*by, "start_ns", "end_ns", "before_ns").sort("start_ns"),
        left_on="_t", right_on="start_ns", by=by, strategy="backward", check_sortedness=False,
    )
    inside = (pl.min_horizontal(pl.col("_t"), pl.col("end_ns")) - pl.col("start_ns")).clip(lower_bound=0)
    return found.sort("_row").select((pl.col("before_ns") + inside).fill_null(0).cast(pl.Int64).alias(at))[at]

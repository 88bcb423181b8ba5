"""One step's timeline for a browser, as columns a canvas draws from, and the same step as the
Chrome trace file tfprof writes (for Perfetto or chrome://tracing).

A tfprof profile's bars are the graph view's ``-output timeline`` events
(``tfprof.queries.timeline.graph_events``): one lane per device and thread, with the
allocator's bytes in use per device. A foreign profile's are the trace's own events, nested per
thread and stream, with its flows and counters (``tfprof.queries.raw_lanes``). Either way each
lane's bars are sorted by start and never overlap, which lets a drawer find the visible ones by
bisection; names are listed once and referred to by index.

>>> import tfprof
>>> t = step_timeline(tfprof.load(tfprof.sample_path()), 0)
>>> len(t["ts"]) == len(t["dur"]) == len(t["lane"]) > 0, t["lanes"][0]["label"]
(True, '/job:localhost/replica:0/task:0/device:cpu:0 #0')
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from tfprof.api.run import check_step
from tfprof.errors import OptionError
from tfprof.profile import Profile
from tfprof.queries.options import Options
from tfprof.queries.timeline import graph_events
from tfprof.views.timeline import render_trace


def default_step(prof: Profile) -> int:
    """The step a timeline shows when none is asked for: the last one (the advisor's choice too)."""
    steps = prof.frame("steps")["step"]
    if steps.len() == 0:
        raise OptionError("The timeline needs run metadata: this profile has no steps")
    return int(steps.max())


def _events(prof: Profile, step: int, options: Options | None) -> pl.DataFrame:
    check_step(prof, step)
    if step < 0:
        raise OptionError("The timeline shows one step: give a step, not -1")
    return graph_events(prof, (options or Options()).with_(step=step)).events


def step_timeline(prof: Profile, step: int, options: Options | None = None) -> dict[str, Any]:
    """Step ``step``'s timeline as columns (module docstring): ``lanes`` (``label``, ``track``:
    the lanes of one thread or device share it), per bar ``ts`` (µs from the step's first bar),
    ``dur`` (µs), ``lane``, ``name`` (an index into ``names``) and ``node`` (into ``nodes``: the
    scope-view name the bar opens); ``flow_from``/``flow_to`` (bars a flow joins);
    ``counters``: ``label``, ``unit``, ``ts``, ``values``. A foreign profile's are its own
    events (``tfprof.queries.raw_lanes``)."""
    from tfprof.queries.raw_lanes import step_lanes
    from tfprof.queries.raw_trace import has_events

    if has_events(prof):
        check_step(prof, step)
        return step_lanes(prof, step)
    events = _events(prof, step, options)
    devices = dict(events.filter(pl.col("kind") == "process").select("pid", "device").iter_rows())
    ops = events.filter(pl.col("kind") == "op").select("pid", "tid", "ts", "dur", "name")
    origin = int(ops["ts"].min()) if ops.height else 0
    lanes = ops.select("pid", "tid").unique().sort("pid", "tid").with_row_index("lane")
    ops = ops.join(lanes, on=["pid", "tid"]).sort("lane", "ts")
    names = ops["name"].unique(maintain_order=True)
    name = ops["name"].replace_strict(names, pl.int_range(names.len(), eager=True), return_dtype=pl.Int32).to_numpy()
    memory = events.filter(pl.col("kind") == "memory").select("pid", "ts", "bytes_in_use")
    counters = [
        {"label": f"{devices.get(pid, pid)} bytes in use", "unit": "bytes", "ts": (part["ts"] - origin).to_list(),
         "values": part["bytes_in_use"].to_list()}
        for (pid,), part in memory.group_by("pid", maintain_order=True)
    ]
    none = np.empty(0, np.int32)
    return {
        "step": step,
        "origin": origin,
        "lanes": [{"label": f"{devices.get(pid, pid)} #{tid}", "track": pid}
                  for pid, tid in lanes.select("pid", "tid").iter_rows()],
        "ts": (ops["ts"] - origin).cast(pl.Float64).to_numpy(),
        "dur": ops["dur"].cast(pl.Float64).to_numpy(),
        "lane": ops["lane"].cast(pl.Int32).to_numpy(),
        "name": name, "names": names.to_list(),
        "node": name, "nodes": names.to_list(),  # a bar is a node: it opens itself
        "flow_from": none, "flow_to": none,
        "counters": counters,
    }


def chrome_trace(prof: Profile, step: int, options: Options | None = None) -> bytes:
    """Step ``step``'s Chrome trace JSON, the bytes the graph view's ``-output timeline`` writes
    (a foreign trace's: the step's own events, ``tfprof.queries.raw_trace``)."""
    from tfprof.queries.raw_trace import has_events, raw_trace

    if has_events(prof):
        check_step(prof, step)
        return raw_trace(prof, step)
    return render_trace(_events(prof, step, options))

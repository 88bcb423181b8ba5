"""One step's timeline for a browser: the events the graph view's ``-output timeline`` writes
(``tfprof.queries.timeline.graph_events``), as columns a canvas draws from, and the same step
as the Chrome trace file tfprof writes (for Perfetto or chrome://tracing).

``step_timeline`` keeps the op bars (one lane per device and thread, each lane's bars sorted by
start and never overlapping, which lets a drawer find the visible ones by bisection) and the
allocator's bytes in use per device; names are listed once and referred to by index.

>>> import tfprof
>>> t = step_timeline(tfprof.load(tfprof.sample_path()), 0)
>>> len(t["ts"]) == len(t["dur"]) == len(t["lane"]) > 0, t["lanes"][0]["label"]
(True, '/job:localhost/replica:0/task:0/device:cpu:0 #0')
"""

from __future__ import annotations

from typing import Any

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
    """Step ``step``'s timeline as columns (module docstring): ``lanes`` (``pid``, ``tid``,
    ``label``), per bar ``ts`` (µs from the step's first bar), ``dur`` (µs), ``lane`` and
    ``name`` (an index into ``names``); ``counters``: per device ``label``, ``ts``, ``bytes``;
    ``origin``: the first bar's absolute start (µs)."""
    events = _events(prof, step, options)
    devices = dict(events.filter(pl.col("kind") == "process").select("pid", "device").iter_rows())
    ops = events.filter(pl.col("kind") == "op").select("pid", "tid", "ts", "dur", "name")
    origin = int(ops["ts"].min()) if ops.height else 0
    lanes = ops.select("pid", "tid").unique().sort("pid", "tid").with_row_index("lane")
    ops = ops.join(lanes, on=["pid", "tid"]).sort("lane", "ts")
    names = ops["name"].unique(maintain_order=True)
    ops = ops.with_columns(pl.col("name").replace_strict(names, pl.int_range(names.len()), return_dtype=pl.Int64))
    memory = events.filter(pl.col("kind") == "memory").select("pid", "ts", "bytes_in_use")
    counters = [
        {"label": f"{devices.get(pid, pid)} bytes in use", "ts": (part["ts"] - origin).to_list(),
         "bytes": part["bytes_in_use"].to_list()}
        for (pid,), part in memory.group_by("pid", maintain_order=True)
    ]
    return {
        "step": step,
        "origin": origin,
        "lanes": [{"pid": pid, "tid": tid, "label": f"{devices.get(pid, pid)} #{tid}"}
                  for pid, tid in lanes.select("pid", "tid").iter_rows()],
        "ts": (ops["ts"] - origin).to_list(),
        "dur": ops["dur"].to_list(),
        "lane": ops["lane"].to_list(),
        "name": ops["name"].to_list(),
        "names": names.to_list(),
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

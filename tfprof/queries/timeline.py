"""Timeline events: what tfprof's ``-output timeline`` draws, as rows
(docs/TFPROF_BEHAVIOUR.md, 'Timeline output').

Two layouts, both returned as one frame of trace events in file order (``seq``), rendered to
Chrome trace JSON by ``tfprof.views.timeline``:

* ``tree_events`` (scope and code views; docs/TFPROF_BEHAVIOUR.md, 'Scope and code timelines'):
  the displayed tree as nested bars. Each shown node is a bar as long as its
  ``total_exec_micros``, its shown children laid back to back from its start (zero-time
  children and everything below them are left out); one process per tree depth.
* ``graph_events`` (graph view; docs/TFPROF_BEHAVIOUR.md, 'Graph timeline'): the real kernel and
  scheduling times of one step for the displayed nodes, packed into lanes per device, with
  arrows for data that crosses canonical devices and, per GPU, the allocator's bytes in use and
  the ten largest allocations at each (thinned) sample (those memory tracks are ``timeline_memory.py``).

Event columns: ``seq``, ``kind`` (process, op, flow_start, flow_end, memory,
top_allocations), ``pid``, ``tid``, ``ts``, ``dur`` (us), ``flow_id``, ``name`` (node name),
``op`` (tree bars repeat the name here), ``process`` (scope, ops, memory, allocations) and
``device`` (process rows), ``bytes_in_use``, ``top_bytes``/``top_names``/``rest_bytes``
(top_allocations). Labels and units are the renderer's business.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from numba import njit

from tfprof.profile import Profile
from tfprof.queries.forest import display
from tfprof.queries.graph import graph_forest
from tfprof.queries.options import Options
from tfprof.queries.spec import as_spec
from tfprof.queries.timeline_memory import memory_counters

EVENT_SCHEMA = {
    "seq": pl.Int64,
    "kind": pl.String,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "ts": pl.Int64,
    "dur": pl.Int64,
    "flow_id": pl.Int64,
    "name": pl.String,
    "op": pl.String,
    "process": pl.String,
    "device": pl.String,
    "bytes_in_use": pl.Int64,
    "top_bytes": pl.List(pl.Int64),
    "top_names": pl.List(pl.String),
    "rest_bytes": pl.Int64,
}


def _events(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """Concatenate event parts (each with its own ``seq``) into EVENT_SCHEMA, in ``seq`` order."""
    frames = [p.select([pl.col(c).cast(t) if c in p.columns else pl.lit(None, t).alias(c) for c, t in EVENT_SCHEMA.items()])
              for p in parts]
    return pl.concat(frames).sort("seq") if frames else pl.DataFrame(schema=EVENT_SCHEMA)


# --------------------------------------------------------------------------- scope / code


def tree_events(frame: pl.DataFrame) -> pl.DataFrame:
    """The nested-bar timeline of a displayed tree (``scope``/``code`` frame, root first).

    tfprof (tfprof_timeline.h EmitTreeNode) starts at the root with ts 0 and its total time;
    a child with no time is skipped with its subtree; depth d gets process d, named when first
    reached. We never abort when children outlast their parent (docs/COMPATIBILITY.md row 16).
    """
    n = frame.height
    level = frame["level"].to_numpy().astype(np.int64)
    parent = frame["parent_row"].to_numpy().astype(np.int64)
    total = frame["total_exec_micros"].to_numpy().astype(np.int64)
    emitted = np.zeros(n, np.bool_)
    start = np.zeros(n, np.int64)
    if n:
        emitted[0] = True
    for depth in range(1, int(level.max(initial=0)) + 1):  # one pass per tree level
        here = np.flatnonzero(level == depth)
        p = parent[here]
        on = emitted[p] & (total[here] > 0)
        emitted[here] = on
        dur = np.where(on, total[here], 0)
        # children of one parent are contiguous in pre-order: exclusive running sum per parent
        run = np.cumsum(dur) - dur
        first = np.r_[True, p[1:] != p[:-1]]
        run -= np.maximum.accumulate(np.where(first, run, 0))
        start[here] = start[p] + run
    shown = np.flatnonzero(emitted)
    bars = pl.DataFrame(
        {
            "row": shown,
            "pid": level[shown],
            "ts": start[shown],
            "dur": total[shown],
            "name": frame["name"].gather(shown),
        }
    ).with_columns(pl.col("name").alias("op"), pl.lit(0, pl.Int64).alias("tid"), pl.lit("op").alias("kind"))
    first_at_depth = bars.filter(pl.col("pid").is_first_distinct())
    processes = first_at_depth.select(
        (pl.col("row") * 2).alias("seq"), pl.lit("process").alias("kind"), "pid", pl.lit("scope").alias("process")
    )
    return _events([processes, bars.with_columns((pl.col("row") * 2 + 1).alias("seq")).drop("row")])


# --------------------------------------------------------------------------- graph


@dataclass(frozen=True)
class GraphTimeline:
    """One step's graph timeline: the events, and each GPU's peak allocator bytes (tfprof
    prints `<device> peak memory: ...` for them)."""

    events: pl.DataFrame
    peaks: pl.DataFrame  # device, peak_bytes


@njit(cache=True)
def _lanes(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:  # pragma: no cover - numba
    """tfprof's AllocateLanes over rows sorted by (group, start): the first lane whose
    intervals, scanned from the latest back, reach one ending before ``start`` (intervals ending
    exactly at ``start`` are passed over) before one ending after it; else a new lane."""
    n = start.shape[0]
    lane = np.empty(n, np.int64)
    prev = np.full(n, -1, np.int64)  # the interval before it in its lane
    last = np.empty(n, np.int64)  # the latest interval of each lane of the current group
    lanes = 0
    for i in range(n):
        if i == 0 or group[i] != group[i - 1]:
            lanes = 0
        s = start[i]
        chosen = -1
        for candidate in range(lanes):
            j = last[candidate]
            usable = True
            while j >= 0:
                if end[j] > s:
                    usable = False
                    break
                if s > end[j]:
                    break
                j = prev[j]
            if usable:
                chosen = candidate
                break
        if chosen < 0:
            chosen = lanes
            lanes += 1
        else:
            prev[i] = last[chosen]
        last[chosen] = i
        lane[i] = chosen
    return lane


def displayed_graph(prof: Profile, opts: Options) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The graph view's displayed nodes (display order, root excluded) and its accounted forest."""
    spec = as_spec("graph", opts, prof)
    forest = graph_forest(prof, spec)
    rows, _ = display(forest, spec)
    return rows, forest


def graph_events(prof: Profile, opts: Options) -> GraphTimeline:
    """The graph view's timeline for step ``opts.step`` (>= 0), as tfprof's
    GenerateGraphTimeline draws it (tfprof_timeline.cc; docs/TFPROF_BEHAVIOUR.md, 'Graph timeline')."""
    step = opts.step
    rows, forest = displayed_graph(prof, opts)
    trackable = _trackable(prof, step)
    shown = (
        rows.select("node_id", "name").with_row_index("order").with_columns(pl.col("order").cast(pl.Int64))
        .join(trackable, on="node_id", how="semi", maintain_order="left")
    )
    devices = prof.lazy("devices").select(pl.col("device").cast(pl.String), "is_canonical").collect()
    execs = (
        prof.lazy("execs").with_row_index("exec_seq").filter(pl.col("step") == step)
        .select("exec_seq", "node_id", pl.col("device").cast(pl.String), "kind", "start_micros", "duration_micros")
        .collect()
    )
    # Time nodes: per device, the first exec (display order, then record order) at each start.
    runs = execs.join(shown, on="node_id").sort("order", "device", "exec_seq")
    procs = (
        runs.group_by("device").agg(pl.col("order").min()).sort("order", "device")
        .with_row_index("pid").with_columns(pl.col("pid").cast(pl.Int64))
    )
    tnodes = (
        runs.unique(["device", "start_micros"], keep="first", maintain_order=True)
        .join(procs.select("device", "pid"), on="device")
        .sort("pid", "start_micros")
    )
    lane = _lanes(
        tnodes["pid"].to_numpy(),
        tnodes["start_micros"].to_numpy(),
        (tnodes["start_micros"] + tnodes["duration_micros"]).to_numpy(),
    )
    tnodes = tnodes.with_columns(pl.Series("tid", lane)).sort("pid", "tid", "start_micros").with_row_index("tn")
    flows = _flows(prof, step, tnodes, execs, devices, forest, trackable)

    n_time = procs.height
    memory, peaks, mem_devices = memory_counters(prof, step, shown, n_time)
    parts = [
        procs.select(pl.col("pid").alias("seq"), pl.lit("process").alias("kind"), "pid",
                     pl.lit("ops").alias("process"), "device"),
        tnodes.select(
            (pl.col("tn") + n_time).alias("seq"), pl.lit("op").alias("kind"), "pid", "tid",
            pl.col("start_micros").alias("ts"), pl.col("duration_micros").alias("dur"), "name",
        ),
    ]
    base = n_time + tnodes.height
    parts.append(
        mem_devices.with_row_index("k").select(
            pl.concat_list(pl.col("k") * 2 + base, pl.col("k") * 2 + base + 1).alias("seq"),
            pl.lit("process").alias("kind"),
            pl.concat_list("pid", pl.col("pid") + 1).alias("pid"),
            pl.lit(["memory", "allocations"]).alias("process"),
            "device",
        ).explode("seq", "pid", "process")
    )
    base += 2 * mem_devices.height
    parts.append(flows.with_columns(pl.col("seq") + base))
    base += flows.height
    parts.append(memory.with_columns(pl.col("seq") + base))
    return GraphTimeline(events=_events(parts), peaks=peaks)


def _trackable(prof: Profile, step: int) -> pl.DataFrame:
    """Nodes tfprof can place on a timeline at ``step`` (TFGraphNode::trackable): a record
    with a start time in the step, and a canonical and host device."""
    placed = prof.lazy("nodes").filter(pl.col("canonical_device").is_not_null() & pl.col("host_device").is_not_null())
    return (
        prof.lazy("node_steps").filter((pl.col("step") == step) & (pl.col("all_start_micros") != 0))
        .select("node_id").join(placed.select("node_id"), on="node_id", how="semi").unique().collect()
    )


def _flows(prof, step, tnodes, execs, devices, forest, trackable) -> pl.DataFrame:
    """Arrows from an input's time node on another canonical device to each time node on a
    canonical device (tfprof: only cross-device flows), two events each, in emission order."""
    canonical = devices.filter(pl.col("is_canonical")).select("device")
    dest = tnodes.join(canonical, on="device", how="semi").select(
        pl.col("tn").alias("dst"), "node_id", pl.col("device").alias("dst_device"),
        pl.col("start_micros").alias("dst_start"),
    )
    ok_inputs = forest.select("node_id").join(trackable, on="node_id", how="semi")  # accounted and trackable
    inputs = (
        prof.lazy("node_inputs").filter(pl.col("input_id").is_not_null()).select("node_id", "input_idx", "input_id")
        .collect().join(ok_inputs.rename({"node_id": "input_id"}), on="input_id", how="semi")
    )
    sources = (
        execs.filter(pl.col("kind") == "cpu").join(canonical, on="device", how="semi")
        .select(pl.col("node_id").alias("input_id"), pl.col("device").alias("src_device"), "start_micros", "exec_seq")
    )
    arrows = (
        dest.join(inputs, on="node_id")
        .join(sources, on="input_id")
        .filter(pl.col("src_device") != pl.col("dst_device"))
        .join(tnodes.select(pl.col("tn").alias("src"), pl.col("device").alias("src_device"), "start_micros"),
              on=["src_device", "start_micros"])
        # registration order (tnodes_ by device name, then start, then input, then exec)
        .sort("dst_device", "dst_start", "input_idx", "src_device", "exec_seq")
        .with_row_index("registered")
        .sort("src", "registered")
        .with_row_index("flow_id", offset=1)
        .with_columns(pl.col("flow_id").cast(pl.Int64))
    )
    ends = tnodes.select("tn", "pid", "tid", "start_micros", "duration_micros", "name")
    arrows = arrows.join(ends.rename(lambda c: "s_" + c), left_on="src", right_on="s_tn").join(
        ends.rename(lambda c: "d_" + c), left_on="dst", right_on="d_tn"
    ).sort("flow_id")
    starts = arrows.select(
        ((pl.col("flow_id") - 1) * 2).alias("seq"), pl.lit("flow_start").alias("kind"), "flow_id",
        pl.col("s_pid").alias("pid"), pl.col("s_tid").alias("tid"),
        (pl.col("s_start_micros") + pl.col("s_duration_micros")).alias("ts"), pl.col("s_name").alias("name"),
    )
    ends_ = arrows.select(
        ((pl.col("flow_id") - 1) * 2 + 1).alias("seq"), pl.lit("flow_end").alias("kind"), "flow_id",
        pl.col("d_pid").alias("pid"), pl.col("d_tid").alias("tid"), pl.col("d_start_micros").alias("ts"),
        pl.col("s_name").alias("name"),
    )
    return pl.concat([starts, ends_]).sort("seq")

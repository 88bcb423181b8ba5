"""A foreign trace's events, normalized by its reader, turned into tfprof's tables.

Both readers (Kineto JSON, XSpace) hand over one polars frame of events with a ``role`` each:
``op`` (becomes a node execution), ``scope`` (names the ops inside it: an ``nn.Module``, a user
annotation), ``frame`` (a Python frame: the code view's stack), ``step`` (a step marker),
``memory`` (an allocation instant), ``flow_start``/``flow_end`` and ``other``. Everything here
works on whole columns: which span encloses which event comes from one pass of
``nesting.parents``, and paths, self times and stacks from a few array steps per nesting level.
The mapping rules are written down in docs/FOREIGN.md.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from tfprof.ingest import derive, validate
from tfprof.ingest.foreign import nesting
from tfprof.schema import TABLES, conform

EVENT_COLUMNS = {
    "event_id": pl.Int64, "process": pl.String, "thread": pl.String, "category": pl.String, "name": pl.String,
    "phase": pl.String, "start_ns": pl.Int64, "dur_ns": pl.Int64, "args": pl.String, "role": pl.String,
    "label": pl.String, "op_type": pl.String, "device": pl.String, "accelerator": pl.Boolean,
    "step_num": pl.Int64, "mem_bytes": pl.Int64, "flow_id": pl.String,
}
"""The columns a reader gives (nulls where a column means nothing for an event)."""

_FRAME = r"^(.*)\((\d+)\): (.*)$"  # Kineto's python_function name: `file.py(LINE): function`


def _us(ns: pl.Expr) -> pl.Expr:
    """Nanoseconds to tfprof's whole microseconds, rounded to the nearest (halves to even)."""
    return (ns.cast(pl.Float64) / 1000).round(0, mode="half_to_even").cast(pl.Int64)


def _nested(ev: pl.DataFrame) -> pl.DataFrame:
    """``ev`` in (thread, start, longest first) order with ``parent``: the row of the innermost
    span enclosing each event on its thread (-1: none)."""
    ev = ev.with_columns(
        pl.struct("process", "thread").rank("dense").cast(pl.Int64).alias("_thread"),
        (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
    ).sort(["_thread", "start_ns", "end_ns", "event_id"], descending=[False, False, True, False])
    parent = nesting.parents(ev["_thread"].to_numpy(), ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy(),
                             (ev["phase"] == "X").to_numpy())
    return ev.with_columns(pl.Series("parent", parent))


def _paths(label: pl.Series, scope_parent: np.ndarray, rows: np.ndarray) -> pl.Series:
    """The scope path of each row in ``rows``: its ancestors' labels and its own, joined by ``/``."""
    path = label.gather(rows)
    anc = scope_parent[rows]
    while (anc >= 0).any():
        has = pl.Series(anc >= 0)
        prefix = label.gather(np.maximum(anc, 0))
        path = pl.select(pl.when(has).then(prefix + "/" + path).otherwise(path)).to_series()
        anc = np.where(anc >= 0, scope_parent[np.maximum(anc, 0)], -1)
    return path


def _stacks(ev: pl.DataFrame, frame_parent: np.ndarray, rows: np.ndarray, node_ids: np.ndarray) -> pl.DataFrame:
    """(node_id, depth, label) of the Python frames enclosing each row of ``rows``, outermost first."""
    parts = []
    anc, level = frame_parent[rows], 0
    while (anc >= 0).any():
        has = anc >= 0
        parts.append(pl.DataFrame({"node_id": node_ids[has], "level": level, "row": anc[has]}))
        anc, level = np.where(has, frame_parent[np.maximum(anc, 0)], -1), level + 1
    if not parts:
        return pl.DataFrame(schema={"node_id": pl.Int64, "depth": pl.Int32, "label": pl.String})
    frames = pl.concat(parts)
    frames = frames.with_columns(ev["label"].gather(frames["row"]).alias("label"))
    return frames.with_columns(
        (pl.col("level").max().over("node_id") - pl.col("level")).cast(pl.Int32).alias("depth")
    ).select("node_id", "depth", "label")


def build(ev: pl.DataFrame, *, counters: pl.DataFrame | None = None) -> dict[str, pa.Table]:
    """tfprof's tables (plus trace_events, counters and flows) from a reader's normalized events."""
    ev = _nested(ev.select([pl.col(c).cast(t) for c, t in EVENT_COLUMNS.items()]))
    parent = ev["parent"].to_numpy()
    role = ev["role"].to_numpy()
    label = ev["label"]
    is_op = role == "op"
    op_parent = nesting.nearest(parent, is_op)
    scope_parent = nesting.nearest(parent, is_op | (role == "scope"))
    frame_parent = nesting.nearest(parent, role == "frame")
    ops = np.flatnonzero(is_op)

    # self time: the span less the spans of the ops directly inside it
    dur = ev["dur_ns"].to_numpy()
    inner = np.zeros(len(ev), dtype=np.int64)
    children = ops[op_parent[ops] >= 0]
    np.add.at(inner, op_parent[children], dur[children])
    op = ev[ops].with_columns(
        pl.Series("path", _paths(label, scope_parent, ops)),
        pl.Series("self_ns", np.maximum(dur[ops] - inner[ops], 0)),
        pl.Series("row", ops),
    )
    op = op.with_columns(_steps(ev, op))
    nodes = (op.group_by("path").agg(pl.col("event_id").min().alias("first"), pl.col("op_type").first(),
                                     pl.col("device").sort_by("event_id").first())
             .sort("first").with_row_index("node_id").with_columns(pl.col("node_id").cast(pl.Int64)))
    op = op.join(nodes.select("path", "node_id"), on="path").sort("event_id")
    return _tables(ev, op, nodes, op_parent, frame_parent, counters)


def _steps(ev: pl.DataFrame, op: pl.DataFrame) -> pl.Expr:
    """The step of each op: the last step marker that starts at or before it (the first step
    for ops before any marker; step 0 when the trace has no markers)."""
    marks = ev.filter(pl.col("role") == "step").group_by("step_num").agg(pl.col("start_ns").min()).sort("start_ns")
    if marks.height == 0:
        return pl.lit(0, pl.Int64).alias("step")
    starts = marks["start_ns"].to_numpy()
    pos = np.searchsorted(starts, op["start_ns"].to_numpy(), side="right") - 1
    return pl.Series("step", marks["step_num"].to_numpy()[np.maximum(pos, 0)])


def _tables(ev, op, nodes, op_parent, frame_parent, counters) -> dict[str, pa.Table]:
    out: dict[str, pa.Table] = {}
    host = nodes["device"].str.replace(r"gpu:(\d+)$", "cpu:0")
    out["nodes"] = conform("nodes", {
        "node_id": nodes["node_id"], "name": nodes["path"], "op": nodes["op_type"],
        "shape": [[]] * nodes.height, "params": [0] * nodes.height, "float_ops": [0] * nodes.height,
        "canonical_device": nodes["device"], "host_device": host})
    types = pl.concat([nodes.select("node_id", op_type="op_type"), nodes.select("node_id", op_type="device")])
    out["node_types"] = conform("node_types", types.unique().sort("node_id", "op_type").to_arrow())
    op = op.with_columns(
        _us(pl.col("start_ns")).alias("start_micros"), _us(pl.col("self_ns")).alias("duration_micros"),
        _us(pl.col("start_ns") + pl.col("dur_ns")).alias("end_micros"),
        pl.when(pl.col("accelerator")).then(pl.lit("accelerator")).otherwise(pl.lit("cpu")).alias("kind"),
        pl.when(pl.col("accelerator")).then(pl.col("device") + "/stream:all").otherwise(pl.col("device"))
        .alias("exec_device"),
    )
    out["node_steps"] = conform("node_steps", op.group_by("node_id", "step").agg(
        pl.len().cast(pl.Int64).alias("run_count"), pl.col("start_micros").min().alias("all_start_micros"),
        pl.col("end_micros").max().alias("latest_end_micros")).to_arrow())
    streams = op.filter(pl.col("accelerator")).select("node_id", "step", device=pl.col("device") + "/stream:" +
                                                       pl.col("thread"))
    out["exec_devices"] = conform("exec_devices", pl.concat([
        op.select("node_id", "step", device="exec_device"), op.select("node_id", "step", "device"), streams,
    ]).unique(maintain_order=True).to_arrow())
    out["execs"] = conform("execs", op.select("node_id", "step", device="exec_device", kind="kind",
                                              start_micros="start_micros", duration_micros="duration_micros").to_arrow())
    out.update(_memory(ev, op, op_parent))
    out["code_frames"] = _code_frames(ev, op, frame_parent)
    out["steps"] = conform("steps", {"step": op["step"].unique().sort()})
    for name in ("node_inputs", "output_shapes", "node_attrs", "output_memory", "allocator_memory",
                 "checkpoint_tensors"):
        out[name] = TABLES[name].schema.empty_table()
    out["devices"] = derive.devices_table(out["exec_devices"], out["nodes"])
    out["info"] = conform("info", {"has_trace": [out["code_frames"].num_rows > 0], "miss_accelerator_stream": [False]})
    out["trace_events"] = _trace_events(ev, op)
    out["counters"] = conform("counters", counters.to_arrow()) if counters is not None else TABLES[
        "counters"].schema.empty_table()
    out["flows"] = _flows(ev)
    return validate.validated(out, graph=False)  # no graph: top-level ops are not `runtime_node` findings


def _memory(ev, op, op_parent) -> dict[str, pa.Table]:
    """Allocation instants, each charged to the innermost op around it: one ``allocations`` row
    per instant, one ``memory`` record per op execution that allocated or freed."""
    rows = np.flatnonzero(ev["role"].to_numpy() == "memory")
    owner = op_parent[rows]
    mem = ev[rows].with_columns(pl.Series("row", owner)).filter(pl.col("row") >= 0).join(
        op.select("row", "node_id", "step", "end_micros"), on="row").sort("event_id")
    allocations = mem.select("node_id", "step", alloc_micros=_us(pl.col("start_ns")), alloc_bytes="mem_bytes")
    per_exec = mem.with_columns(pl.col("mem_bytes").cum_sum().over("row").alias("_live")).group_by(
        "row", "node_id", "step", "end_micros").agg(
        pl.col("mem_bytes").filter(pl.col("mem_bytes") > 0).sum().alias("requested_bytes"),
        pl.col("_live").max().clip(0).alias("peak_bytes"),
        pl.col("mem_bytes").sum().clip(0).alias("residual_bytes"),
    ).sort("row").with_columns(pl.int_range(pl.len()).over("node_id", "step").cast(pl.Int32).alias("seq"))
    zeros = {c: pl.lit(0, pl.Int64) for c in ("output_bytes", "host_temp_bytes", "host_persistent_bytes",
                                              "accelerator_temp_bytes", "accelerator_persistent_bytes",
                                              "allocator_bytes_in_use")}
    memory = per_exec.select("node_id", "step", "seq", pl.col("end_micros").alias("memory_micros"),
                             "requested_bytes", "peak_bytes", "residual_bytes", **zeros)
    return {"memory": conform("memory", memory.to_arrow()), "allocations": conform("allocations", allocations.to_arrow())}


def _code_frames(ev, op, frame_parent) -> pa.Table:
    """The Python stack of each node's first execution (tfprof keeps one trace per node)."""
    first = op.group_by("node_id").agg(pl.col("row").sort_by("event_id").first()).sort("node_id")
    frames = _stacks(ev, frame_parent, first["row"].to_numpy(), first["node_id"].to_numpy())
    parsed = frames.with_columns(
        pl.col("label").str.extract(_FRAME, 1).alias("file"),
        pl.col("label").str.extract(_FRAME, 2).cast(pl.Int32).alias("lineno"),
        pl.col("label").str.extract(_FRAME, 3).alias("function"),
    ).select(
        "node_id", "depth", pl.col("file").fill_null(""), pl.col("lineno").fill_null(0),
        pl.coalesce("function", "label").alias("function"), pl.lit("").alias("line"),
        pl.lit(0, pl.Int32).alias("func_start_line"),
    )
    return conform("code_frames", parsed.to_arrow())


def _trace_events(ev, op) -> pa.Table:
    kept = ev.filter(pl.col("role").is_in(["flow_start", "flow_end"]).not_()).join(
        op.select("event_id", "node_id", "step"), on="event_id", how="left")
    return conform("trace_events", kept.select(
        "event_id", "process", "thread", "category", "name", "phase", "start_ns", duration_ns="dur_ns",
        node_id="node_id", step="step", args="args").to_arrow())


def _flows(ev) -> pa.Table:
    """One row per flow: its start and end instants and the spans they sit in."""
    ends = ev.with_columns(pl.when(pl.col("parent") >= 0).then(pl.col("event_id").gather(pl.col("parent").clip(0)))
                           .alias("span"))
    start = ends.filter(pl.col("role") == "flow_start").group_by("flow_id", "category", maintain_order=True).agg(
        pl.col("start_ns").first().alias("from_ns"), pl.col("span").first().alias("from_event"))
    end = ends.filter(pl.col("role") == "flow_end").group_by("flow_id", "category", maintain_order=True).agg(
        pl.col("start_ns").first().alias("to_ns"), pl.col("span").first().alias("to_event"))
    flows = start.join(end, on=["flow_id", "category"], how="left", nulls_equal=True)
    return conform("flows", flows.select("flow_id", "category", "from_ns", "to_ns", "from_event", "to_event").to_arrow())

"""A foreign trace's events, normalized by its reader, turned into tfprof's tables.

Both readers (Kineto JSON, XSpace) hand over one polars frame of events with a ``role`` each:
``op`` (becomes a node execution; on an accelerator, a GPU event that ``gpu`` links to the op
that launched it), ``scope`` (names the ops inside it: an ``nn.Module``, a user annotation),
``frame`` (a Python frame: the code view's stack), ``step`` (a step marker), ``memory`` (an
allocation instant, charged by ``memory``), ``flow_start``/``flow_end`` and ``other``. Everything
here works on whole columns: which span encloses which event comes from one pass of
``nesting.parents``, and paths, self times and stacks from a few array steps per nesting level.
The mapping rules are written down in docs/FOREIGN.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import polars as pl
import pyarrow as pa

from tfprof.ingest import derive, validate
from tfprof.ingest.foreign import codes, gpu, memory, nesting, paths, trace_table
from tfprof.ingest.foreign.progress import Tell, silent
from tfprof.schema import TABLES
from tfprof.schema.conform import conform

EVENT_COLUMNS = {
    "event_id": pl.Int64, "process": pl.String, "thread": pl.String, "category": pl.String, "name": pl.String,
    "phase": pl.String, "start_ns": pl.Int64, "dur_ns": pl.Int64, "args": pl.String, "role": pl.String,
    "label": pl.String, "op_type": pl.String, "device": pl.String, "accelerator": pl.Boolean,
    "step_num": pl.Int64, "mem_bytes": pl.Int64, "flow_id": pl.String, "correlation": pl.Int64,
    "allocator": pl.String, "in_use": pl.Int64, "reserved": pl.Int64, "seq": pl.Int64, "backward": pl.Boolean, "copy_direction": pl.String,
    "own_op": pl.Boolean,
}
"""The columns a reader gives (nulls where a column means nothing for an event). ``correlation``:
for a GPU event (``accelerator``) and for the host runtime call that launched it, the id that
joins the two (Kineto's ``correlation`` arg, XSpace's ``correlation_id`` stat); null otherwise.
``allocator`` and ``in_use``: for a memory instant, its allocator and the bytes that allocator
held after it (``memory``); ``reserved``: what it had reserved then, where the trace says (Kineto). ``seq`` and ``backward``: an op's autograd sequence number and whether
it runs a backward node (``paths.backward_scopes``). ``copy_direction``: for a GPU event that is a
copy whose name does not say its direction, the direction its args say (an MTIA `dma_request`'s
``HOST_TO_DEVICE``; ``gpu.kind``). ``own_op``: for a GPU event, that it is the execution of an op of
its own, its ``label`` (an XLA kernel: the HLO instruction it ran), not of the op that launched it.
A reader may leave out the columns of ``OPTIONAL_COLUMNS``: they are
then null."""

OPTIONAL_COLUMNS = ("correlation", "allocator", "in_use", "reserved", "seq", "backward", "copy_direction", "own_op")
"""The columns of ``EVENT_COLUMNS`` a reader need not give (a capture without GPU events,
allocators or autograd has no use for them)."""

ABSENT_COLUMNS = ("copy_direction", "own_op", "reserved")
"""Of ``OPTIONAL_COLUMNS``, those that stay left out when a reader leaves them out, where the
others become columns of nulls: one event in thousands at most has one, and a column of nulls
(a text view per event) would cost tens of MB on a large trace. ``gpu.events`` reads them as null."""

Flops = Callable[[pl.DataFrame, Callable[[np.ndarray], pl.Series]], pl.Series]
"""A reader's float-op estimate per op execution: given the executions (``name``: the node path,
``op``: the op type) and a function giving the ``args`` of some of them (by row), one count each
(0 for none)."""

_REPEATED = ("process", "thread", "category", "name", "phase", "role", "label", "op_type", "device", "flow_id")
"""Text columns of few distinct values, held as categoricals (4 bytes a row) while building."""

_FRAME = r"^(.*)\((\d+)\): (.*)$"  # Kineto's python_function name: `file.py(LINE): function`
_CALL_STACK = "$['Call stack']"  # PyTorch 1.8's per-op stack: `file.py(LINE): function;…`, innermost first


def _us(ns: pl.Expr) -> pl.Expr:
    """Nanoseconds to tfprof's whole microseconds, rounded to the nearest (halves to even), in
    integers: an epoch time in ns is beyond a double's exact integers."""
    q, r = ns // 1000, ns % 1000  # floor division: r in [0, 1000) for negative times too
    return q + ((r > 500) | ((r == 500) & (q % 2 != 0))).cast(pl.Int64)


def _nested(ev: pl.DataFrame, args: pl.Series | pa.Array | None) -> tuple[pl.DataFrame, pl.Series | pa.Array]:
    """``ev`` (its ``EVENT_COLUMNS`` but ``args``) in (thread, start, longest first) order with
    ``row``, its position in that order, ``parent``: the row of the innermost span enclosing each
    event on its thread (-1: none), and ``_at``: its position in ``ev`` as given; and ``ev``'s
    ``args``, in the order given (large and needed only by the trace table, so left unsorted).
    Threads are ordered by (process, thread) name; only the sort keys are sorted, then the
    columns are gathered (``_sorted``)."""
    # (lazy frames collected: polars' eager calls cost far more on a frame of millions of rows)
    ev = ev.lazy().select([(pl.col(c) if c in ev.columns or c not in OPTIONAL_COLUMNS else pl.lit(None))
                           .cast(pl.Categorical if c in _REPEATED else t).alias(c)
                           for c, t in EVENT_COLUMNS.items() if (c != "args" or args is None)
                           and (c in ev.columns or c not in ABSENT_COLUMNS)]).collect()
    args = ev["args"] if args is None else args
    ev = ev.lazy().drop("args", strict=False).with_columns(
        pl.col("accelerator").fill_null(False),
        (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
    ).collect()
    thread = _thread_ranks(ev["process"], ev["thread"])
    # a sort of numpy arrays (``nesting.order``) beats a multi-column polars sort
    order = nesting.order(thread, ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy(), ev["event_id"].to_numpy())
    box = [ev]
    del ev
    ev = _sorted(box, order, thread)
    parent = nesting.parents(ev["_thread"].to_numpy(), ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy(),
                             (ev["phase"] == "X").to_numpy())
    return ev.lazy().with_columns(pl.Series("parent", parent), pl.int_range(pl.len(), dtype=pl.Int64).alias("row")
                                  ).collect(), args


def _sorted(box: list[pl.DataFrame], order: np.ndarray, thread: np.ndarray) -> pl.DataFrame:
    """The frame in ``box`` (taken over: the list is emptied) in ``order``, with ``_at`` (each row's
    place in it) and ``_thread`` (``thread``, gathered too). A column at a time, each freed once
    gathered, so that the two orders of a column are not all alive at once; and some not gathered:
    a column of nulls is made anew, ``_at`` is ``order`` itself, and so is ``event_id`` where the
    ids are the rows' places (as the XSpace reader numbers its events)."""
    cols = box.pop().get_columns()
    at = pl.Series("_at", order, dtype=pl.Int64)
    ids = next(c for c in cols if c.name == "event_id")
    ids_are_rows = ids.null_count() == 0 and np.array_equal(ids.to_numpy(), np.arange(len(ids)))
    index = pl.Series(order)
    out = []
    for i in range(len(cols)):
        column, cols[i] = cols[i], None
        if column.name == "event_id" and ids_are_rows:
            out.append(at.alias("event_id"))
        elif column.null_count() == len(column):
            out.append(pl.repeat(None, len(column), dtype=column.dtype, eager=True).alias(column.name))
        else:  # (a gather from many chunks, as polars' lazy queries leave a column, costs about twice
            # a copy into one and a gather from it)
            out.append((column.rechunk() if column.n_chunks() > 1 else column).gather(index))
        del column
    return pl.DataFrame([*out, at, pl.Series("_thread", thread[order], dtype=pl.Int64)])


def _thread_ranks(process: pl.Series, thread: pl.Series) -> np.ndarray:
    """The dense rank of each event's (process, thread) pair (categoricals) in name order: the
    pairs are told apart by their codes, and only the few distinct ones are compared as text."""
    first, inverse = codes.distinct(process, thread)
    names = pl.DataFrame({"p": process.gather(first).cast(pl.String), "t": thread.gather(first).cast(pl.String)})
    order = names.with_row_index("_k").sort("p", "t", nulls_last=False)["_k"].to_numpy()
    rank = np.empty(len(first), dtype=np.int64)
    rank[order] = np.arange(len(first))
    return rank[inverse]


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
    frames = frames.with_columns(ev["label"].gather(frames["row"]).cast(pl.String).alias("label"))
    return frames.with_columns(
        (pl.col("level").max().over("node_id") - pl.col("level")).cast(pl.Int32).alias("depth")
    ).select("node_id", "depth", "label")


def build(ev: pl.DataFrame | list[pl.DataFrame], *, args: pl.Series | pa.Array | list | None = None,
          counters: pl.DataFrame | None = None, flops: Flops | None = None,
          job: dict | None = None, tell: Tell = silent, findings: validate.Findings | None = None) -> dict[str, pa.Table]:
    """tfprof's tables (plus trace_events, counters, flows and kernels) from a reader's normalized
    events; ``args``: their ``args`` apart from the frame (an Arrow array, which polars would
    copy), indexed by event id, when the frame has none;
    ``flops`` estimates each op execution's float ops (None: the reader has no count);
    ``job``: the ``info`` table's ``rank``, ``world_size`` and ``host`` where the trace records them;
    ``tell`` is told how far it has got (``progress``); ``findings``: what the reader found
    itself, for the ``validation`` table.
    Given in a one-item list, the events are taken over (the list is emptied), so that their
    text columns are freed once build holds its own categorical copy of them; so are the
    ``args``, freed once the trace table holds its copy of them."""
    args_at = "_at" if args is None else "event_id"  # what ``args`` is indexed by
    tell(0, "op nesting")
    ev, args = _nested(ev.pop() if isinstance(ev, list) else ev, args.pop() if isinstance(args, list) else args)
    box = [args]  # the trace table takes the args over: they are freed once it has its own copy
    parent, on_gpu = ev["parent"].to_numpy(), ev["accelerator"].to_numpy()
    is_role = {r: (ev["role"] == r).to_numpy() for r in ("op", "scope", "frame")}
    label = ev["label"]
    is_op = is_role["op"] & ~on_gpu
    op_parent = nesting.nearest(parent, is_op)
    scope_parent = nesting.nearest(parent, is_op | is_role["scope"])
    frame_parent = nesting.nearest(parent, is_role["frame"])
    scope_parent, renamed = paths.backward_scopes(ev, parent, is_op, label, scope_parent)
    ops = np.flatnonzero(is_op)

    # self time: the span less the spans of the ops directly inside it
    dur = ev["dur_ns"].to_numpy()
    inner = np.zeros(len(ev), dtype=np.int64)
    children = ops[op_parent[ops] >= 0]
    np.add.at(inner, op_parent[children], dur[children])
    marks = _marks(ev)
    # (only the columns the op executions are read for: they are joined and sorted again below)
    op = ev.lazy().select("event_id", "row", "_at", "start_ns", "dur_ns", "op_type", "device").collect()[ops]
    op = op.with_columns(
        pl.Series("path", paths.scope_paths(label, scope_parent, ops, renamed)),
        pl.Series("self_ns", np.maximum(dur[ops] - inner[ops], 0)),
    )
    op = op.with_columns(_step_of(marks, op["start_ns"]))
    events = gpu.events(ev, op_parent, paths.scope_paths(label, scope_parent, np.flatnonzero(is_role["op"] & on_gpu),
                                                         renamed), scope_parent)
    own = gpu.own_nodes(events, op["path"], functools.partial(paths.scope_paths, label, scope_parent, renamed=renamed))
    own = own.with_columns(_step_of(marks, own["start_ns"]))
    mem = memory.instants(ev, op_parent)
    outside = mem.filter(pl.col("owner") < 0)
    outside = outside.with_columns(_step_of(marks, outside["start_ns"]))
    nodes = _nodes(op, own, outside)
    op = op.join(nodes.select("path", "node_id"), on="path").sort("event_id")
    tell(0.3, "float ops" if flops is not None else "tables")
    if flops is not None:
        at = op[args_at].to_numpy()
        op = op.with_columns(flops(op.select(pl.col("path").alias("name"), pl.col("op_type").alias("op")),
                                   lambda rows: pl.Series("args", trace_table.texts_at(box[0], at[rows])))
                             .cast(pl.Int64).fill_null(0).alias("float_ops"))
    at_op = op.select(pl.col("row").alias("owner"), "node_id", "step",
                      _us(pl.col("start_ns") + pl.col("dur_ns")).alias("end_micros"))
    acc = pl.concat([
        events.filter(pl.col("op_row").is_not_null()).rename({"op_row": "owner"}).join(
            at_op.drop("end_micros"), on="owner").with_columns(pl.lit(True).alias("linked"),
                                                               pl.lit(0, pl.Int64).alias("runs")),
        own.join(nodes.select("path", "node_id"), on="path").with_columns(  # (a run of no host op's)
            (~pl.col("linked") | pl.col("own_op")).cast(pl.Int64).alias("runs")).drop("op_row", "path"),
    ], how="diagonal_relaxed").sort("event_id")
    mem = pl.concat([
        mem.filter(pl.col("owner") >= 0).join(at_op, on="owner"),
        outside.with_columns(pl.lit(nodes.filter(pl.col("path") == memory.OUTSIDE_OPS)["node_id"].first(), pl.Int64)
                             .alias("node_id"), _us(pl.col("start_ns")).alias("end_micros")),
    ], how="diagonal")
    found = validate.Findings()
    if findings is not None:
        found.merge(findings)
    unlinked = own.filter(~pl.col("linked"))
    found.add("unlinked_gpu_event", unlinked.height, gpu.findings_rows(unlinked))
    # the tables that keep every event read only these columns: the rest, and the arrays per event
    # above, are freed before those tables are made
    del parent, on_gpu, is_role, is_op, op_parent, scope_parent, dur, inner, children, label, args, renamed
    ev = ev.lazy().select("event_id", *trace_table.NAMED, "start_ns", "dur_ns", "_at", "role", "label", "flow_id",
                          "parent").collect()
    tell(0.5, "tables")
    return _tables(ev, (box, args_at), op, acc, mem, nodes, frame_parent, _finite(counters, found), found,
                   flops is not None, job or {})


def _nodes(op: pl.DataFrame, own: pl.DataFrame, outside: pl.DataFrame) -> pl.DataFrame:
    """One row per distinct path (``node_id`` in order of each path's first event): the op
    executions', the unlinked GPU events' and, when some allocation is outside every op,
    ``memory.OUTSIDE_OPS``; its ``op_type`` and ``device`` are its first event's."""
    text = (pl.col("op_type").cast(pl.String), pl.col("device").cast(pl.String))
    parts = [op.select("path", "event_id", *text), own.select("path", "event_id", *text)]
    if outside.height:
        name = pl.lit(memory.OUTSIDE_OPS)
        parts.append(outside.select(name.alias("path"), pl.col("event_id").min(), name.alias("op_type"),
                                    pl.lit("/device:cpu:0").alias("device")))
    return (pl.concat(parts).group_by("path").agg(pl.col("event_id").min().alias("first"),
                                                  pl.col("op_type").sort_by("event_id").first(),
                                                  pl.col("device").sort_by("event_id").first())
            .sort("first").with_row_index("node_id").with_columns(pl.col("node_id").cast(pl.Int64)))


def _marks(ev: pl.DataFrame) -> pl.DataFrame:
    """The step markers: ``step_num`` and its first ``start_ns``, in time order."""
    return ev.lazy().filter(pl.col("role") == "step").select("step_num", "start_ns").collect().group_by(
        "step_num").agg(pl.col("start_ns").min()).sort("start_ns")


def _step_of(marks: pl.DataFrame, start_ns: pl.Series) -> pl.Series:
    """The step of an event starting at ``start_ns``: the last step marker that starts at or
    before it (the first step for events before any marker; step 0 when the trace has no markers)."""
    if marks.height == 0:
        return pl.Series("step", np.zeros(len(start_ns), np.int64))
    pos = np.searchsorted(marks["start_ns"].to_numpy(), start_ns.to_numpy(), side="right") - 1
    return pl.Series("step", marks["step_num"].to_numpy()[np.maximum(pos, 0)], dtype=pl.Int64)


def _finite(counters: pl.DataFrame | None, found: validate.Findings) -> pl.DataFrame | None:
    """``counters`` without the samples whose value is not a finite number, which are counted
    in ``found`` (the first few named)."""
    if counters is None:
        return None
    bad = counters.filter(~pl.col("value").is_finite())
    found.add("non_finite_counter", bad.height, [
        (None, None, f"counter `{r['name']}` series `{r['series']}` at {r['time_ns']:,} ns is {r['value']}: left out")
        for r in bad.head(5).iter_rows(named=True)])
    return counters.filter(pl.col("value").is_finite())


def _tables(ev, args, op, acc, mem, nodes, frame_parent, counters, found, counted, job) -> dict[str, pa.Table]:
    out: dict[str, pa.Table] = {}
    # a node whose op launched GPU work is placed on that GPU, as tfprof places a GPU op
    placed = acc.filter(pl.col("runs") == 0).group_by("node_id").agg(pl.col("device").sort_by("event_id").first()
                                                                     .alias("_gpu"))
    nodes = nodes.join(placed, on="node_id", how="left").sort("node_id").with_columns(
        pl.coalesce("_gpu", "device").alias("device"))
    first_flops = op.group_by("node_id").agg(pl.col("float_ops").first()) if counted else None
    flops = (nodes.join(first_flops, on="node_id", how="left")["float_ops"].fill_null(0) if counted
             else pl.Series([0] * nodes.height))
    out["nodes"] = conform("nodes", {
        "node_id": nodes["node_id"], "name": nodes["path"], "op": nodes["op_type"],
        "shape": [[]] * nodes.height, "params": [0] * nodes.height, "float_ops": flops,
        "canonical_device": nodes["device"], "host_device": nodes["device"].str.replace(r"gpu:(\d+)$", "cpu:0")})
    types = pl.concat([nodes.select("node_id", op_type="op_type"), nodes.select("node_id", op_type="device")])
    out["node_types"] = conform("node_types", types.unique().sort("node_id", "op_type").to_arrow())
    cpu = op.select("node_id", "step", pl.col("device").cast(pl.String), pl.lit("cpu").alias("kind"), "event_id",
                    _us(pl.col("start_ns")).alias("start_micros"), _us(pl.col("self_ns")).alias("duration_micros"),
                    pl.col("self_ns").alias("duration_ns"),
                    _us(pl.col("start_ns") + pl.col("dur_ns")).alias("end_micros"), pl.lit(1).alias("runs"),
                    *([pl.col("float_ops")] if counted else []))
    accel = acc.select("node_id", "step", (pl.col("device") + "/stream:all").alias("device"),
                       pl.lit("accelerator").alias("kind"), "event_id", _us(pl.col("start_ns")).alias("start_micros"),
                       _us(pl.col("dur_ns")).alias("duration_micros"), pl.col("dur_ns").alias("duration_ns"),
                       _us(pl.col("start_ns") + pl.col("dur_ns")).alias("end_micros"), "runs",
                       *([pl.lit(0, pl.Int64).alias("float_ops")] if counted else []))
    runs = pl.concat([cpu, accel], how="vertical_relaxed")
    steps = runs.group_by("node_id", "step").agg(
        pl.col("runs").sum().cast(pl.Int64).alias("run_count"), pl.col("start_micros").min().alias("all_start_micros"),
        pl.col("end_micros").max().alias("latest_end_micros"), *([pl.col("float_ops").sum()] if counted else []))
    outside = mem.filter(pl.col("owner") < 0)
    if outside.height:
        steps = pl.concat([steps, memory.outside_steps(outside, _us).with_columns(
            *([pl.lit(0, pl.Int64).alias("float_ops")] if counted else []))], how="vertical_relaxed")
    out["node_steps"] = conform("node_steps", steps.to_arrow())
    streams = acc.select("node_id", "step", device=pl.col("device") + "/stream:" + pl.col("stream"))
    out["exec_devices"] = conform("exec_devices", pl.concat([
        runs.select("node_id", "step", "device"), streams]).unique(maintain_order=True).to_arrow())
    out["execs"] = conform("execs", runs.select("node_id", "step", "device", "kind", "start_micros", "duration_micros",
                                                "duration_ns").to_arrow())
    out.update(memory.tables(mem, _us))
    out["code_frames"] = _code_frames(ev, op, frame_parent, args, nodes)
    out["steps"] = conform("steps", {"step": steps["step"].unique().sort()})
    for name in ("node_inputs", "output_shapes", "node_attrs", "output_memory", "checkpoint_tensors"):
        out[name] = TABLES[name].schema.empty_table()
    out["devices"] = derive.devices_table(out["exec_devices"], out["nodes"])
    out["info"] = conform("info", {"has_trace": [out["code_frames"].num_rows > 0], "miss_accelerator_stream": [False],
                                   **{k: [v] for k, v in job.items()}})
    box, args_at = args
    del args
    out["trace_events"] = trace_table.trace_events(ev, box, args_at, runs)
    out["counters"] = conform("counters", counters.to_arrow()) if counters is not None else TABLES[
        "counters"].schema.empty_table()
    out["flows"] = trace_table.flows(ev)
    out["kernels"] = conform("kernels", acc.select(
        "event_id", pl.when(pl.col("linked")).then(pl.col("node_id")).alias("node_id"), "step", "device", "stream",
        "name", "start_ns", pl.col("dur_ns").alias("duration_ns"), "correlation", "kind").to_arrow())
    # no graph: top-level ops are not `runtime_node` findings
    return validate.validated(out, found, graph=False)


def _code_frames(ev, op, frame_parent, args, nodes) -> pa.Table:
    """The Python stack of each node's first execution (tfprof keeps one trace per node): the
    frame spans around it, else the ``Call stack`` its args record (PyTorch 1.8); a backward op
    with neither (it ran on PyTorch's autograd thread) has its forward op's (``paths``)."""
    box, args_at = args
    first = op.group_by("node_id").agg(pl.col("row", args_at).sort_by("event_id").first()).sort("node_id")
    frames = _stacks(ev, frame_parent, first["row"].to_numpy(), first["node_id"].to_numpy())
    bare = first.filter(~pl.col("node_id").is_in(frames["node_id"].unique().implode()))
    if bare.height:
        recorded = pl.DataFrame({"node_id": bare["node_id"], "label": pl.Series(
            trace_table.texts_at(box[0], bare[args_at].to_numpy())).str.json_path_match(_CALL_STACK)})
        recorded = recorded.filter(pl.col("label").is_not_null()).with_columns(
            pl.col("label").str.split(";").list.reverse()).explode("label").filter(pl.col("label") != "")
        frames = pl.concat([frames, recorded.with_columns(
            pl.int_range(pl.len(), dtype=pl.Int32).over("node_id").alias("depth")).select(frames.columns)])
    forward = nodes.select("node_id", pl.col("path").cast(pl.String).str.extract(paths.FORWARD_PART, 1).alias("path"))
    forward = forward.filter(pl.col("path").is_not_null() & ~pl.col("node_id").is_in(frames["node_id"].unique().implode()))
    if forward.height:
        src = nodes.select(pl.col("node_id").alias("src"), pl.col("path").cast(pl.String))
        frames = pl.concat([frames, forward.join(src, on="path").join(frames, left_on="src", right_on="node_id")
                            .select(frames.columns)])
    parsed = frames.with_columns(
        pl.col("label").str.extract(_FRAME, 1).alias("file"),
        pl.col("label").str.extract(_FRAME, 2).cast(pl.Int32).alias("lineno"),
        pl.col("label").str.extract(_FRAME, 3).alias("function"),
    ).select(
        "node_id", "depth", pl.col("file").fill_null(""), pl.col("lineno").fill_null(0),
        pl.coalesce("function", "label").alias("function"), pl.lit("").alias("line"),
        pl.lit(0, pl.Int32).alias("func_start_line"),
    ).sort("node_id", "depth")
    return conform("code_frames", parsed.to_arrow())

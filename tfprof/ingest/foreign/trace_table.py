"""The two tables of a foreign trace that keep every event: ``trace_events`` (each event, in
start order, with the node and step it counts for) and ``flows`` (each flow's two ends), from
``build``'s sorted events."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from tfprof import kernels
from tfprof.schema.conform import conform


def trace_events(ev: pl.DataFrame, args: list, args_at: str, runs: pl.DataFrame) -> pa.Table:
    """Every event but the flow ends, an op or GPU event with the node and step it counts for; in
    start order (ties in ``ev``'s order); ``args`` (in a one-item list, taken over) indexed by
    ``ev``'s column ``args_at``. Names go from categoricals straight to dictionaries."""
    rows = np.flatnonzero((~ev["role"].is_in(["flow_start", "flow_end"])).to_numpy())
    rows = rows[np.argsort(ev["start_ns"].to_numpy()[rows], kind="stable")]
    # a column at a time, each made the table's as soon as it is gathered (less alive at once)
    index = pl.Series(rows)
    event_id = ev["event_id"].gather(index)
    node_id, step = _linked(event_id, runs)
    columns = {"event_id": event_id.to_arrow()}
    del event_id
    columns.update({c: _dictionary(ev[c].gather(index)) for c in NAMED})
    columns.update({"start_ns": ev["start_ns"].gather(index).to_arrow(),
                    "duration_ns": ev["dur_ns"].gather(index).to_arrow(), "node_id": node_id, "step": step,
                    "args": texts_at(args, ev[args_at].to_numpy()[rows])})
    return conform("trace_events", columns, sort=False)


def texts_at(args: pl.Series | pa.Array | pa.ChunkedArray | list, at: np.ndarray) -> pa.Array:
    """``args``' values at ``at``. An Arrow array of strings (the readers') is gathered by one
    kernel pass straight into the 32-bit offsets the table holds, where they fit: polars would
    copy the text once into its own strings and again out of them. Given in a one-item list, the
    args are taken over: a chunked array's chunks are then freed one by one as the gathering,
    ``BLOCK`` rows at a time, passes each one's last use (in start order, a trace's events are
    taken from a few runs in file order at once, so the chunks go about as fast as the copy grows)."""
    if isinstance(args, list):
        args = args.pop()
    if isinstance(args, pl.Series):
        return args.gather(at).to_arrow()
    if not kernels.enabled():
        taken = args.take(pa.array(at, pa.int64()))
        return taken.combine_chunks() if isinstance(taken, pa.ChunkedArray) else taken
    chunks = args.chunks if isinstance(args, pa.ChunkedArray) else [args]
    del args
    bounds = np.cumsum([0] + [len(c) for c in chunks])
    which = np.searchsorted(bounds, at, side="right") - 1
    local = (at - bounds[which]).astype(np.int64, copy=False)
    sizes = np.zeros(len(at), np.int64)
    valid = np.zeros(len(at), np.bool_)
    first, last = np.zeros(len(chunks), np.int64), np.full(len(chunks), -1, np.int64)  # the rows each chunk gives
    texts = []
    for c, chunk in enumerate(chunks):
        _, offsets, data = chunk.buffers()
        offsets = np.frombuffer(offsets, np.int64 if pa.types.is_large_string(chunk.type) else np.int32)
        offsets = np.ascontiguousarray(offsets[chunk.offset:chunk.offset + len(chunk) + 1], np.int64)
        first[c], last[c] = kernels.compiled(_sizes_py)(which, local, c, offsets, chunk.is_valid().to_numpy(
            zero_copy_only=False), sizes, valid)
        texts.append((np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8), offsets))
    if int(sizes.sum()) >= 2**31:  # beyond 32-bit offsets: as Arrow takes them (the table then says)
        return pa.chunked_array(chunks, chunks[0].type).take(pa.array(at)).combine_chunks()
    offs = np.zeros(len(at) + 1, np.int32)
    np.cumsum(sizes, out=offs[1:])
    del sizes
    text = np.empty(max(int(offs[-1]), 1), np.uint8)
    for b in range(0, len(at), BLOCK):
        end = min(b + BLOCK, len(at))
        for c in np.flatnonzero((first < end) & (last >= b)):
            kernels.compiled(_copy_py)(which, local, c, b, end, *texts[c], offs, text)
        for c in np.flatnonzero(last < end):  # (a chunk no row takes from: at once)
            texts[c] = chunks[c] = None
    del texts, chunks
    return pa.StringArray.from_buffers(len(at), pa.py_buffer(offs), pa.py_buffer(text[:offs[-1]]),
                                       pa.py_buffer(np.packbits(valid, bitorder="little")))


def _sizes_py(which, local, c, offsets, valid_c, sizes, valid):
    """For the rows taken from chunk ``c`` (``which``, at ``local``), their sizes and whether
    each is valid, set in ``sizes`` and ``valid``: (the first and last such row; 0, -1 for none)."""
    first, last = len(which), -1
    for j in range(len(which)):
        if which[j] == c:
            r = local[j]
            if valid_c[r]:
                valid[j] = True
                sizes[j] = offsets[r + 1] - offsets[r]
            first = min(first, j)
            last = j
    return (first if last >= 0 else 0), last


def _copy_py(which, local, c, lo, hi, data, offsets, offs, text):
    """Copy the texts of rows ``lo`` to ``hi`` taken from chunk ``c`` (``data``, ``offsets``) into
    ``text`` at ``offs``."""
    for j in range(lo, hi):
        if which[j] == c:
            s = offsets[local[j]]
            o = offs[j]
            m = offs[j + 1] - o
            text[o:o + m] = data[s:s + m]


BLOCK = 1 << 16  # rows gathered between two looks at which chunks are done with


def _linked(event_id: pl.Series, runs: pl.DataFrame) -> tuple[pa.Array, pa.Array]:
    """The ``node_id`` and ``step`` of the run of each event of ``event_id`` (null for an event
    that is no run): a lookup table over the event ids (a row's id is at most a few times the
    rows), else a join."""
    ids = event_id.to_numpy()
    run_ids = runs["event_id"].to_numpy()
    top = int(max(ids.max(initial=-1), run_ids.max(initial=-1))) + 1
    at = None
    if event_id.null_count() == 0 and runs["event_id"].null_count() == 0 and top <= 4 * len(ids) + (1 << 20) and (
            min(ids.min(initial=0), run_ids.min(initial=0)) >= 0):
        at = np.full(top, -1, np.int64)
        at[run_ids] = np.arange(len(run_ids))
    if at is None or not np.array_equal(at[run_ids], np.arange(len(run_ids))):  # (an id twice: the join's rows)
        linked = event_id.to_frame().join(runs.select("event_id", "node_id", "step"), on="event_id", how="left",
                                          maintain_order="left")
        return linked["node_id"].to_arrow(), linked["step"].to_arrow()
    pos = pl.Series(at[ids])
    pos = pos.set(pos < 0, None)
    return runs["node_id"].gather(pos).to_arrow(), runs["step"].gather(pos).to_arrow()


NAMED = ("process", "thread", "category", "name", "phase")
"""The dictionary columns of trace_events."""


def _dictionary(values: pl.Series) -> pa.DictionaryArray:
    """A categorical series as an Arrow dictionary array whose dictionary is in order of first
    appearance (as Arrow's own encoding orders it), without spelling out a string per row."""
    seen = values.drop_nulls().unique(maintain_order=True)
    physical = values.to_physical()
    where = np.zeros(int(physical.max() or 0) + 1 if len(seen) else 1, dtype=np.int32)
    where[seen.to_physical().to_numpy()] = np.arange(len(seen), dtype=np.int32)
    indices = pa.array(where[physical.fill_null(0).to_numpy()], mask=physical.is_null().to_numpy())
    return pa.DictionaryArray.from_arrays(indices, seen.cast(pl.String).to_arrow().cast(pa.string()))


def flows(ev: pl.DataFrame) -> pa.Table:
    """One row per flow: its start and end instants and the spans they sit in."""
    ends = []
    for role, when, span in (("flow_start", "from_ns", "from_event"), ("flow_end", "to_ns", "to_event")):
        part = ev.lazy().filter(pl.col("role") == role).select("flow_id", "category", "start_ns", "parent").collect()
        ids = ev["event_id"].gather(part["parent"].clip(0))
        part = part.with_columns(pl.when(pl.col("parent") >= 0).then(ids).alias("span"))
        ends.append(part.group_by("flow_id", "category", maintain_order=True).agg(
            pl.col("start_ns").first().alias(when), pl.col("span").first().alias(span)))
    flows = ends[0].join(ends[1], on=["flow_id", "category"], how="left", nulls_equal=True)
    return conform("flows", flows.select(pl.col("flow_id").cast(pl.String), pl.col("category").cast(pl.String),
                                         "from_ns", "to_ns", "from_event", "to_event").to_arrow())

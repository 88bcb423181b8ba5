"""Every XEvent of an XSpace, and its stats, decoded off the wire into columns (the kernels engine).

An XSpace holds few planes, lines and metadata but many events, so only the events are decoded
here: two numba walks over the raw bytes (one counts, one fills) give one row per event (line,
metadata id, offset, duration) and one row per event stat (event, metadata id, which value, the
value or where its bytes are), with the wire helpers of ``tfprof.ingest.wire``. The planes, lines
and metadata come from protobuf's decoder (``xspace.read``). ``columns`` then builds, with polars
on whole columns, exactly the frame the reference path (``xspace._raw_reference``, a Python walk
over protobuf's messages) builds: same rows, same ``args`` JSON text. Field numbers are
``xplane.proto``'s: XSpace.planes 1; XPlane.lines 3; XLine.events 4; XEvent metadata_id 1,
offset_ps 2, num_occurrences 5 (a oneof with offset_ps), duration_ps 3, stats 4; XStat metadata_id
1, then the value oneof: double 2, uint64 3, int64 4, str 5, bytes 6, ref 7.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pyarrow as pa
from numba import njit

from tfprof.ingest.wire.fields import _len, _skip, _tag, _varint
from tfprof.ingest.wire.tables import _gather

# stat value kinds: the XStat field number of the value (0: none set)
DOUBLE, UINT64, INT64, STR, BYTES, REF = 2, 3, 4, 5, 6, 7
# columns of the event rows and of the stat rows the kernel fills
E_LINE, E_META, E_OFFSET, E_DUR = range(4)
S_EVENT, S_META, S_KIND, S_VALUE, S_START, S_END = range(6)


@njit(cache=True, _nrt=False)
def _stat(buf, pos, end, fill, st, n):
    meta = kind = value = start = stop = 0
    while pos < end:
        f, wt, pos = _tag(buf, pos, end)
        if pos < 0:
            return pos
        if (f == 1 or f == 3 or f == 4 or f == 7) and wt == 0:
            v, pos = _varint(buf, pos, end)
            if pos < 0:
                return pos
            if f == 1:
                meta = v
            else:
                kind, value = f, v
        elif f == 2 and wt == 1:
            if end - pos < 8:
                return -1
            kind, start, stop, pos = f, pos, pos + 8, pos + 8
        elif (f == 5 or f == 6) and wt == 2:
            s, e = _len(buf, pos, end)
            if s < 0:
                return s
            kind, start, stop, pos = f, s, e, e
        else:
            pos = _skip(buf, pos, end, wt, f)
            if pos < 0:
                return pos
    if fill:
        j = n[3]
        st[j, S_EVENT] = n[2]
        st[j, S_META] = meta
        st[j, S_KIND] = kind
        st[j, S_VALUE] = value
        st[j, S_START] = start
        st[j, S_END] = stop
    n[3] += 1
    return 0


@njit(cache=True, _nrt=False)
def _event(buf, pos, end, fill, ev, st, n):
    meta = offset = dur = 0
    while pos < end:
        f, wt, pos = _tag(buf, pos, end)
        if pos < 0:
            return pos
        if (f == 1 or f == 2 or f == 3 or f == 5) and wt == 0:
            v, pos = _varint(buf, pos, end)
            if pos < 0:
                return pos
            if f == 1:
                meta = v
            elif f == 2:
                offset = v
            elif f == 3:
                dur = v
            else:
                offset = 0  # num_occurrences replaces the start (a oneof)
        elif f == 4 and wt == 2:
            s, e = _len(buf, pos, end)
            if s < 0:
                return s
            r = _stat(buf, s, e, fill, st, n)
            if r < 0:
                return r
            pos = e
        else:
            pos = _skip(buf, pos, end, wt, f)
            if pos < 0:
                return pos
    if fill:
        k = n[2]
        ev[k, E_LINE] = n[1]
        ev[k, E_META] = meta
        ev[k, E_OFFSET] = offset
        ev[k, E_DUR] = dur
    n[2] += 1
    return 0


@njit(cache=True, _nrt=False)
def _walk(buf, depth, pos, end, fill, ev, st, n):
    """Walk one message: the XSpace (depth 0), an XPlane (1) or an XLine (2); 0 or an error (< 0).
    n = [planes, lines, events, stats] seen so far."""
    while pos < end:
        f, wt, pos = _tag(buf, pos, end)
        if pos < 0:
            return pos
        want = 1 if depth == 0 else (3 if depth == 1 else 4)
        if f == want and wt == 2:
            s, e = _len(buf, pos, end)
            if s < 0:
                return s
            r = _walk(buf, depth + 1, s, e, fill, ev, st, n) if depth < 2 else _event(buf, s, e, fill, ev, st, n)
            if r < 0:
                return r
            if depth < 2:
                n[depth] += 1
            pos = e
        else:
            pos = _skip(buf, pos, end, wt, f)
            if pos < 0:
                return pos
    return 0


def decode(data: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """(event rows, stat rows) of the XSpace ``data``, in protobuf's order; None when the walk meets
    bytes it does not read (the caller then takes the reference path)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    n = np.zeros(4, np.int64)
    empty = np.zeros((0, 6), np.int64)
    if _walk(buf, 0, 0, len(buf), False, empty, empty, n) < 0:
        return None
    ev, st = np.zeros((n[2], 4), np.int64), np.zeros((n[3], 6), np.int64)
    n[:] = 0
    if _walk(buf, 0, 0, len(buf), True, ev, st, n) < 0:
        return None
    return ev, st


def _json_strings(s: pl.Expr) -> pl.Expr:
    """JSON string literals as ``json.dumps`` writes them, for printable ASCII text."""
    return '"' + s.str.replace_all("\\", "\\\\", literal=True).str.replace_all('"', '\\"', literal=True) + '"'


def quoted(values: pl.Series) -> pl.Series:
    """``json.dumps`` of each string. Text with control or non-ASCII characters (rare in a trace) is
    encoded by ``json.dumps`` itself, once per distinct value; the rest on the whole column."""
    odd = values.str.contains(r"[^\x20-\x7e]").fill_null(False)
    plain = pl.select(_json_strings(pl.lit(values))).to_series()
    special = values.filter(odd).unique()
    if special.len() == 0:
        return plain
    table = pl.DataFrame({"v": special, "q": [json.dumps(v) for v in special.to_list()]})
    mapped = pl.DataFrame({"v": values}).join(table, on="v", how="left", maintain_order="left")["q"]
    return pl.select(pl.when(pl.lit(odd)).then(pl.lit(mapped)).otherwise(pl.lit(plain))).to_series()


def _doubles(values: np.ndarray) -> pl.DataFrame:
    """(``str``, ``json.dumps``) of each double: Python's shortest repr, computed once per distinct value."""
    uniq, index = np.unique(values, return_inverse=True)
    text = pl.Series([repr(float(v)) for v in uniq], dtype=pl.String)
    dumped = pl.Series([json.dumps(float(v)) for v in uniq], dtype=pl.String)
    return pl.DataFrame({"text": text.gather(index.ravel()), "json": dumped.gather(index.ravel())})


def event_stats(data: bytes, ev: np.ndarray, st: np.ndarray, line_plane: np.ndarray,
                stat_names: pl.DataFrame) -> pl.DataFrame:
    """One row per event stat: ``event``, ``pos`` (its order), ``name`` (of its metadata, "" when
    unknown), ``text`` (``str()`` of the value as the reference path holds it: a ref as the name it
    points at, bytes as hex), ``json`` (``json.dumps`` of that value) and ``int`` (the number of an
    integer stat). ``stat_names`` maps (plane, id) to name."""
    buf = np.frombuffer(data, dtype=np.uint8)
    kind, value = st[:, S_KIND], st[:, S_VALUE]
    plane = line_plane[ev[st[:, S_EVENT], E_LINE]] if len(st) else np.zeros(0, np.int64)
    rows = pl.DataFrame({"event": st[:, S_EVENT], "pos": np.arange(len(st), dtype=np.int64), "plane": plane,
                         "id": st[:, S_META], "kind": kind, "value": value})
    rows = rows.join(stat_names, on=["plane", "id"], how="left", maintain_order="left").with_columns(
        pl.col("name").fill_null(""))
    parts = []
    blob_rows = np.flatnonzero((kind == STR) | (kind == BYTES))
    if len(blob_rows):
        blob, offsets = _gather(buf, st[blob_rows, S_START], st[blob_rows, S_END])
        blobs = pl.Series(pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(blob_rows), [
            None, pa.py_buffer(offsets.astype(np.int64)), pa.py_buffer(blob)]))
        as_str = kind[blob_rows] == STR
        for at, text in ((blob_rows[as_str], blobs.filter(as_str).cast(pl.String)),  # protobuf checked the UTF-8
                           (blob_rows[~as_str], blobs.filter(~as_str).bin.encode("hex"))):
            parts.append(pl.DataFrame({"pos": at, "text": text, "json": quoted(text)}))
    double_rows = np.flatnonzero(kind == DOUBLE)
    if len(double_rows):
        doubles = buf[st[double_rows, S_START][:, None] + np.arange(8)].copy().view("<f8").ravel()
        parts.append(_doubles(doubles).with_columns(pl.Series("pos", double_rows)))
    int_rows = np.flatnonzero((kind == INT64) | (kind == UINT64))
    if len(int_rows):
        ints = pl.Series(value[int_rows])
        text = pl.select(pl.when(pl.lit(pl.Series(kind[int_rows] == UINT64)))
                         .then(pl.lit(ints).cast(pl.UInt64, wrap_numerical=True).cast(pl.String))
                         .otherwise(pl.lit(ints).cast(pl.String))).to_series()
        parts.append(pl.DataFrame({"pos": int_rows, "text": text, "json": text}))
    ref_rows = np.flatnonzero(kind == REF)
    if len(ref_rows):
        refs = pl.DataFrame({"plane": plane[ref_rows], "id": value[ref_rows]}).join(
            stat_names, on=["plane", "id"], how="left", maintain_order="left")["name"].fill_null("")
        parts.append(pl.DataFrame({"pos": ref_rows, "text": refs, "json": quoted(refs)}))
    none_rows = np.flatnonzero(kind == 0)
    if len(none_rows):
        parts.append(pl.DataFrame({"pos": none_rows, "text": None, "json": "null"}))
    values = pl.concat([p.select(pl.col("pos").cast(pl.Int64), pl.col("text").cast(pl.String),
                                 pl.col("json").cast(pl.String)) for p in parts]) if parts else pl.DataFrame(
        schema={"pos": pl.Int64, "text": pl.String, "json": pl.String})
    rows = rows.join(values, on="pos", how="left", maintain_order="left")
    return rows.select("event", "pos", "name", "text", "json",
                       pl.when(pl.col("kind").is_in([INT64, UINT64])).then(pl.col("value")).alias("int"))


def _metadata(space, value) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(stat names, event metadata, event metadata stats) of every plane: small tables, from protobuf's
    messages (``value`` renders one XStat as the reference path does)."""
    names, metas, meta_stats = [], [], []
    for p, plane in enumerate(space.planes):
        stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
        names += [(p, k, n) for k, n in stat_names.items()]
        for k, m in plane.event_metadata.items():
            metas.append((p, k, m.name, m.display_name or None))
            for i, s in enumerate(m.stats):
                v = value(s, stat_names)
                meta_stats.append((p, k, i - len(m.stats), stat_names.get(s.metadata_id, ""), None if v is None else str(v),
                                   json.dumps(v), v if s.WhichOneof("value") in ("int64_value", "uint64_value") else None))
    return (pl.DataFrame(names, schema={"plane": pl.Int64, "id": pl.Int64, "name": pl.String}, orient="row"),
            pl.DataFrame(metas, schema={"plane": pl.Int64, "meta": pl.Int64, "name": pl.String, "display": pl.String},
                         orient="row"),
            pl.DataFrame(meta_stats, schema={"plane": pl.Int64, "meta": pl.Int64, "pos": pl.Int64, "name": pl.String,
                                             "text": pl.String, "json": pl.String, "int": pl.Int64}, orient="row"))


def columns(space, data: bytes, start_ns: int, value) -> pl.DataFrame | None:
    """The raw event columns of ``xspace._raw_reference`` for the XSpace ``data`` (``space``: protobuf's
    message of it), built on whole columns; None when the wire walk cannot read the bytes."""
    decoded = decode(data)
    if decoded is None:
        return None
    ev, st = decoded
    lines = [(p, line.name or str(line.id), line.timestamp_ns) for p, plane in enumerate(space.planes)
             for line in plane.lines]
    if len(ev) and ev[:, E_LINE].max() >= len(lines):
        return None
    line_plane = np.array([p for p, _, _ in lines], dtype=np.int64)
    stat_names, metas, meta_stats = _metadata(space, value)
    process = pl.Series([plane.name for plane in space.planes], dtype=pl.String)
    line = ev[:, E_LINE]
    events = pl.DataFrame({
        "event": np.arange(len(ev), dtype=np.int64), "plane": line_plane[line], "meta": ev[:, E_META],
        "thread": pl.Series([t for _, t, _ in lines], dtype=pl.String).gather(line),
        # start in ns: the session start + the line's start + the offset in ps, rounded half up
        "start_ns": start_ns + np.array([t for _, _, t in lines], dtype=np.int64)[line] + (ev[:, E_OFFSET] + 500) // 1000,
        "dur_ns": (ev[:, E_DUR] + 500) // 1000,
    }).with_columns(process=process.gather(line_plane[line]))
    events = events.join(metas, on=["plane", "meta"], how="left", maintain_order="left").with_columns(
        pl.col("name").fill_null(""))
    stats = pl.concat([
        events.select("event", "plane", "meta").join(meta_stats, on=["plane", "meta"]).drop("plane", "meta"),
        event_stats(data, ev, st, line_plane, stat_names),
    ]).sort("event", "pos")
    # a dict of stats: a name repeated keeps its first place and its last value
    stats = stats.group_by("event", "name", maintain_order=True).agg(
        pl.col("pos").first(), pl.col("text").last(), pl.col("json").last(), pl.col("int").last())
    stats = stats.sort("event", "pos")
    names = stats["name"].unique()
    keys = pl.DataFrame({"name": names, "key": quoted(names)})
    args = stats.join(keys, on="name", how="left", maintain_order="left").group_by("event", maintain_order=True).agg(
        ("{" + (pl.col("key") + ": " + pl.col("json")).str.join(", ") + "}").alias("args"))
    return _special(events, stats, args)


def _special(events: pl.DataFrame, stats: pl.DataFrame, args: pl.DataFrame) -> pl.DataFrame:
    """The event frame with ``args`` and the stats the classification reads as columns of their own."""
    def stat(name: str, column: str, alias: str) -> pl.DataFrame:
        return stats.filter(pl.col("name") == name).select("event", pl.col(column).alias(alias), pl.lit(True).alias(
            "_has" + alias))

    out = events.join(args, on="event", how="left", maintain_order="left")
    for name, column, alias in (("hlo_op", "text", "hlo_op"), ("hlo_module", "text", "hlo_module"),
                                ("program_id", "int", "program_id"), ("step_num", "int", "step_num"),
                                ("tf_function_call", "int", "_call"), ("_p", "text", "_p"), ("_pt", "text", "_pt"),
                                ("_c", "text", "_c"), ("_ct", "text", "_ct"),
                                ("correlation_id", "int", "correlation"), ("tf_op", "text", "tf_op"),
                                ("requested_bytes", "int", "requested_bytes")):
        out = out.join(stat(name, column, alias), on="event", how="left", maintain_order="left")

    def flow(id_key: str, type_key: str) -> pl.Expr:  # f"{stats.get(type, '')}:{stats[id]}", None as "None"
        kind = pl.when(pl.col("_has" + type_key)).then(pl.col(type_key).fill_null("None")).otherwise(pl.lit(""))
        return pl.when(pl.col("_has" + id_key)).then(kind + ":" + pl.col(id_key).fill_null("None"))

    return out.select(
        "process", "thread", "name", "display", "start_ns", "dur_ns", "args", "hlo_op", "hlo_module", "program_id",
        "step_num", pl.col("_has_call").fill_null(False).alias("function_call"),
        flow("_p", "_pt").alias("producer"), flow("_c", "_ct").alias("consumer"), "correlation", "tf_op",
        "requested_bytes")

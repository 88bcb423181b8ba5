"""Every XEvent of an XSpace as the raw event frame of ``xspace._raw_reference``, built off the wire
on whole columns (the kernels engine).

``xwalk`` gives the outline (lines, event metadata entries) and protobuf the skeleton (the space
without its lines: plane names, stat names); here the few tables the kernels look things up in are
made from them (stat names by plane and id, pre-quoted for JSON; event metadata by plane and key;
the text of each distinct double), then ``xargs.events`` walks every event twice (measure, write)
into columns, ``args`` JSON text included, and the hits of the stats the classification reads
become columns of their own. No Python runs per event or per stat: the frame equals the reference
path's, row for row (tests/test_foreign_xevents.py, tests/test_foreign_xspace_fast.py).
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pyarrow as pa

from tfprof.ingest.foreign import xargs
from tfprof.ingest.foreign.xargs import C_CONSUMER, C_PRESENCE, C_PRODUCER, N_BYTES, N_DOUBLES, N_EVENTS, N_FULL, N_HITS
from tfprof.ingest.foreign.xwalk import (
    L_ID,
    L_NAME_E,
    L_NAME_S,
    L_PLANE,
    L_TS,
    M_DISP_E,
    M_DISP_S,
    M_KEY,
    M_NAME_E,
    M_NAME_S,
    M_PLANE,
    Outline,
)
from tfprof.ingest.wire.tables import gather

_DOUBLES = 1 << 16  # room for the doubles met by the measuring pass (it runs again when more are met)
_TEXT_COLUMNS = {"hlo_op": 0, "hlo_module": 1, "tf_op": 2, "producer": C_PRODUCER, "consumer": C_CONSUMER}
_INT_COLUMNS = {"program_id": 3, "step_num": 4, "correlation": 5, "requested_bytes": 6}


def _room(n_bytes: int, n_events: int) -> int:
    """The bytes first set aside for the ``args`` of a capture of ``n_bytes`` with ``n_events``: room
    enough for any usual one (pages never written take no memory); ``xargs.events`` says when not."""
    return 2 * n_bytes + 64 * n_events + 64


def _texts(strings: list[str], encode) -> tuple[np.ndarray, np.ndarray]:
    """A text table: the bytes of every ``encode(s)`` end to end, and int64 offsets."""
    parts = [encode(s) for s in strings]
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    return np.frombuffer(b"".join(parts) or b"\0", np.uint8), offsets


def _table(planes: np.ndarray, keys: np.ndarray, values: np.ndarray, n_planes: int) -> tuple:
    """A lookup table for ``xrender.lookup``: per plane, its keys as a dense array (where they are
    small non-negative numbers, as writers number them) or sorted for a binary search."""
    order = np.lexsort((keys, planes))
    keys, values, planes = keys[order], values[order], planes[order]
    bounds = np.searchsorted(planes, np.arange(n_planes + 1))
    tab = np.zeros((n_planes, 4), np.int64)
    tab[:, 1] = -1
    tab[:, 2], tab[:, 3] = bounds[:-1], bounds[1:]
    dense = []
    at = 0
    for p in range(n_planes):  # (planes are few)
        k, v = keys[bounds[p]:bounds[p + 1]], values[bounds[p]:bounds[p + 1]]
        span = int(k[-1]) + 1 if len(k) else 0
        if len(k) == 0 or (k[0] >= 0 and span <= 4 * len(k) + 1024):
            d = np.full(span, -1, np.int64)
            d[k] = v
            dense.append(d)
            tab[p, 0], tab[p, 1] = at, span
            at += span
    return np.concatenate([np.zeros(0, np.int64), *dense]), keys, values, tab


def _stat_names(space) -> tuple[list[str], tuple]:
    """Every stat name (global indices; "" among them) and the lookup table of the name index of
    each stat metadata id, by plane."""
    rows = [(p, k, m.name) for p, plane in enumerate(space.planes) for k, m in plane.stat_metadata.items()]
    names = list(dict.fromkeys(["", *(name for _, _, name in rows)]))
    index = {name: i for i, name in enumerate(names)}
    planes = np.array([p for p, _, _ in rows], np.int64)
    keys = np.array([k for _, k, _ in rows], np.int64)
    return names, _table(planes, keys, np.array([index[n] for _, _, n in rows], np.int64), len(space.planes))


def _metadata(entries: np.ndarray, n_planes: int) -> tuple:
    """The lookup table of the event metadata entry row of each key, by plane: of a key given twice,
    the last entry (as protobuf's map keeps it)."""
    rows = np.arange(len(entries), dtype=np.int64)
    planes, keys = entries[:, M_PLANE], entries[:, M_KEY]
    order = np.lexsort((rows, keys, planes))
    p, k = planes[order], keys[order]
    last = np.ones(len(order), bool)
    last[:-1] = (p[1:] != p[:-1]) | (k[1:] != k[:-1])
    kept = order[last]
    return _table(planes[kept], keys[kept], kept, n_planes)


def _doubles(found: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple, tuple]:
    """(distinct doubles as int64 bits, sorted; their indices; ``json.dumps`` texts; ``repr`` texts),
    distinct by bits so that -0.0 stays apart from 0.0."""
    keys = np.unique(found)
    values = [float(v) for v in keys.view(np.float64)]
    return (keys, np.arange(len(keys), dtype=np.int64), _texts(values, lambda v: json.dumps(v).encode()),
            _texts(values, lambda v: repr(v).encode()))


def checked_strings(n: int, offsets: np.ndarray, data: np.ndarray, valid: np.ndarray | None) -> pl.Series:
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    arr = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data), bitmap)
    return pl.Series(arr)


def _entry_strings(buf: np.ndarray, entries: np.ndarray, s: int, e: int) -> pl.Series:
    """A string of each event metadata entry (checked UTF-8 by protobuf's decoding of the skeleton),
    and "" last, for an event whose metadata is missing."""
    data, offsets = gather(buf, np.append(entries[:, s], 0), np.append(entries[:, e], 0))
    return checked_strings(len(entries) + 1, offsets.astype(np.int64), data, None)


def _ns(ps: np.ndarray) -> np.ndarray:
    """Picoseconds to ns, rounded half up, as ``(ps + 500) // 1000`` without overflow (one
    division, not three, where the sum cannot overflow: numpy divides slowly)."""
    if len(ps) == 0 or int(ps.max()) < 2**63 - 500:
        return (ps + 500) // 1000
    return ps // 1000 + (ps % 1000 + 500) // 1000


def columns(buf: np.ndarray, outline: Outline, space, start_ns: int) -> pl.DataFrame | None:
    """The raw event frame of ``xspace._raw_reference`` for the XSpace in ``buf`` (its bytes),
    ``outline`` its outline and ``space`` protobuf's decoding of its skeleton; None when an event
    is damaged or a str value is not UTF-8 (the caller lets protobuf say which)."""
    found = frame_and_args(buf, outline, space, start_ns)
    return None if found is None else found[0].drop("_meta").insert_column(6, pl.Series("args", found[1]))


def frame_and_args(buf: np.ndarray, outline: Outline, space, start_ns: int) -> tuple[pl.DataFrame, pa.Array] | None:
    """``columns``' frame without ``args`` but with ``_meta`` (what tells an event's plane and
    metadata apart: its metadata entry's row, or for an event whose metadata is missing, past
    them, its plane), and the ``args`` as the Arrow array the kernel wrote (large strings over
    its buffer), which polars would copy: the reader keeps it as it is until the trace table
    takes its rows in start order (``trace_table.trace_events``)."""
    lines, entries, n_events = outline.lines, outline.entries, outline.events
    names, stats = _stat_names(space)
    index = {name: i for i, name in enumerate(names)}
    key_txt, key_off = _texts(names, lambda s: json.dumps(s).encode())
    metas = _metadata(entries, len(space.planes))
    sp = np.array([index.get(name, -1) for name in xargs.SPECIALS], np.int64)
    spcol = np.full(len(names), -1, np.int64)
    spcol[sp[sp >= 0]] = np.flatnonzero(sp >= 0)
    ev_line, ev_ent = np.empty(n_events, np.int32), np.empty(n_events, np.int32)
    ev_off, ev_dur = np.empty(n_events, np.int64), np.empty(n_events, np.int64)
    offs, valid = np.zeros(n_events + 1, np.int64), np.empty(n_events, bool)
    out, hits = np.empty(_room(len(buf), n_events), np.uint8), np.empty((_room(0, n_events) // 32, 6), np.int64)
    dbl, doubles = np.empty(_DOUBLES, np.int64), _doubles(np.zeros(0, np.int64))
    while True:
        n = np.zeros(5, np.int64)
        r = xargs.events(buf, lines, *metas, entries, *stats, index[""], key_txt, key_off, int(np.diff(key_off).max()),
                         spcol, sp, doubles[0], doubles[1], *doubles[2], ev_line, ev_ent, ev_off, ev_dur, dbl, out,
                         offs, valid, hits, np.zeros((len(names), 7), np.int64), np.empty(len(names), np.int64), n)
        if r < 0 or n[N_EVENTS] != n_events:
            return None
        again = n[N_FULL] or n[N_HITS] > len(hits) or (n[N_DOUBLES] and len(doubles[0]) == 0)
        if not again:
            break
        if n[N_DOUBLES] > len(dbl):
            dbl = np.empty(n[N_DOUBLES], np.int64)  # to find them all, once more
        elif n[N_DOUBLES] and len(doubles[0]) == 0:
            doubles = _doubles(dbl[:n[N_DOUBLES]])
        if n[N_FULL]:
            out = np.empty(n[N_BYTES], np.uint8)
        if n[N_HITS] > len(hits):
            hits = np.empty((n[N_HITS], 6), np.int64)
    hits = hits[:n[N_HITS]]
    dkeys, didx, _, drep = doubles
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    args = pa.LargeStringArray.from_buffers(n_events, pa.py_buffer(offs), pa.py_buffer(out), bitmap)
    del out, offs, valid
    raw_txt, raw_off = _texts(names, lambda s: s.encode())
    cols = {}
    for name, col in _TEXT_COLUMNS.items():
        found = hits[hits[:, xargs.H_COL] == col]

        def text(write, out, offs, valid, found=found, col=col):
            return xargs.column(buf, found, col, ev_line, lines, *stats, index[""], raw_txt, raw_off, dkeys, didx,
                                drep[0], drep[1], write, out, offs, valid)

        if len(found) == 0:
            cols[name] = pl.repeat(None, n_events, dtype=pl.String, eager=True)
            continue
        size = text(False, np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, bool))
        data, offs, ok = np.empty(max(size, 1), np.uint8), np.empty(n_events + 1, np.int64), np.zeros(n_events, bool)
        text(True, data, offs, ok)
        cols[name] = checked_strings(n_events, offs, data, ok)
    for name, col in (*_INT_COLUMNS.items(), ("function_call", C_PRESENCE)):
        found = hits[hits[:, xargs.H_COL] == col]
        if len(found) == 0 and col != C_PRESENCE:  # (no buffer of values for a column of nulls)
            cols[name] = pl.repeat(None, n_events, dtype=pl.Int64, eager=True)
            continue
        values, ok = np.zeros(n_events, np.int64), np.zeros(n_events, bool)
        xargs.ints(buf, found, col, values, ok)
        cols[name] = pl.Series(ok) if col == C_PRESENCE else pl.Series(pa.Int64Array.from_buffers(
            pa.int64(), n_events, [pa.py_buffer(np.packbits(ok, bitorder="little")), pa.py_buffer(values)]))
    del hits
    thread = [bytes(buf[s:e]).decode() or str(i) for i, s, e in lines[:, [L_ID, L_NAME_S, L_NAME_E]].tolist()]
    line_plane = lines[:, L_PLANE]
    base = np.array([start_ns + ts for ts in lines[:, L_TS].tolist()], np.int64)  # checked in range (xspace)
    ent = np.where(ev_ent < 0, len(entries), ev_ent)
    display = _entry_strings(buf, entries, M_DISP_S, M_DISP_E)
    display = pl.select(pl.when(pl.lit(display) != "").then(pl.lit(display))).to_series()
    # names as categoricals: a code per event gathered from the few planes, lines and metadata entries
    frame = pl.DataFrame({
        "process": pl.Series([p.name for p in space.planes], dtype=pl.Categorical).gather(line_plane[ev_line]),
        "thread": pl.Series(thread, dtype=pl.Categorical).gather(ev_line),
        "name": _entry_strings(buf, entries, M_NAME_S, M_NAME_E).cast(pl.Categorical).gather(ent),
        "display": display.cast(pl.Categorical).gather(ent),
        "start_ns": base[ev_line] + _ns(ev_off),
        "dur_ns": _ns(ev_dur),
        **{c: cols.pop(c) for c in ("hlo_op", "hlo_module", "program_id", "step_num", "function_call", "producer",
                                    "consumer", "correlation", "tf_op", "requested_bytes")},
        "_meta": np.where(ev_ent < 0, len(entries) + line_plane[ev_line], ev_ent),
    })
    return frame, args

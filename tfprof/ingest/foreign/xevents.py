"""Every XEvent of an XSpace as the raw event frame of ``xspace._raw_reference``, built off the wire
on whole columns (the kernels engine).

``xwalk`` gives the outline (lines, event metadata entries) and protobuf the skeleton (the space
without its lines: plane names, stat names); here the few tables the kernels look things up in are
made from them (stat names by plane and id, pre-quoted for JSON; event metadata by plane and key;
the text of each distinct double), then ``xargs.events`` walks every event into columns, ``args``
JSON text included (again where a buffer ran out or doubles were met before their texts were
known; a large capture in two halves at once, split at its middle event, ``args`` then an array
of two chunks), and the hits of the stats the classification reads become columns of their own.
No Python runs per event or per stat: the frame equals the reference path's, row for row
(tests/test_foreign_xevents.py, tests/test_foreign_xspace_fast.py).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl
import pyarrow as pa

from tfprof.ingest.foreign import xargs
from tfprof.ingest.foreign.xargs import C_CONSUMER, C_PRESENCE, C_PRODUCER, N_BYTES, N_DOUBLES, N_EVENTS, N_FULL, N_HITS
from tfprof.ingest.foreign.xwalk import (
    L_E,
    L_EVENTS,
    L_ID,
    L_NAME_E,
    L_NAME_S,
    L_PLANE,
    L_S,
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

SPLIT_EVENTS = 200_000  # from here on the per-event kernel walks two halves at once
_THREADS = min(2, os.cpu_count() or 1)
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


class _Part:
    """A run of events the per-event kernel walks at once: its lines (the first and last cut to
    where the run begins and ends), the first of them in the outline, the events' rows, and what
    the kernel writes (``args`` text, offsets, hits, doubles met, its counters)."""

    def __init__(self, buf: np.ndarray, lines: np.ndarray, first_line: int, e0: int, e1: int):
        self.lines, self.first_line, self.events = lines, first_line, (e0, e1)
        self.out, self.offs = np.empty(_room(len(buf), e1 - e0), np.uint8), np.zeros(e1 - e0 + 1, np.int64)
        self.hits, self.dbl = np.empty((_room(0, e1 - e0) // 32, 6), np.int64), np.empty(_DOUBLES, np.int64)
        self.n, self.status = np.zeros(5, np.int64), 0

    def grown(self) -> bool:
        """Whether the kernel ran out of room for its text, hits or doubles (made larger here): it runs again."""
        n, again = self.n, False
        if n[N_DOUBLES] > len(self.dbl):
            self.dbl, again = np.empty(n[N_DOUBLES], np.int64), True  # to find them all, once more
        if n[N_FULL]:
            # (room for every event's bound where it starts: sized to the text alone, the last could run out again)
            self.out, again = np.empty(max(n[N_FULL], n[N_BYTES]), np.uint8), True
        if n[N_HITS] > len(self.hits):
            self.hits, again = np.empty((n[N_HITS], 6), np.int64), True
        return again


def _parts(buf: np.ndarray, lines: np.ndarray, n_events: int) -> list[_Part]:
    """The events in one run, or from ``SPLIT_EVENTS`` on (and with two cores) in two, split at
    the middle event (inside its line: a long line holds most events of many captures)."""
    if n_events < SPLIT_EVENTS or _THREADS < 2:
        return [_Part(buf, lines, 0, 0, n_events)]
    half = n_events // 2
    before = np.cumsum(lines[:, L_EVENTS])
    j = int(np.searchsorted(before, half, side="right"))  # the line of the middle event
    mid = xargs.skip_events(buf, lines[j, L_S], lines[j, L_E], half - (int(before[j - 1]) if j else 0))
    first, second = lines[:j + 1].copy(), lines[j:].copy()
    first[j, L_E] = second[0, L_S] = mid
    return [_Part(buf, first, 0, 0, half), _Part(buf, second, j, half, n_events)]


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
    valid = np.empty(n_events, bool)
    parts = _parts(buf, lines, n_events)
    doubles = _doubles(np.zeros(0, np.int64))
    kmax = int(np.diff(key_off).max())

    def walk(part: _Part) -> None:
        e0, e1 = part.events
        part.n = np.zeros(5, np.int64)
        part.status = xargs.events(
            buf, part.lines, *metas, entries, *stats, index[""], key_txt, key_off, kmax, spcol, sp,
            doubles[0], doubles[1], *doubles[2], ev_line[e0:e1], ev_ent[e0:e1], ev_off[e0:e1], ev_dur[e0:e1],
            part.dbl, part.out, part.offs, valid[e0:e1], part.hits, np.zeros((len(names), 7), np.int64),
            np.empty(len(names), np.int64), part.n)

    todo = parts
    while todo:
        with ThreadPoolExecutor(max(1, len(todo) - 1)) as pool:  # the kernel lets go of the GIL
            others = [pool.submit(walk, part) for part in todo[1:]]
            walk(todo[0])
            for done in others:
                done.result()
        if any(part.status < 0 or part.n[N_EVENTS] != part.events[1] - part.events[0] for part in todo):
            return None
        todo = [part for part in todo if part.grown()]
        if not todo and len(doubles[0]) == 0 and any(part.n[N_DOUBLES] for part in parts):
            # doubles were met before their texts were known: once more where they were, with the texts
            doubles = _doubles(np.concatenate([part.dbl[:part.n[N_DOUBLES]] for part in parts]))
            todo = [part for part in parts if part.n[N_DOUBLES]]
    for part in parts[1:]:
        ev_line[part.events[0]:part.events[1]] += part.first_line
        part.hits[:part.n[N_HITS], xargs.H_EVENT] += part.events[0]
    hits = np.concatenate([part.hits[:part.n[N_HITS]] for part in parts])
    dkeys, didx, _, drep = doubles
    args = []
    for part in parts:
        e0, e1 = part.events
        bitmap = pa.py_buffer(np.packbits(valid[e0:e1], bitorder="little"))
        args.append(pa.LargeStringArray.from_buffers(e1 - e0, pa.py_buffer(part.offs), pa.py_buffer(part.out), bitmap))
    args = args[0] if len(args) == 1 else pa.chunked_array(args)
    del parts
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

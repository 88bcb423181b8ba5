"""A Chrome trace's events as Arrow columns: from the numba scan (``kineto_events``), or from
Python's ``json`` (the reference path); both give the same table.

Each event gives its string fields (``FIELDS``: a string as it is, any other value as
``json.dumps`` writes it compactly, null when absent or null), ``ts`` and ``dur`` (float64), its
``args`` as compact JSON text (``json.dumps(args, separators=(",", ":"), ensure_ascii=False)``)
and, as ``arg:<key>`` columns, the ``ARG_KEYS`` values of its args in the same text form (what
the Kineto reader looks up, so that no JSON path runs over whole columns). The fields of
``CODED`` are dictionary columns (in order of first appearance, as Arrow encodes them): the
scan numbers their values without spelling a string per event.

A trace whose times are epoch µs with their ns as three decimals (``1712195495519689.047``: 19
digits, more than a float holds) has its ``ts`` given from an origin (``origin_of``: the whole µs
of its first ``ts``), worked out in whole ns, so that each float holds its ns exactly; the
table's schema metadata says the origin (``ts_origin``), which the reader adds back as ns.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import re
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import numpy as np
import pyarrow as pa

from tfprof.errors import ProfileFormatError
from tfprof.ingest.foreign.trace_layout import ARG_KEYS, ARGS, CODED, FIELDS, NON_ASCII, OK, OPEN, PYTHON, SLOTS, SPLIT
from tfprof.ingest.sources import one_line

ARG_COLUMNS = tuple(f"arg:{k}" for k in ARG_KEYS)
ORDER = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "s", "bp", "args", *ARG_COLUMNS)
ORIGIN_KEY = b"tfprof.ts_origin_us"
"""The schema metadata key of the µs the table's ``ts`` are given from (absent: 0)."""
_FIRST_TS = re.compile(rb'"ts"\s*:\s*"?(-?\d+)')
_EPOCH_US = 10**12  # from here (11.6 days in µs) a ts is taken for an epoch time


def origin_of(data, start: int) -> int:
    """The µs the events' ``ts`` are given from: the whole µs of the first ``ts`` within 1 MB of
    ``data[start]`` when it is an epoch time (``_EPOCH_US`` to 9e15), else 0 (read as written)."""
    found = _FIRST_TS.search(bytes(data[start:start + (1 << 20)]))
    whole = int(found.group(1)) if found else 0
    return whole if _EPOCH_US <= abs(whole) <= 9 * 10**15 else 0


def ts_origin(table: pa.Table) -> int:
    """The µs ``table``'s ``ts`` are given from (``ORIGIN_KEY``)."""
    return int((table.schema.metadata or {}).get(ORIGIN_KEY, 0))


def _with_origin(table: pa.Table, origin: int) -> pa.Table:
    return table.replace_schema_metadata({ORIGIN_KEY: str(origin).encode()}) if origin else table


class Number(float):
    """A JSON number decoded as a float that keeps its text (``json.loads(parse_float=Number)``):
    the exact value of an epoch ``ts``; anywhere else it is the float it is."""

    __slots__ = ("text",)

    def __new__(cls, text: str):
        value = super().__new__(cls, text)
        value.text = text
        return value


def _text(value) -> str | None:
    """``value`` as the columns hold it: a string as it is, else compact JSON text in which a
    whole number beyond 64 bits is written as a float (as DuckDB's JSON reader did)."""
    if value is None or isinstance(value, str):
        return value
    text = _COMPACT(value)
    return _COMPACT(_in_64_bits(value)) if _LONG.search(text) else text


_LONG = re.compile(r"\d{19}")
# ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``, without making an encoder per call
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _in_64_bits(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -2**63 <= value < 2**64 else float(value)
    if isinstance(value, dict):
        return {k: _in_64_bits(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_in_64_bits(v) for v in value]
    return value


def _float(path, value, field: str) -> float | None:
    if value is None or isinstance(value, float):
        return value
    if isinstance(value, (bool, int)):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ProfileFormatError(f"`{path}` is not a valid Chrome trace (an event's `{field}` is "
                             f"`{one_line(_text(value))[:40]}`, not a number)")


def event_values(path, event, origin: int = 0) -> tuple[list, float | None, float | None]:
    """(the slots' texts, ts less ``origin`` µs, dur) of one decoded event."""
    if not isinstance(event, dict):
        raise ProfileFormatError(f"`{path}` is not a valid Chrome trace (an item of its `traceEvents` is "
                                 f"`{one_line(_text(event))[:40]}`, not an event object)")
    args = event.get("args")
    texts = [_text(event.get(f)) for f in FIELDS] + [_text(args)]
    texts += [_text(args.get(k)) if isinstance(args, dict) else None for k in ARG_KEYS]
    return texts, _shifted(path, event.get("ts"), origin), _float(path, event.get("dur"), "dur")


def _shifted(path, value, origin: int) -> float | None:
    """An event's ``ts`` less ``origin`` µs, from its exact decimal value (its text when decoded
    as a ``Number``), as the scan's ``kineto_scan.shifted`` gives it."""
    at = _float(path, value, "ts")
    if not origin or at is None or not math.isfinite(at):
        return at
    if isinstance(value, Number):
        exact = Decimal(value.text)
    elif isinstance(value, int) and not isinstance(value, bool):
        exact = Decimal(value)
    elif isinstance(value, str):  # a number's text (``_float`` has read it as one)
        exact = Decimal(value.strip())
    else:
        exact = Decimal(repr(at))
    return float(exact - origin)


def reference_table(path, events: list, origin: int = 0) -> pa.Table:
    """The table of decoded ``events`` (Python's ``json``; ``Number`` where ``origin`` is not 0),
    their ``ts`` less ``origin`` µs."""
    rows = [event_values(path, e, origin) for e in events]
    columns = {name: pa.array([r[0][k] for r in rows], pa.string())
               for k, name in enumerate([*FIELDS, "args", *ARG_COLUMNS])}
    columns.update({name: columns[name].dictionary_encode() for name in CODED})
    columns["ts"] = pa.array([r[1] for r in rows], pa.float64())
    columns["dur"] = pa.array([r[2] for r in rows], pa.float64())
    return _with_origin(pa.table({name: columns[name] for name in ORDER}), origin)


def scanned_table(path, body: np.ndarray, start: int, array_form: bool, release=None, origin: int = 0):
    """(status, end, the events table) of the events array whose first byte inside is
    ``body[start]``; the table is None unless the scan reached the array's end (or, array form,
    stopped between two events). The array is scanned and its columns gathered a window of about
    ``WINDOW_BYTES`` at a time (``_windows``), so that only a window's spans are alive: each
    window's columns are kept as pieces, joined once at the end. ``release(lo, hi)``, when given,
    is told each window's bytes once its columns are gathered (a mapped file drops them). The
    ``ts`` are given from ``origin`` µs (``origin_of``)."""
    from tfprof.ingest.foreign import kineto_names

    names = [*FIELDS, "args", *ARG_COLUMNS]
    coded = np.array([names.index(name) for name in CODED], np.int64)
    rest = np.array([slot for slot in range(len(names)) if slot not in coded and slot != ARGS], np.int64)
    table = kineto_names.new_table(len(coded))
    pieces, error, non_ascii = [], None, False
    with ThreadPoolExecutor(_AHEAD + 1) as pool:  # numba releases the GIL: the scans, and a window's args
        for status, end, found, lo, hi in _windows(pool, body, start, origin):
            if status not in (OK, OPEN, SPLIT):
                return status, end, None
            if error is None:  # after an event Python cannot decode, the rest is only scanned: a scan error comes first
                try:
                    piece, table = _window(pool, path, body, found, coded, rest, table, origin)
                    pieces.append(piece)
                    non_ascii |= bool((found[-1] & NON_ASCII).any())
                except ProfileFormatError as exc:
                    error = exc
            del found
            if release is not None:
                release(lo, hi)
    if error is not None:
        raise error
    return status, end, _with_origin(_joined(path, pieces, names, coded, rest, table, non_ascii), origin)


def _window(pool, path, body, found, coded, rest, table, origin):
    """The columns of one window's events (``found``: the scan's arrays), as pieces for ``_joined``,
    and the name table carried on. The args, the longest, are gathered on a thread of their own."""
    from tfprof.ingest.foreign import kineto_events, kineto_names

    ev_start, ev_end, rel, ln, ts, dur, has, flags = found
    marked = (flags & PYTHON).astype(np.bool_)
    extra = _decode_marked(path, body, np.flatnonzero(marked), ev_start, ev_end, rel, ln, ts, dur, has, origin)
    room = _room(int(np.maximum(ln[:, ARGS], 0).sum()))  # the args' own memory (at most their spans' bytes)
    args = pool.submit(kineto_events.gather, body, ev_start, rel, ln, ARGS, marked, extra, True, room)
    try:
        codes, *grown = kineto_names.intern(body, ev_start, rel, ln, coded, marked, extra, *table)
        data, base, offs = kineto_events.gather_many(body, ev_start, rel, ln, rest, marked, extra)
    finally:
        args_offs = args.result()
    # each slot's offsets from its first value, as 32 bits where they fit: not the shared 8-byte-wide table
    wide = np.int64 if offs[:, -1].max() >= 2**31 else np.int32
    slots = [(data, int(base[q]), offs[q].astype(wide), ln[:, slot] >= 0) for q, slot in enumerate(rest)]
    del offs
    piece = {"args": (room[:int(args_offs[-1])], args_offs, ln[:, ARGS] >= 0), "codes": codes, "rest": slots,
             "ts": ts, "dur": dur, "has": has}
    return piece, (*grown, *table[4:])


def _room(size: int) -> np.ndarray:
    """``size`` bytes (at least one) mapped for them alone: given back to the system as soon as
    they are freed (a heap may keep freed memory)."""
    private = {"flags": mmap.MAP_PRIVATE} if hasattr(mmap, "MAP_PRIVATE") else {}
    return np.frombuffer(mmap.mmap(-1, max(size, 1), **private), np.uint8)


def _joined(path, pieces: list, names: list, coded, rest, table, non_ascii: bool) -> pa.Table:
    """The table of the windows' ``pieces``, a column at a time, each piece freed once copied."""
    from tfprof.ingest.foreign import kineto_names

    columns = {"args": _strings(*pieces[0]["args"]) if len(pieces) == 1 else _chunked(pieces)}
    _, seen, _, spelled, sizes, _, _ = table
    for q, slot in enumerate(coded):
        values = _strings(*kineto_names.spelled_out(spelled, seen, sizes[0], q), None)
        codes = np.concatenate([p["codes"][:, q] for p in pieces])
        columns[names[slot]] = pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), values)
    for p in pieces:
        p["codes"] = None
    # a slot's offsets start where the previous slot's values end, as one buffer for all would put them
    reach = np.cumsum([sum(int(p["rest"][q][2][-1]) for p in pieces) for q in range(len(rest))])
    for q, slot in enumerate(rest):
        columns[names[slot]] = _strings(*_concatenated(pieces, q), int(reach[q]))
    for field, k in (("ts", 0), ("dur", 1)):
        has = np.concatenate([p["has"][:, k] for p in pieces])
        columns[field] = pa.array(np.concatenate([p[field] for p in pieces]), pa.float64(), mask=~has)
    if non_ascii:
        for name in names:
            try:
                column = columns[name]
                (column.dictionary if name in CODED else column).validate(full=True)
            except pa.ArrowInvalid:
                raise ProfileFormatError(f"`{path}` is not a valid Chrome trace (its text is not UTF-8)") from None
    return pa.table({name: columns[name] for name in ORDER})


def _chunked(pieces: list) -> pa.ChunkedArray:
    """The args, a chunk per window (large strings when all of them pass 32 bits, as one array of
    them would be), each in memory of its own (``_room``): the trace table, which gathers them in
    start order, frees each chunk once past its last use (``trace_table.texts_at``)."""
    wide = sum(int(p["args"][1][-1]) for p in pieces) >= 2**31
    chunks = []
    for p in pieces:
        chunks.append(_strings(*p["args"], 2**31 if wide else None))
        p["args"] = None
    return pa.chunked_array(chunks, pa.large_string() if wide else pa.string())


def _concatenated(pieces: list, q: int) -> tuple:
    """(bytes, int64 offsets from 0, validity) of the ``q``-th of the ``rest`` slots over the
    windows' pieces, each piece's offsets freed once copied."""
    parts = [p["rest"][q] for p in pieces]
    for p in pieces:
        p["rest"][q] = None
    total = sum(int(offs[-1]) for _, _, offs, _ in parts)
    data = np.empty(max(total, 1), np.uint8)
    offsets = np.zeros(1 + sum(len(offs) - 1 for _, _, offs, _ in parts), np.int64)
    valid = np.concatenate([v for _, _, _, v in parts])
    o = r = 0
    for k, (piece, first, offs, _) in enumerate(parts):
        size = int(offs[-1])
        data[o:o + size] = piece[first:first + size]
        offsets[r + 1:r + len(offs)] = offs[1:] + o
        o, r = o + size, r + len(offs) - 1
        parts[k] = piece = offs = None
    return data[:total], offsets, valid


_THREADS = max(1, min(2, os.cpu_count() or 1))
_AHEAD = _THREADS  # windows scanned at a time
WINDOW_BYTES = 32 << 20  # the events scanned and gathered at a time
SPLIT_BYTES = 8 << 20  # arrays smaller than this are scanned in one piece
# where a window ends: an event that follows another (`}, {"ph"`), Kineto's first key
_NEXT_EVENT = re.compile(rb'\}\s*,\s*(\{)\s*"(?:ph|name|cat)"')


def _windows(pool, body: np.ndarray, start: int, origin: int):
    """``kineto_events.scan`` of the array from ``body[start]``, a window at a time: (status, end,
    the scan's arrays, the window's first and end byte) per window. A window ends at what looks
    like an event boundary about ``WINDOW_BYTES`` on (an array under twice that but above
    ``SPLIT_BYTES``: its middle), and the scan stops there (``SPLIT``) only if it is a true one;
    else that scan, which then went on to the end, is the last. Two windows are scanned at a time
    on other threads while the caller gathers the columns of the one before: the second from
    where the first is to stop, kept only if the first does stop there (else it runs on unused)."""
    from tfprof.ingest.foreign import kineto_events

    size = len(body) - start
    step = WINDOW_BYTES if size >= 2 * WINDOW_BYTES or size < SPLIT_BYTES else size // 2 + 1
    ahead = []  # the scans in flight, in file order: (first byte, where it is to stop, future)

    def scan_from(lo: int) -> None:
        cut = _cut(body, lo, step)
        ahead.append((lo, cut, pool.submit(kineto_events.scan, body, lo, _rows(body, lo, cut), cut, SLOTS, origin)))

    def top_up(last: int) -> None:
        while len(ahead) < _AHEAD and last >= 0:
            scan_from(last)
            last = ahead[-1][1]

    scan_from(start)
    top_up(ahead[-1][1])
    while ahead:
        lo, cut, scanning = ahead.pop(0)
        status, end, *found = scanning.result()
        scanning = None
        if status == SPLIT:
            top_up(ahead[-1][1] if ahead else cut)
        else:
            ahead.clear()  # begun where this scan did not stop: not events of this array
        yield status, end, found, lo, cut if status == SPLIT else len(body)
        del found



def _cut(body: np.ndarray, at: int, step: int) -> int:
    """Where the window from ``body[at]`` ends: the ``{`` of the first event boundary found
    ``step`` bytes on, -1 (the end) when there is none."""
    found = _NEXT_EVENT.search(body.data, at + step) if at + step < len(body) else None
    return found.start(1) if found else -1


def _rows(body: np.ndarray, lo: int, cut: int) -> int:
    """The rows the scan first makes room for, for the events from ``body[lo]`` to ``cut`` (-1:
    the end), about one per 256 bytes (it doubles them as needed)."""
    return max(16, ((cut if cut >= 0 else len(body)) - lo) // 256)


def _decode_marked(path, body, rows, ev_start, ev_end, rel, ln, ts, dur, has, origin) -> np.ndarray:
    """Decode the events ``rows`` with Python's ``json`` (an escape, an unusual number or value)
    and point their slots into the returned buffer (their values are written back in one step
    per array: numpy's element access costs more than the decoding)."""
    pieces, size = [], 0
    spans, times, found = [], [], []
    for start, end in zip(ev_start[rows].tolist(), ev_end[rows].tolist()):
        try:
            event = json.loads(bytes(body[start:end]), parse_float=Number if origin else None)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ProfileFormatError(f"`{path}` is not a valid Chrome trace (an event at byte {start:,}: "
                                     f"{one_line(str(exc))})") from None
        texts, at, length = event_values(path, event, origin)
        found.append((at is not None, length is not None))
        times.append((at or 0.0, length or 0.0))
        row = []
        for text in texts:
            if text is None:
                row.append((0, -1))
                continue
            raw = text.encode("utf-8", "replace")
            row.append((size, len(raw)))
            pieces.append(raw)
            size += len(raw)
        spans.append(row)
    if len(rows):
        spans = np.array(spans, np.int64)
        rel[rows], ln[rows] = np.where(spans[:, :, 1] < 0, rel[rows], spans[:, :, 0]), spans[:, :, 1]
        has[rows] = np.array(found, np.bool_)
        ts[rows], dur[rows] = np.array(times, np.float64).T
    return np.frombuffer(b"".join(pieces) or b"\0", np.uint8)


def _strings(data: np.ndarray, offs: np.ndarray, valid: np.ndarray | None = None, reach: int | None = None) -> pa.Array:
    """An Arrow string array over ``data`` and ``offs`` (int64 from 0), null where not ``valid``
    (None: none is); large strings when the offsets, or ``reach``, pass 32 bits."""
    n = len(offs) - 1
    kind = pa.string() if (offs[-1] if reach is None else reach) < 2**31 else pa.large_string()
    offsets = offs.astype(np.int32) if kind == pa.string() else offs
    nulls = 0 if valid is None else n - int(np.count_nonzero(valid))
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(kind, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)

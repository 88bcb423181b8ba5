"""A Chrome trace's events as Arrow columns: from the numba scan (``kineto_events``), or from
Python's ``json`` (the reference path); both give the same table.

Each event gives its string fields (``FIELDS``: a string as it is, any other value as
``json.dumps`` writes it compactly, null when absent or null), ``ts`` and ``dur`` (float64), its
``args`` as compact JSON text (``json.dumps(args, separators=(",", ":"), ensure_ascii=False)``)
and, as ``arg:<key>`` columns, the ``ARG_KEYS`` values of its args in the same text form (what
the Kineto reader looks up, so that no JSON path runs over whole columns). The fields of
``CODED`` are dictionary columns (in order of first appearance, as Arrow encodes them): the
scan numbers their values without spelling a string per event.
"""

from __future__ import annotations

import json
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from tfprof.errors import ProfileFormatError
from tfprof.ingest.foreign.trace_layout import ARG_KEYS, ARGS, CODED, FIELDS, NON_ASCII, PYTHON, SLOTS
from tfprof.ingest.sources import one_line

ARG_COLUMNS = tuple(f"arg:{k}" for k in ARG_KEYS)
ORDER = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "s", "bp", "args", *ARG_COLUMNS)


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


def event_values(path, event) -> tuple[list, float | None, float | None]:
    """(the slots' texts, ts, dur) of one decoded event."""
    if not isinstance(event, dict):
        raise ProfileFormatError(f"`{path}` is not a valid Chrome trace (an item of its `traceEvents` is "
                                 f"`{one_line(_text(event))[:40]}`, not an event object)")
    args = event.get("args")
    texts = [_text(event.get(f)) for f in FIELDS] + [_text(args)]
    texts += [_text(args.get(k)) if isinstance(args, dict) else None for k in ARG_KEYS]
    return texts, _float(path, event.get("ts"), "ts"), _float(path, event.get("dur"), "dur")


def reference_table(path, events: list) -> pa.Table:
    """The table of decoded ``events`` (Python's ``json``)."""
    rows = [event_values(path, e) for e in events]
    columns = {name: pa.array([r[0][k] for r in rows], pa.string())
               for k, name in enumerate([*FIELDS, "args", *ARG_COLUMNS])}
    columns.update({name: columns[name].dictionary_encode() for name in CODED})
    columns["ts"] = pa.array([r[1] for r in rows], pa.float64())
    columns["dur"] = pa.array([r[2] for r in rows], pa.float64())
    return pa.table({name: columns[name] for name in ORDER})


def scanned_table(path, body: np.ndarray, start: int, array_form: bool):
    """(status, end, the events table) of the events array whose first byte inside is
    ``body[start]``; the table is None unless the scan reached the array's end (or, array form,
    stopped between two events). A large array is scanned in two halves at once (``_scan``), and
    the columns are gathered on as many threads."""
    from tfprof.ingest.foreign import kineto_events, kineto_names

    status, end, ev_start, ev_end, rel, ln, ts, dur, has, flags = _scan(body, start)
    if status not in (kineto_events.OK, kineto_events.OPEN):
        return status, end, None
    marked = (flags & PYTHON).astype(np.bool_)
    extra = _decode_marked(path, body, np.flatnonzero(marked), ev_start, ev_end, rel, ln, ts, dur, has)
    del ev_end
    names = [*FIELDS, "args", *ARG_COLUMNS]
    coded = np.array([names.index(name) for name in CODED], np.int64)

    def interned() -> dict[str, pa.Array]:
        """The ``CODED`` columns: a code per event, and each distinct value spelled once."""
        codes, slot_of, first = kineto_names.intern(body, ev_start, rel, ln, coded, marked, extra)
        out = {}
        for q, slot in enumerate(coded):
            rows = first[slot_of == q]
            data, offs = kineto_events.gather(body, ev_start[rows], rel[rows], ln[rows], slot, marked[rows], extra,
                                              False)
            values = _strings(data, offs, np.ones(len(rows), np.bool_))
            column = np.ascontiguousarray(codes[:, q])
            out[names[slot]] = pa.DictionaryArray.from_arrays(pa.array(column, mask=column < 0), values)
        return out

    def gathered() -> dict[str, pa.Array]:
        """The other columns but the args, which say something for few events: in one pass."""
        rest = np.array([slot for slot in range(len(names)) if slot not in coded and slot != ARGS], np.int64)
        data, offs = kineto_events.gather_many(body, ev_start, rel, ln, rest, marked, extra)
        return {names[slot]: _strings(data, np.ascontiguousarray(offs[:, q]), ln[:, slot] >= 0)
                for q, slot in enumerate(rest)}

    def minified() -> pa.Array:
        data, offs = kineto_events.gather(body, ev_start, rel, ln, ARGS, marked, extra, True)
        return _strings(data, offs, ln[:, ARGS] >= 0)

    with ThreadPoolExecutor(_THREADS) as pool:  # numba releases the GIL
        # the args, the longest, on one thread; the names, then the rest, on the other
        parts = [pool.submit(minified), pool.submit(interned), pool.submit(gathered)]
        columns = {"args": parts[0].result(), **parts[1].result(), **parts[2].result()}
    columns["ts"] = pa.array(ts, pa.float64(), mask=~has[:, 0])
    columns["dur"] = pa.array(dur, pa.float64(), mask=~has[:, 1])
    if (flags & NON_ASCII).any():
        for name in names:
            try:
                column = columns[name]
                (column.dictionary if name in CODED else column).validate(full=True)
            except pa.ArrowInvalid:
                raise ProfileFormatError(f"`{path}` is not a valid Chrome trace (its text is not UTF-8)") from None
    return status, end, pa.table({name: columns[name] for name in ORDER})


_THREADS = max(1, min(2, os.cpu_count() or 1))
SPLIT_BYTES = 8 << 20  # arrays smaller than this are scanned in one piece
# where the second half starts: an event that follows another (`}, {"ph"`), Kineto's first key
_NEXT_EVENT = re.compile(rb'\}\s*,\s*(\{)\s*"(?:ph|name|cat)"')


def _scan(body: np.ndarray, start: int):
    """``kineto_events.scan`` of the array from ``body[start]``, on two threads when it is large:
    the second half starts at what looks like an event boundary past the middle, and counts only
    if the first half, scanning from the true start, stops exactly there between two events
    (else the first half's scan, which then went on to the end, is the answer)."""
    from tfprof.ingest.foreign import kineto_events

    size = len(body) - start
    found = _NEXT_EVENT.search(body.data, start + size // 2) if _THREADS > 1 and size >= SPLIT_BYTES else None
    if found is None:
        return _trimmed(kineto_events.scan(body, start, _rows(size), -1, SLOTS), _rows(size))
    cut = found.start(1)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(kineto_events.scan, body, start, _rows(cut - start), cut, SLOTS)
        second = pool.submit(kineto_events.scan, body, cut, _rows(len(body) - cut), -1, SLOTS)
        head, tail = list(first.result()), list(second.result())
    del first, second
    if head[0] != kineto_events.SPLIT:
        return _trimmed(head, _rows(cut - start))
    out = [tail[0], tail[1]]
    for j in range(2, len(head)):  # an array at a time, each half freed once joined
        out.append(np.concatenate([head[j], tail[j]]))
        head[j] = tail[j] = None
    return tuple(out)


def _rows(size: int) -> int:
    """The rows the scan first makes room for, for ``size`` bytes of events (it doubles them as needed)."""
    return max(16, size // 256)


def _trimmed(found, rows: int) -> tuple:
    """The scan's answer ``found`` with its arrays copied to their length, one at a time, where
    the room the scan made (``rows``, doubled as needed) is a third more than that."""
    found = list(found)
    count = len(found[2])
    room = rows
    while room < count:
        room *= 2
    if 3 * room > 4 * count:
        for j in range(2, len(found)):
            found[j] = found[j].copy()
    return tuple(found)


def _decode_marked(path, body, rows, ev_start, ev_end, rel, ln, ts, dur, has) -> np.ndarray:
    """Decode the events ``rows`` with Python's ``json`` (an escape, an unusual number or value)
    and point their slots into the returned buffer (their values are written back in one step
    per array: numpy's element access costs more than the decoding)."""
    pieces, size = [], 0
    spans, times, found = [], [], []
    for start, end in zip(ev_start[rows].tolist(), ev_end[rows].tolist()):
        try:
            event = json.loads(bytes(body[start:end]))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ProfileFormatError(f"`{path}` is not a valid Chrome trace (an event at byte {start:,}: "
                                     f"{one_line(str(exc))})") from None
        texts, at, length = event_values(path, event)
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


def _strings(data: np.ndarray, offs: np.ndarray, valid: np.ndarray) -> pa.Array:
    """An Arrow string array over ``data`` and ``offs`` (int64; they need not start at 0), null
    where not ``valid``."""
    n = len(valid)
    kind = pa.string() if offs[-1] < 2**31 else pa.large_string()
    offsets = offs.astype(np.int32) if kind == pa.string() else offs
    nulls = n - int(np.count_nonzero(valid))
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(kind, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)

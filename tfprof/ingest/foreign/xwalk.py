"""The outline of an XSpace read off the wire, without decoding its events: where each line and
each event metadata entry lies, and a copy of the space without its lines for protobuf.

An XSpace holds few planes, lines and metadata but many events. One numba walk over the raw
bytes records, per line, its header (id, name, start) and where its payload lies, and per event
metadata entry its key, name and display name and where its message lies; and it writes the
*skeleton*: the same XSpace with every plane's lines cut out, small enough for protobuf to
decode in full (plane names, stat metadata, plane stats, HLO protos, errors, warnings). The
events are decoded later, line by line (``xargs``). Anything the walk does not read as every
writer does (a group, a map entry with a repeated or extra field, a damaged or cut-off field,
a string that is not UTF-8) makes ``walk`` return None: the caller then lets protobuf decode
the whole file, which either says what is wrong or gives what the reference path reads.

Field numbers (xplane.proto): XSpace.planes 1; XPlane.lines 3, event_metadata 4 (a map: key 1,
value 2); XLine id 1, name 2, timestamp_ns 3, events 4, display_name 11; XEventMetadata name 2,
display_name 4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from tfprof.ingest.wire.fields import read_entry, read_len, read_tag, read_varint, skip, utf8_ok
from tfprof.varint import put as put_varint
from tfprof.varint import size as varint_size

# columns of the line rows: plane, id, name start, name end, timestamp_ns, payload start, end, events
L_PLANE, L_ID, L_NAME_S, L_NAME_E, L_TS, L_S, L_E, L_EVENTS = range(8)
# columns of the event metadata entry rows: plane, key, message start, end, name start, end, display start, end
M_PLANE, M_KEY, M_S, M_E, M_NAME_S, M_NAME_E, M_DISP_S, M_DISP_E = range(8)
# the walk's counters: planes, lines, events, metadata entries, skeleton bytes
N_PLANES, N_LINES, N_EVENTS, N_ENTRIES, N_SKELETON = range(5)
_BAD = -1  # a string field that is not UTF-8 (the other codes are ``wire.errors``')


@njit(cache=True, _nrt=False)
def _copy(buf, s, e, out, o):
    for k in range(e - s):
        out[o + k] = buf[s + k]
    return o + e - s


@njit(cache=True, _nrt=False)
def _line(buf, s, e, fill, row, lines):
    """Read one XLine's header and count its events; the count, or < 0 when it is damaged."""
    lid = ts = 0
    ns = ne = s
    events = 0
    pos = s
    while pos < e:
        f, wt, pos = read_tag(buf, pos, e)
        if pos < 0:
            return pos
        if f == 4 and wt == 2:
            a, b = read_len(buf, pos, e)
            if a < 0:
                return a
            events += 1
            pos = b
        elif (f == 2 or f == 11) and wt == 2:
            a, b = read_len(buf, pos, e)
            if a < 0:
                return a
            if not utf8_ok(buf, a, b):
                return _BAD
            if f == 2:
                ns, ne = a, b
            pos = b
        elif (f == 1 or f == 3) and wt == 0:
            v, pos = read_varint(buf, pos, e)
            if f == 1:
                lid = v
            else:
                ts = v
        else:
            pos = skip(buf, pos, e, wt, f)
        if pos < 0:
            return pos
    if fill:
        lines[row, L_ID] = lid
        lines[row, L_NAME_S] = ns
        lines[row, L_NAME_E] = ne
        lines[row, L_TS] = ts
        lines[row, L_S] = s
        lines[row, L_E] = e
        lines[row, L_EVENTS] = events
    return events


@njit(cache=True, _nrt=False)
def _metadata(buf, s, e, fill, row, ents):
    """Read one event_metadata map entry (key, and the name and display name of its value); 0, or
    < 0 when it is damaged or not laid out as writers lay it out (``read_entry``)."""
    key, _, _, _, vs, ve, status = read_entry(buf, s, e, 0, 2)
    if status < 0:
        return status
    ns = ne = ds = de = ve
    pos = vs
    while pos < ve:
        f, wt, pos = read_tag(buf, pos, ve)
        if pos < 0:
            return pos
        if (f == 2 or f == 4) and wt == 2:
            a, b = read_len(buf, pos, ve)
            if a < 0:
                return a
            if f == 2:
                ns, ne = a, b
            else:
                ds, de = a, b
            pos = b
        else:
            pos = skip(buf, pos, ve, wt, f)
            if pos < 0:
                return pos
    if fill:
        ents[row, M_KEY] = key
        ents[row, M_S] = vs
        ents[row, M_E] = ve
        ents[row, M_NAME_S] = ns
        ents[row, M_NAME_E] = ne
        ents[row, M_DISP_S] = ds
        ents[row, M_DISP_E] = de
    return 0


@njit(cache=True, _nrt=False)
def _plane(buf, s, e, fill, plane, lines, ents, skeleton, o, n):
    """Walk one XPlane: its lines and metadata entries recorded, the rest copied to the skeleton
    (as a plane of its own); the skeleton's new end, or < 0 when the plane is damaged."""
    kept = 0
    pos = s
    while pos < e:
        at = pos
        f, wt, pos = read_tag(buf, pos, e)
        if pos < 0:
            return pos
        pos = skip(buf, pos, e, wt, f)
        if pos < 0:
            return pos
        if not (f == 3 and wt == 2):
            kept += pos - at
    if fill:
        skeleton[o] = 0x0A
        o = put_varint(skeleton, o + 1, np.uint64(kept))
    else:
        o += 1 + varint_size(np.uint64(kept))
    pos = s
    while pos < e:
        at = pos
        f, wt, pos = read_tag(buf, pos, e)
        if f == 3 and wt == 2:
            a, b = read_len(buf, pos, e)
            if fill:
                lines[n[N_LINES], L_PLANE] = plane
            r = _line(buf, a, b, fill, n[N_LINES], lines)
            if r < 0:
                return r
            n[N_LINES] += 1
            n[N_EVENTS] += r
            pos = b
            continue
        p = pos
        pos = skip(buf, pos, e, wt, f)  # (checked by the loop above)
        if f == 4 and wt == 2:
            a, b = read_len(buf, p, e)
            if fill:
                ents[n[N_ENTRIES], M_PLANE] = plane
            r = _metadata(buf, a, b, fill, n[N_ENTRIES], ents)
            if r < 0:
                return r
            n[N_ENTRIES] += 1
        o = _copy(buf, at, pos, skeleton, o) if fill else o + pos - at
    return o


@njit(cache=True, _nrt=False)
def _structure(buf, fill, lines, ents, skeleton, n):
    """Walk the XSpace: planes by ``_plane``, other top-level fields copied to the skeleton as they
    are. n = [planes, lines, events, entries, skeleton bytes]; 0, or < 0 when it is damaged."""
    o = 0
    pos = 0
    end = len(buf)
    while pos < end:
        at = pos
        f, wt, pos = read_tag(buf, pos, end)
        if pos < 0:
            return pos
        if f == 1 and wt == 2:
            a, b = read_len(buf, pos, end)
            if a < 0:
                return a
            o = _plane(buf, a, b, fill, n[N_PLANES], lines, ents, skeleton, o, n)
            if o < 0:
                return o
            n[N_PLANES] += 1
            pos = b
        else:
            pos = skip(buf, pos, end, wt, f)
            if pos < 0:
                return pos
            o = _copy(buf, at, pos, skeleton, o) if fill else o + pos - at
    n[N_SKELETON] = o
    return 0


@dataclass
class Outline:
    """What ``walk`` found: ``lines`` (``L_*`` columns) and ``entries`` (``M_*`` columns) as int64
    rows in the file's order, ``events`` (their count) and ``skeleton`` (the XSpace without its
    lines, for protobuf)."""

    lines: np.ndarray
    entries: np.ndarray
    events: int
    skeleton: bytes


def walk(buf: np.ndarray) -> Outline | None:
    """The outline of the XSpace in ``buf`` (its bytes as uint8); None when the walk cannot read it
    (damaged, or laid out as no writer does): protobuf must decode the file instead."""
    n = np.zeros(5, np.int64)
    none = np.zeros((0, 8), np.int64)
    if _structure(buf, False, none, none, np.zeros(0, np.uint8), n) < 0:
        return None
    lines, ents = np.zeros((n[N_LINES], 8), np.int64), np.zeros((n[N_ENTRIES], 8), np.int64)
    skeleton = np.zeros(n[N_SKELETON], np.uint8)
    events = int(n[N_EVENTS])
    n[:] = 0
    if _structure(buf, True, lines, ents, skeleton, n) < 0 or n[N_EVENTS] != events:
        return None
    return Outline(lines, ents, events, skeleton.tobytes())

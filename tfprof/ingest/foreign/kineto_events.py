"""The event loop of the Chrome-trace scanner (``kineto_scan`` has its JSON pieces): ``scan``
notes each event's spans and numbers in one pass, ``gather`` copies one slot of every event
into an Arrow-ready buffer (an ``args`` object without its whitespace), ``gather_many`` several."""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof.ingest.foreign.kineto_scan import (
    ARGS,
    BAD,
    CUT,
    DUR,
    EVENT_CODES,
    EVENT_KEYS,
    EVENT_LENS,
    MAX_DEPTH,
    NOT_OBJECT,
    OK,
    OPEN,
    PYTHON,
    SPLIT,
    TS,
    container,
    grow,
    literal,
    lookup,
    number,
    shifted,
    string,
    ws,
)


@njit(cache=True, nogil=True)
def event_key(buf, s, e):
    """The slot (or ``TS``, ``DUR``) of event key ``buf[s:e]``, -1 for another key."""
    m = e - s
    c = buf[s]
    if m == 2:
        d = buf[s + 1]
        if c == 112 and d == 104:  # ph
            return 0
        if c == 105 and d == 100:  # id
            return 5
        if c == 98 and d == 112:  # bp
            return 7
        if c == 116 and d == 115:  # ts
            return TS
        return -1
    if m == 3:
        if buf[s + 1] == 105 and buf[s + 2] == 100:  # ?id
            return 3 if c == 112 else 4 if c == 116 else -1
        if c == 99 and buf[s + 1] == 97 and buf[s + 2] == 116:  # cat
            return 1
        if c == 100 and buf[s + 1] == 117 and buf[s + 2] == 114:  # dur
            return DUR
        return -1
    if m == 4:
        found = lookup(buf, s, e, EVENT_KEYS, EVENT_LENS)
        return EVENT_CODES[found] if found >= 0 else -1
    return 6 if m == 1 and c == 115 else -1


@njit(cache=True, nogil=True)
def event(buf, i, n, stack, starts, hashes, k, rel, ln, ts, dur, has, origin):
    """The event object at ``i`` into row ``k``: (its end or a status, its flags); its ``ts`` less
    ``origin`` µs when that is not 0 (``shifted``). ``want``: 0 a value, 1 a key or ``}``, 2 a
    key, 3 ``:``, 4 ``,`` or ``}``."""
    start = i
    fl = 0
    want = 1
    code = -1
    i += 1
    while i < n:
        c = buf[i]
        if c == 32 or c == 10 or c == 13 or c == 9:
            i += 1
            continue
        if want == 4:
            if c == 44:
                want = 2
            elif c == 125:
                return i + 1, fl
            else:
                return BAD, fl
            i += 1
            continue
        if want == 3:
            if c != 58:
                return BAD, fl
            want = 0
            i += 1
            continue
        if want != 0:
            if c == 125 and want == 1:
                return i + 1, fl
            if c != 34:
                return BAD, fl
            end, sflags = string(buf, i, n)
            if end < 0:
                return end, fl
            fl |= sflags
            code = event_key(buf, i + 1, end - 1)
            want = 3
            i = end
            continue
        want = 4
        if code == TS or code == DUR:
            has[k, 0 if code == TS else 1] = False
        if c == 34:
            end, sflags = string(buf, i, n)
            if end < 0:
                return end, fl
            if code >= 0:
                fl |= sflags
            if 0 <= code < ARGS:
                rel[k, code] = i + 1 - start
                ln[k, code] = end - 2 - i
            elif code >= ARGS:
                fl |= PYTHON
        elif c == 123 or c == 91:
            whole = code == ARGS and c == 123
            if whole:
                for s in range(ARGS, ln.shape[1]):
                    ln[k, s] = -1
            end, cflags = container(buf, i, n, stack, starts, hashes, start, rel, ln, k, whole)
            if end < 0:
                return end, fl
            if whole:
                fl |= cflags
                rel[k, ARGS] = i - start
                ln[k, ARGS] = end - i
            elif code >= 0:
                fl |= PYTHON
        elif c == 45 or 48 <= c <= 57:
            end, value, exact, canonical = number(buf, i, n)
            if end < 0:
                return end, fl
            if code == TS and origin != 0:
                exact, value = shifted(buf, i, end, origin)
            if code == TS or code == DUR:
                if exact:
                    if code == TS:
                        ts[k] = value
                        has[k, 0] = True
                    else:
                        dur[k] = value
                        has[k, 1] = True
                else:
                    fl |= PYTHON
            elif 0 <= code < ARGS and canonical:
                rel[k, code] = i - start
                ln[k, code] = end - i
            elif code >= 0:
                fl |= PYTHON
        else:
            end, kind = literal(buf, i, n)
            if end < 0:
                return end, fl
            if 0 <= code < ARGS and kind <= 2:
                rel[k, code] = i - start
                ln[k, code] = end - i
            elif code >= 0 and code <= ARGS and kind == 3:
                for s in range(code, code + 1 if code < ARGS else ln.shape[1]):
                    ln[k, s] = -1
            elif (code == TS or code == DUR) and kind >= 4:
                value = np.nan if kind == 4 else np.inf
                if code == TS:
                    ts[k] = value
                    has[k, 0] = True
                else:
                    dur[k] = value
                    has[k, 1] = True
            elif code >= 0 and not ((code == TS or code == DUR) and kind == 3):
                fl |= PYTHON
        i = end
    return CUT, fl


@njit(cache=True, nogil=True)
def scan(buf, pos, capacity, stop, slots, origin=0):
    """The events of the array whose first byte inside is ``buf[pos]``: (status, the position of
    its ``]`` (or where the scan stopped), event starts, event ends, slot starts (from the event's
    start), slot lengths (-1: absent), ts (less ``origin`` µs), dur, whether each has a ts, a dur,
    event flags). When the next event starts exactly at ``stop``, the scan stops there with status
    ``SPLIT``.
    ``slots`` is ``SLOTS``, passed in: numba's cache of this file would not see a change to a
    constant of another module (``trace_layout``), and keep a compiled scan with the old count."""
    n = len(buf)
    cap = max(capacity, 16)
    ev_start = np.empty(cap, np.int64)
    ev_end = np.empty(cap, np.int64)
    rel = np.empty((cap, slots), np.int32)
    ln = np.empty((cap, slots), np.int32)
    ts = np.empty(cap, np.float64)
    dur = np.empty(cap, np.float64)
    has = np.empty((cap, 2), np.bool_)
    flags = np.empty(cap, np.uint8)
    stack = np.empty(MAX_DEPTH, np.uint8)
    starts = np.empty(MAX_DEPTH, np.int64)
    hashes = np.empty(4096, np.uint64)  # key hashes of an args object's open objects
    k = 0
    status = OK
    i = ws(buf, pos, n)
    if i < n and buf[i] == 93:
        status = OK
    else:
        while True:
            i = ws(buf, i, n)
            if i >= n:
                status = OPEN
                break
            if i == stop:
                status = SPLIT
                break
            if buf[i] != 123:
                status = NOT_OBJECT
                break
            if k == cap:
                cap = cap * 2
                ev_start, ev_end, rel, ln = grow(ev_start, cap), grow(ev_end, cap), grow(rel, cap), grow(ln, cap)
                ts, dur, has, flags = grow(ts, cap), grow(dur, cap), grow(has, cap), grow(flags, cap)
            start = i
            ev_start[k] = i
            ln[k, :] = -1
            rel[k, :] = 0
            has[k, 0] = False
            has[k, 1] = False
            ts[k] = 0.0
            dur[k] = 0.0
            fl = 0
            i, fl = event(buf, i, n, stack, starts, hashes, k, rel, ln, ts, dur, has, origin)
            if i < 0:
                status = i
                i = start
                break
            ev_end[k] = i
            flags[k] = fl
            k += 1
            i = ws(buf, i, n)
            if i >= n:
                status = OPEN
                break
            if buf[i] == 44:
                i += 1
                continue
            if buf[i] == 93:
                break
            status = BAD
            break
    # the first k rows of arrays of ``capacity`` rows or more (the caller trims them, one at a
    # time, where that is worth a copy)
    return (status, i, ev_start[:k], ev_end[:k], rel[:k], ln[:k], ts[:k], dur[:k], has[:k], flags[:k])


@njit(cache=True, nogil=True)
def gather(buf, ev_start, rel, ln, slot, marked, extra, minify, data):
    """Slot ``slot`` of every event into ``data`` (the caller's: room for the slot's spans one
    after another), one after another: their int64 offsets (a marked event's value from
    ``extra``); ``minify`` drops the whitespace outside strings (an args object): a string is
    copied through to its closing quote in a loop of its own."""
    n = len(ev_start)
    offs = np.zeros(n + 1, np.int64)
    o = 0
    for r in range(n):
        m = ln[r, slot]
        if m > 0:
            if marked[r]:
                s = rel[r, slot]
                data[o:o + m] = extra[s:s + m]
                o += m
            elif not minify:
                s = ev_start[r] + rel[r, slot]
                data[o:o + m] = buf[s:s + m]
                o += m
            else:
                j = ev_start[r] + rel[r, slot]
                e = j + m
                while j < e:
                    c = buf[j]
                    j += 1
                    if c == 34:
                        data[o] = c
                        o += 1
                        while True:
                            c = buf[j]
                            j += 1
                            data[o] = c
                            o += 1
                            if c == 34:
                                break
                            if c == 92:
                                data[o] = buf[j]
                                o += 1
                                j += 1
                    elif c != 32 and c != 10 and c != 13 and c != 9:
                        data[o] = c
                        o += 1
        offs[r + 1] = o
    return offs


@njit(cache=True, nogil=True)
def gather_many(buf, ev_start, rel, ln, slots, marked, extra):
    """Slots ``slots`` of every event (values copied as they are) in one pass over the events:
    one byte buffer that all share, where slot ``slots[q]``'s values lie one after another from
    ``base[q]``, and per slot its int64 offsets from there (row ``q`` of the offsets): (data,
    base, offsets)."""
    n = len(ev_start)
    k = len(slots)
    offs = np.empty((k, n + 1), np.int64)
    sizes = np.zeros(k, np.int64)
    for r in range(n):
        for q in range(k):
            m = ln[r, slots[q]]
            if m > 0:
                sizes[q] += m
    data = np.empty(max(sizes.sum(), 1), np.uint8)
    base = np.zeros(k, np.int64)
    for q in range(1, k):
        base[q] = base[q - 1] + sizes[q - 1]
    o = np.zeros(k, np.int64)
    offs[:, 0] = 0
    for r in range(n):
        mine = marked[r]
        for q in range(k):
            slot = slots[q]
            m = ln[r, slot]
            if m > 0:
                at = base[q] + o[q]
                if mine:
                    s = rel[r, slot]
                    data[at:at + m] = extra[s:s + m]
                else:
                    s = ev_start[r] + rel[r, slot]
                    data[at:at + m] = buf[s:s + m]
                o[q] += m
            offs[q, r + 1] = o[q]
    return data, base, offs

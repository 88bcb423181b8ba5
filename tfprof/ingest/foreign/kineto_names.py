"""The Chrome-trace scanner's names as codes: ``intern`` numbers the distinct values of one slot
of every event (a process or thread id, a name, a category) in one pass over the spans
``kineto_events.scan`` noted, without spelling a string per event. The codes count in order of
first appearance, as Arrow's ``dictionary_encode`` numbers them, so the dictionary column they
make is the one the reference path encodes."""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof.ingest.foreign.kineto_scan import key_hash


@njit(cache=True, nogil=True)
def _same(a, s, b, t, m):
    for j in range(m):
        if a[s + j] != b[t + j]:
            return False
    return True


@njit(cache=True, nogil=True)
def _grow(a, size):
    out = np.empty(size, a.dtype)
    out[:len(a)] = a
    return out


@njit(cache=True, nogil=True)
def intern(buf, ev_start, rel, ln, slot, marked, extra):
    """(a code per event for its value of slot ``slot``, -1 where it has none; the row of each
    code's first event). A marked event's value lies in ``extra`` (decoded by Python), the
    others' in ``buf``: equal bytes, wherever they lie, get one code. An open-addressing table
    over FNV-1a hashes, grown at half full."""
    n = len(ev_start)
    out = np.empty(n, np.int32)
    cap = 256
    table = np.full(cap, -1, np.int64)
    size = 64
    first = np.empty(size, np.int64)  # per code: its first row, where its bytes lie, their length, hash
    in_extra = np.empty(size, np.bool_)
    at = np.empty(size, np.int64)
    length = np.empty(size, np.int64)
    hashes = np.empty(size, np.uint64)
    count = 0
    for r in range(n):
        m = ln[r, slot]
        if m < 0:
            out[r] = -1
            continue
        mine = marked[r]
        s = rel[r, slot] if mine else ev_start[r] + rel[r, slot]
        h = key_hash(extra, s, s + m) if mine else key_hash(buf, s, s + m)
        b = np.int64(h & np.uint64(cap - 1))
        c = table[b]
        while c >= 0:
            if hashes[c] == h and length[c] == m:
                t = at[c]
                if mine:
                    found = _same(extra, s, extra, t, m) if in_extra[c] else _same(extra, s, buf, t, m)
                else:
                    found = _same(buf, s, extra, t, m) if in_extra[c] else _same(buf, s, buf, t, m)
                if found:
                    break
            b = (b + 1) & (cap - 1)
            c = table[b]
        if c < 0:
            c = count
            if c == size:
                size *= 2
                first, in_extra, at = _grow(first, size), _grow(in_extra, size), _grow(at, size)
                length, hashes = _grow(length, size), _grow(hashes, size)
            first[c], in_extra[c], at[c], length[c], hashes[c] = r, mine, s, m, h
            table[b] = c
            count += 1
            if 2 * count > cap:
                cap *= 2
                table = np.full(cap, -1, np.int64)
                for k in range(count):
                    b = np.int64(hashes[k] & np.uint64(cap - 1))
                    while table[b] >= 0:
                        b = (b + 1) & (cap - 1)
                    table[b] = k
        out[r] = c
    return out, first[:count].copy()

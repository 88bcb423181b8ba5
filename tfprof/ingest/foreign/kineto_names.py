"""The Chrome-trace scanner's names as codes: ``intern`` numbers the distinct values of some
slots of every event (process and thread ids, names, categories) in one pass over the spans
``kineto_events.scan`` noted, without spelling a string per event. Each slot's codes count in
order of first appearance, as Arrow's ``dictionary_encode`` numbers them, so the dictionary
column they make is the one the reference path encodes."""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof.ingest.foreign.kineto_scan import grow
from tfprof.ingest.wire.fields import bytes_eq


@njit(cache=True, nogil=True)
def _hash(a, s, m, slot):
    """A hash of ``a[s:s + m]`` from its length, its first and its last 8 bytes (equal values
    are told apart from colliding ones by comparing their bytes)."""
    h = (np.uint64(m) + np.uint64(slot) * np.uint64(0x10001)) * np.uint64(0x9E3779B97F4A7C15)
    w = np.uint64(0)
    for j in range(min(m, 8)):
        w = (w << np.uint64(8)) | np.uint64(a[s + j])
    h = (h ^ w) * np.uint64(0xBF58476D1CE4E5B9)
    if m > 8:
        w = np.uint64(0)
        for j in range(max(8, m - 8), m):
            w = (w << np.uint64(8)) | np.uint64(a[s + j])
        h = (h ^ w) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@njit(cache=True, nogil=True)
def intern(buf, ev_start, rel, ln, slots, marked, extra):
    """(a code per event and per slot of ``slots``, -1 where the event has none; the slot of each
    distinct value and the row of its first event, in order of first appearance). A marked
    event's values lie in ``extra`` (decoded by Python), the others' in ``buf``: equal bytes,
    wherever they lie, get one code. An open-addressing table over all the slots' values, grown
    at half full; a value equal to the previous event's skips it."""
    n = len(ev_start)
    k = len(slots)
    out = np.empty((n, k), np.int32)
    cap = 1024
    table = np.full(cap, -1, np.int64)
    size = 256
    # per distinct value: its slot, code, first row, where its bytes lie, their length, its hash
    slot_of, code, first = np.empty(size, np.int64), np.empty(size, np.int32), np.empty(size, np.int64)
    in_extra, at, length = np.empty(size, np.bool_), np.empty(size, np.int64), np.empty(size, np.int64)
    hashes = np.empty(size, np.uint64)
    count = 0
    counts = np.zeros(k, np.int32)
    last = np.full(k, -1, np.int64)
    for r in range(n):
        mine = marked[r]
        for q in range(k):
            slot = slots[q]
            m = ln[r, slot]
            if m < 0:
                out[r, q] = -1
                continue
            s = rel[r, slot] if mine else ev_start[r] + rel[r, slot]
            e = last[q]
            if e >= 0 and length[e] == m and not mine and not in_extra[e] and bytes_eq(buf, s, buf, at[e], m):
                out[r, q] = code[e]
                continue
            h = _hash(extra, s, m, q) if mine else _hash(buf, s, m, q)
            b = np.int64(h & np.uint64(cap - 1))
            e = table[b]
            while e >= 0:
                if hashes[e] == h and length[e] == m and slot_of[e] == q:
                    t = at[e]
                    if mine:
                        found = bytes_eq(extra, s, extra, t, m) if in_extra[e] else bytes_eq(extra, s, buf, t, m)
                    else:
                        found = bytes_eq(buf, s, extra, t, m) if in_extra[e] else bytes_eq(buf, s, buf, t, m)
                    if found:
                        break
                b = (b + 1) & (cap - 1)
                e = table[b]
            if e < 0:
                e = count
                if e == size:
                    size *= 2
                    slot_of, code, first = grow(slot_of, size), grow(code, size), grow(first, size)
                    in_extra, at, length = grow(in_extra, size), grow(at, size), grow(length, size)
                    hashes = grow(hashes, size)
                slot_of[e], code[e], first[e], in_extra[e], at[e], length[e], hashes[e] = q, counts[q], r, mine, s, m, h
                counts[q] += 1
                table[b] = e
                count += 1
                if 2 * count > cap:
                    cap *= 2
                    table = np.full(cap, -1, np.int64)
                    for j in range(count):
                        b = np.int64(hashes[j] & np.uint64(cap - 1))
                        while table[b] >= 0:
                            b = (b + 1) & (cap - 1)
                        table[b] = j
            out[r, q] = code[e]
            last[q] = e
    return out, slot_of[:count].copy(), first[:count].copy()

"""The Chrome-trace scanner's names as codes: ``intern`` numbers the distinct values of some
slots of every event (process and thread ids, names, categories) in one pass over the spans
``kineto_events.scan`` noted, without spelling a string per event, a window of events at a time
(its table carried from one window to the next). Each slot's codes count in order of first
appearance, as Arrow's ``dictionary_encode`` numbers them, so the dictionary column they make is
the one the reference path encodes."""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof.ingest.foreign.kineto_scan import grow
from tfprof.ingest.wire.fields import bytes_eq

SLOT, CODE, AT, LENGTH = range(4)  # the columns of ``seen``: what the table knows of each distinct value


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


def new_table(slots: int) -> tuple:
    """An empty table for ``intern`` over ``slots`` slots: (hash buckets, ``seen``, the values'
    hashes, their bytes one after another, [values, bytes used], values per slot, each slot's
    previous value)."""
    return (np.full(1024, -1, np.int64), np.empty((256, 4), np.int64), np.empty(256, np.uint64),
            np.empty(1 << 16, np.uint8), np.zeros(2, np.int64), np.zeros(slots, np.int32), np.full(slots, -1, np.int64))


@njit(cache=True, nogil=True)
def intern(buf, ev_start, rel, ln, slots, marked, extra, table, seen, hashes, spelled, sizes, counts, last):
    """A code per event and per slot of ``slots`` (-1 where the event has none), for one window
    of the file's events: the table (``new_table``) is carried from window to window, so that
    each slot's codes count in order of first appearance in the whole file. A marked event's
    values lie in ``extra`` (decoded by Python), the others' in ``buf``; each distinct value's
    bytes are copied once into ``spelled``, where a later window compares with them (equal bytes,
    wherever they lie, get one code). An open-addressing table over all the slots' values, grown
    at half full; a value equal to the slot's previous one skips it. Returns (the codes, and the
    table's arrays that grow: buckets, ``seen``, hashes, ``spelled``)."""
    n = len(ev_start)
    k = len(slots)
    out = np.empty((n, k), np.int32)
    cap = len(table)
    count, used = sizes[0], sizes[1]
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
            if e >= 0 and seen[e, LENGTH] == m and (bytes_eq(extra, s, spelled, seen[e, AT], m) if mine
                                                    else bytes_eq(buf, s, spelled, seen[e, AT], m)):
                out[r, q] = seen[e, CODE]
                continue
            h = _hash(extra, s, m, q) if mine else _hash(buf, s, m, q)
            b = np.int64(h & np.uint64(cap - 1))
            e = table[b]
            while e >= 0:
                if hashes[e] == h and seen[e, LENGTH] == m and seen[e, SLOT] == q and (
                        bytes_eq(extra, s, spelled, seen[e, AT], m) if mine
                        else bytes_eq(buf, s, spelled, seen[e, AT], m)):
                    break
                b = (b + 1) & (cap - 1)
                e = table[b]
            if e < 0:
                e = count
                if e == len(seen):
                    seen, hashes = grow(seen, 2 * e), grow(hashes, 2 * e)
                while used + m > len(spelled):
                    spelled = grow(spelled, 2 * len(spelled))
                if mine:
                    spelled[used:used + m] = extra[s:s + m]
                else:
                    spelled[used:used + m] = buf[s:s + m]
                seen[e, SLOT], seen[e, CODE], seen[e, AT], seen[e, LENGTH], hashes[e] = q, counts[q], used, m, h
                used += m
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
            out[r, q] = seen[e, CODE]
            last[q] = e
    sizes[0], sizes[1] = count, used
    return out, table, seen, hashes, spelled


@njit(cache=True, nogil=True)
def spelled_out(spelled, seen, count, q):
    """The distinct values of slot ``q`` in code order, as one byte buffer and int64 offsets."""
    size, total = 0, 0
    for e in range(count):
        if seen[e, SLOT] == q:
            size += 1
            total += seen[e, LENGTH]
    data = np.empty(max(total, 1), np.uint8)
    offs = np.zeros(size + 1, np.int64)
    r = 0
    for e in range(count):
        if seen[e, SLOT] == q:
            s, m = seen[e, AT], seen[e, LENGTH]
            data[offs[r]:offs[r] + m] = spelled[s:s + m]
            offs[r + 1] = offs[r] + m
            r += 1
    return data[:total], offs

"""Fast ProfileProto decoder: numba kernels walk the protobuf wire format into numpy columns.

``tables_from_message`` (profile_proto.py) is the reference: it needs the whole parsed message
(~3 GB and ~10 s just to parse a 70k-node, 50-step profile, then a Python loop per exec
record). This module produces the same tables from the file, batch by batch, in bounded memory:

1. ``scan_profile`` walks the top level once, through a read-only ``mmap`` whose pages are
   released (``MADV_DONTNEED``) behind it: where each ``nodes`` map entry is, each node's name,
   ``steps``, ``id_to_string``, the two flags. Map entries may come in any key order
   (TensorFlow's C++ writes maps in hash order); a repeated key keeps the last entry.
2. ``ProfileReader.batches`` cuts the node ids into contiguous ranges of about ``_BATCH_BYTES``
   of input. A batch's nodes are copied with ``pread`` into a private buffer in node-id order;
   a *count* kernel walks them, validating the wire format and counting each table's rows; a
   *fill* kernel walks them again and writes the values straight into preallocated columns.
   Both kernels are compiled ``nogil`` and run on every core (each thread takes a contiguous
   part of the batch). Reading batch k+2, decoding batch k+1 and the caller's handling of
   batch k overlap.
3. Device strings (few distinct values, millions of occurrences) are interned in a small hash
   table, compared 8 bytes at a time, and become dictionary codes; other strings are copied
   out by the fill kernel and dictionary-encoded by Arrow. Attr values are sliced raw when a
   kernel has checked that the slice is exactly what ``SerializeToString(deterministic=True)``
   gives, otherwise re-serialized through protobuf.

Every table of a batch is in the schema's row order and its dictionaries list the values the
batch uses in the order the reference decoder first meets them, so concatenating the batches
(``concat_batches``) gives tables equal to the reference's (``pa.Table.equals``). Damaged files
raise ``ProfileFormatError``: every length and varint is checked against the end of its
message before it is used. The few valid encodings the kernels leave alone (a map entry whose
value field appears twice, deprecated groups) are decoded by the reference decoder instead.

The kernels are written to keep numba's runtime out of the hot loops (``_nrt=False``: no
reference counting, no allocation; scratch space comes from the caller) and to let the hottest
helpers be inlined (``inline="always"``), which roughly halves the decoding time at the price
of a longer first compile (cached on disk).
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from tfprof.errors import InputNotFoundError, ProfileFormatError
from tfprof.ingest import derive, profile_proto
from tfprof.ingest.sources import KINDS, damaged
from tfprof.schema import NODE_TABLES, TABLES, conform

BATCH_TABLES = tuple(t for t in NODE_TABLES if t != "allocator_memory")  # what a ProfileProto carries per node
"""The per-node tables, in the order a batch holds them."""

_SPAN = 32 << 20  # bytes of file the scan walks between two page releases
_BATCH_BYTES = 24 << 20  # input bytes per batch when batch_nodes is not given
_READ_AHEAD = 1  # batches whose bytes are read while an earlier one is decoded
_PAGE = mmap.PAGESIZE

# Wire errors are negative positions returned by the kernels.
_E_VARINT, _E_LENGTH, _E_WIRE, _E_MISMATCH, _E_UNUSUAL, _E_UTF8 = -1, -2, -3, -4, -5, -7
_DROP = 1  # a map entry protobuf does not put in the map (see _entry)
_DROPPED_TUPLE = -100  # _count_map_of_tuples: a valid entry to leave out
_WIRE_PROBLEMS = {
    _E_VARINT: "a varint is truncated or longer than 10 bytes",
    _E_LENGTH: "a length runs past the end of its message",
    _E_WIRE: "an invalid tag, wire type or group",
    _E_MISMATCH: "a known field has the wrong wire type",
    _E_UTF8: "a string field is not valid UTF-8",
}
# Node-level errors in the kernels' err arrays (wire errors are stored as they are).
_E_NONAME, _E_ID, _E_STEP, _E_INPUT = 10, 11, 12, 13

# Per-node counters (count kernel) and the row tables they size (fill kernel).
# C_STRB counts the bytes of the strings the fill kernel copies out (op, op types, attr names and
# values, inline trace strings), so that building the Arrow tables never touches the file again.
(C_INPUTS, C_TYPES, C_OSH, C_ODIMS, C_ATTRS, C_FRAMES, C_STEPS, C_EXDEV, C_EXECS, C_MEM, C_OMEM, C_ALLOC, C_SHAPE,
 C_STRB, C_SRC, C_ACCENT, C_CPUENT) = range(17)
_NCOUNT = 17
_NROWT = 14  # C_INPUTS..C_STRB are row/value tables

_HSLOTS0 = 1024  # initial device hash table size (power of two)


class _Unusual(Exception):
    """Valid protobuf that the kernels leave to the reference decoder: a map entry whose value
    field appears twice (protobuf merges the two), a deprecated group, a node named twice."""


# ================================================================================ wire primitives


@njit(cache=True, _nrt=False)
def _varint(buf, pos, end):
    """(value, new pos); new pos < 0 on a truncated or over-long varint."""
    if pos < end:
        b = np.int64(buf[pos])
        if b < 0x80:
            return b, pos + 1
    result = np.int64(0)
    shift = 0
    while True:
        if pos >= end or shift > 63:
            return np.int64(0), _E_VARINT
        b = np.int64(buf[pos])
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


@njit(cache=True, _nrt=False)
def _tag(buf, pos, end):
    """(field, wire type, new pos); new pos < 0 on a bad tag."""
    t, pos = _varint(buf, pos, end)
    if pos < 0:
        return 0, 0, pos
    if t >> 32 or (t >> 3) == 0:
        return 0, 0, _E_WIRE
    return t >> 3, t & 7, pos


@njit(cache=True, _nrt=False, inline="always")
def _tag_fast(buf, pos, end):
    """``_tag`` with one-byte tags (fields 1-15) decoded in line, for the hot loops."""
    if pos < end:
        b = np.int64(buf[pos])
        if 8 <= b < 0x80:
            return b >> 3, b & 7, pos + 1
    return _tag(buf, pos, end)


@njit(cache=True, _nrt=False, inline="always")
def _len_fast(buf, pos, end):
    """``_len`` with one-byte lengths decoded in line, for the hot loops."""
    if pos < end:
        n = np.int64(buf[pos])
        if n < 0x80:
            if n <= end - pos - 1:
                return pos + 1, pos + 1 + n
            return _E_LENGTH, 0
    return _len(buf, pos, end)


@njit(cache=True, _nrt=False, inline="always")
def _varint_fast(buf, pos, end):
    """``_varint`` with one-byte values decoded in line, for the hot loops."""
    if pos < end:
        b = np.int64(buf[pos])
        if b < 0x80:
            return b, pos + 1
    return _varint(buf, pos, end)


@njit(cache=True, _nrt=False)
def _len(buf, pos, end):
    """(payload start, payload end) of a length-delimited field; start < 0 on error."""
    n, pos = _varint(buf, pos, end)
    if pos < 0:
        return pos, 0
    if n < 0 or n > end - pos:
        return _E_LENGTH, 0
    return pos, pos + n


@njit(cache=True, _nrt=False)
def _skip(buf, pos, end, wt, field):
    """Position after a field's value; < 0 when it is damaged."""
    if wt == 0:
        for k in range(10):
            if pos + k >= end:
                return _E_VARINT
            if buf[pos + k] < 0x80:
                return pos + k + 1
        return _E_VARINT
    if wt == 1:
        return pos + 8 if end - pos >= 8 else _E_LENGTH
    if wt == 2:
        s, e = _len(buf, pos, end)
        return e if s >= 0 else s
    if wt == 5:
        return pos + 4 if end - pos >= 4 else _E_LENGTH
    if wt == 3:
        return _E_UNUSUAL  # a (deprecated) group: protobuf itself decides, see _Unusual
    return _E_WIRE


@njit(cache=True, _nrt=False)
def _count_packed(buf, s, e):
    """Number of varints in a packed field; < 0 when one is cut."""
    n = 0
    pos = s
    while pos < e:
        _, pos = _varint(buf, pos, e)
        if pos < 0:
            return pos
        n += 1
    return n


@njit(cache=True, _nrt=False)
def _bytes_lt(buf, o1, l1, o2, l2):
    """Byte-wise ``buf[o1:o1+l1] < buf[o2:o2+l2]``."""
    n = min(l1, l2)
    for k in range(n):
        a = buf[o1 + k]
        b = buf[o2 + k]
        if a != b:
            return a < b
    return l1 < l2


@njit(cache=True, _nrt=False)
def _bytes_eq(a, ao, b, bo, n):
    for k in range(n):
        if a[ao + k] != b[bo + k]:
            return False
    return True


@njit(cache=True, _nrt=False)
def _utf8_ok(buf, s, e):
    """Strict UTF-8 check (no overlongs, surrogates or code points past U+10FFFF), as protobuf does."""
    pos = s
    while pos < e:
        c = buf[pos]
        if c < 0x80:
            pos += 1
            continue
        if 0xC2 <= c <= 0xDF:
            n = 1
            lo, hi = 0x80, 0xBF
        elif 0xE0 <= c <= 0xEF:
            n = 2
            lo = 0xA0 if c == 0xE0 else 0x80
            hi = 0x9F if c == 0xED else 0xBF
        elif 0xF0 <= c <= 0xF4:
            n = 3
            lo = 0x90 if c == 0xF0 else 0x80
            hi = 0x8F if c == 0xF4 else 0xBF
        else:
            return False
        if pos + n >= e:
            return False
        c1 = buf[pos + 1]
        if c1 < lo or c1 > hi:
            return False
        for k in range(2, n + 1):
            ck = buf[pos + k]
            if ck < 0x80 or ck > 0xBF:
                return False
        pos += n + 1
    return True


# ================================================================================ device interning


@njit(cache=True, _nrt=False)
def _word(bw, p):
    """The 8 bytes at ``p`` as a little-endian uint64, from ``bw``: the (8-aligned, padded) buffer
    viewed as uint64 words."""
    i = p >> 3
    k = np.uint64((p & 7) * 8)
    if k == 0:
        return bw[i]
    return (bw[i] >> k) | (bw[i + 1] << (np.uint64(64) - k))


@njit(cache=True, _nrt=False)
def _word_of_bytes(b, p, n):
    """Up to 8 bytes at ``b[p:p+n]`` as a little-endian uint64 (what ``_word`` loads when n == 8)."""
    w = np.uint64(0)
    for k in range(min(n, 8)):
        w |= np.uint64(b[p + k]) << np.uint64(8 * k)
    return w


@njit(cache=True, _nrt=False)
def _mix(first, last, n):
    h = first * np.uint64(0x9E3779B97F4A7C15) ^ last * np.uint64(0xC2B2AE3D27D4EB4F) ^ np.uint64(n)
    return h ^ (h >> np.uint64(29))


@njit(cache=True, _nrt=False)
def _str_key(b, p, n):
    """(first word, last word) of string ``b[p:p+n]`` (both the whole string when n <= 8)."""
    if n >= 8:
        return _word_of_bytes(b, p, 8), _word_of_bytes(b, p + n - 8, 8)
    w = _word_of_bytes(b, p, n)
    return w, w


@njit(cache=True, _nrt=False, inline="always")
def _dev_lookup(buf, bw, off, n, dev_words, dev_tab, dev_w2, slots):
    """The code of device string ``buf[off:off+n]``; -1 when it is not interned yet.

    Device strings are long (``/job:localhost/replica:0/task:0/device:gpu:0/stream:all``) and met
    millions of times, so they are compared 8 bytes at a time.
    """
    if n >= 8:
        first = _word(bw, off)
        last = _word(bw, off + n - 8)
    else:
        first, last = _str_key(buf, off, n)
    mask = len(slots) - 1
    j = np.int64(_mix(first, last, n) & np.uint64(mask))
    while True:
        c = slots[j]
        if c < 0:
            return -1
        if dev_tab[1, c] == n and dev_w2[0, c] == first and dev_w2[1, c] == last:
            sw = dev_tab[0, c]
            same = True
            for k in range(8, n - 8, 8):
                if _word(bw, off + k) != dev_words[sw + (k >> 3)]:
                    same = False
                    break
            if same:
                return c
        j = (j + 1) & mask


@njit(cache=True, _nrt=False)
def _dev_insert(first, last, n, slots, code):
    mask = len(slots) - 1
    j = np.int64(_mix(first, last, n) & np.uint64(mask))
    while slots[j] >= 0:
        j = (j + 1) & mask
    slots[j] = code


class _Devices:
    """The device strings met so far: codes (insertion order) and byte-order ranks."""

    def __init__(self) -> None:
        self.strings: list[bytes] = []
        self.index: dict[bytes, int] = {}
        self._rebuild(_HSLOTS0)

    def _rebuild(self, nslots: int) -> None:
        n = len(self.strings)
        # Each string starts on an 8-byte boundary, so the kernels compare it word by word.
        padded = [v + b"\0" * (-len(v) % 8) for v in self.strings]
        data = b"".join(padded) + b"\0" * 8
        self.words = np.frombuffer(data, np.uint64).copy()  # writable: one numba type
        self.tab = np.zeros((4, max(1, n)), np.int64)  # start word, length, rank, code of rank
        self.w2 = np.zeros((2, max(1, n)), np.uint64)  # first and last 8 bytes
        self.slots = np.full(nslots, -1, np.int32)
        start = 0
        for code, v in enumerate(self.strings):
            b = np.frombuffer(v, np.uint8)
            first, last = _str_key(b, 0, len(v))
            self.tab[0, code] = start // 8
            self.tab[1, code] = len(v)
            self.w2[0, code] = first
            self.w2[1, code] = last
            _dev_insert(first, last, len(v), self.slots, code)
            start += len(padded[code])
        for r, code in enumerate(sorted(range(n), key=self.strings.__getitem__)):
            self.tab[2, code] = r
            self.tab[3, r] = code

    def add(self, values: list[bytes]) -> None:
        new = [v for v in dict.fromkeys(values) if v not in self.index]
        for v in new:
            self.index[v] = len(self.strings)
            self.strings.append(v)
        nslots = len(self.slots)
        while 2 * len(self.strings) > nslots:
            nslots *= 2
        self._rebuild(nslots)

    def array(self) -> pa.Array:
        return pa.array([s.decode() for s in self.strings], pa.string())


# ================================================================================ top-level scan


@njit(cache=True, _nrt=False)
def _scan_top(buf, pos, stop, end, ent, names, state, steps, ids, scrap):
    """Walk top-level fields from ``pos`` until ``stop`` (or a full output array); returns the new pos.

    ent[k] = (key, node start, node end, name start, name end); names gets the name bytes;
    state = [n entries, n name bytes, n steps, n ids, has_trace, miss_accelerator_stream];
    ids[k] = (key, value start, value end).
    """
    while pos < stop:
        if state[0] >= len(ent) or state[3] >= len(ids):
            return pos  # full: the caller grows the arrays and calls again
        f, wt, p = _tag(buf, pos, end)
        if p < 0:
            return p
        if f == 1:
            if wt != 2:
                return _E_MISMATCH
            s, e = _len(buf, p, end)
            if s < 0:
                return s
            key = np.int64(0)
            ns = e
            ne = e
            seen = False
            dropped = False
            q = s
            while q < e:
                g, w, q = _tag(buf, q, e)
                if q < 0:
                    return q
                if g == 1:
                    if w != 0:
                        return _E_MISMATCH
                    key, q = _varint(buf, q, e)
                elif g == 2:
                    if w != 2:
                        return _E_MISMATCH
                    if seen:
                        return _E_UNUSUAL
                    seen = True
                    ns, ne = _len(buf, q, e)
                    if ns < 0:
                        return ns
                    q = ne
                else:
                    q = _skip(buf, q, e, w, g)
                    dropped = True  # not a map entry for protobuf (see _entry)
                if q < 0:
                    return q
            if dropped:  # not a map entry for protobuf, but it still parses the node
                st = _count_node(buf, ns, ne, scrap)[0] if ne > ns else 0
                if st < 0:
                    return st
                pos = e
                continue
            # The name: the first name field of the node (the count kernel checks it is the only one).
            nm_s = -1
            nm_e = -1
            q = ns
            while q < ne:
                g, w, q = _tag(buf, q, ne)
                if q < 0:
                    return q
                if g == 1:
                    if w != 2:
                        return _E_MISMATCH
                    nm_s, nm_e = _len(buf, q, ne)
                    if nm_s < 0:
                        return nm_s
                    break
                q = _skip(buf, q, ne, w, g)
                if q < 0:
                    return q
            k = state[0]
            ent[k, 0] = key
            ent[k, 1] = ns
            ent[k, 2] = ne
            ent[k, 3] = nm_s
            ent[k, 4] = state[1]
            if nm_s >= 0:
                nb = nm_e - nm_s
                if state[1] + nb > len(names):
                    return pos  # grow names and come back to this entry
                for x in range(nb):  # (loops, not slices: slice assignment costs seconds of compile)
                    names[state[1] + x] = buf[nm_s + x]
                state[1] += nb
            state[0] = k + 1
            pos = e
        elif f == 2 or f == 5:
            if wt != 0:
                return _E_MISMATCH
            v, p = _varint(buf, p, end)
            if p < 0:
                return p
            state[4 if f == 2 else 5] = 1 if v != 0 else 0
            pos = p
        elif f == 3:
            if wt == 0:
                if state[2] >= len(steps):
                    return pos
                v, p = _varint(buf, p, end)
                if p < 0:
                    return p
                steps[state[2]] = v
                state[2] += 1
                pos = p
            elif wt == 2:
                s, e = _len(buf, p, end)
                if s < 0:
                    return s
                n = _count_packed(buf, s, e)
                if n < 0:
                    return n
                if state[2] + n > len(steps):
                    return pos
                q = s
                while q < e:
                    v, q = _varint(buf, q, e)
                    steps[state[2]] = v
                    state[2] += 1
                pos = e
            else:
                return _E_MISMATCH
        elif f == 4:
            if wt != 2:
                return _E_MISMATCH
            s, e = _len(buf, p, end)
            if s < 0:
                return s
            key = np.int64(0)
            vs = e
            ve = e
            dropped = False
            q = s
            while q < e:
                g, w, q = _tag(buf, q, e)
                if q < 0:
                    return q
                if g == 1:
                    if w != 0:
                        return _E_MISMATCH
                    key, q = _varint(buf, q, e)
                elif g == 2:
                    if w != 2:
                        return _E_MISMATCH
                    vs, ve = _len(buf, q, e)
                    if vs < 0:
                        return vs
                    q = ve
                else:
                    q = _skip(buf, q, e, w, g)
                    dropped = True
                if q < 0:
                    return q
            if dropped:
                if ve > vs and not _utf8_ok(buf, vs, ve):
                    return _E_UTF8
                pos = e
                continue
            k = state[3]
            ids[k, 0] = key
            ids[k, 1] = vs
            ids[k, 2] = ve
            state[3] = k + 1
            pos = e
        else:
            pos = _skip(buf, p, end, wt, f)
            if pos < 0:
                return pos
    return pos


@njit(cache=True)
def _gather(buf, starts, ends):
    """Concatenate ``buf[starts[i]:ends[i]]``; returns (data, int32 offsets)."""
    n = len(starts)
    offs = np.zeros(n + 1, np.int32)
    total = 0
    for i in range(n):
        total += ends[i] - starts[i]
        offs[i + 1] = total
    data = np.empty(max(total, 1), np.uint8)
    for i in range(n):
        o = offs[i]
        s = starts[i]
        for k in range(ends[i] - s):
            data[o + k] = buf[s + k]
    return data, offs


# ================================================================================ count kernel


@njit(cache=True, _nrt=False)
def _entry(buf, s, e, key_wt, val_wt):
    """A map entry: (key, key start, key end, value, value start, value end, status).

    Varint parts come back as values, length-delimited parts as ranges (empty at ``e`` when
    absent). A repeated key or scalar value keeps the last; a repeated message value would
    have to be merged, which this decoder leaves to the reference (status ``_E_UNUSUAL``).
    Status ``_DROP``: the entry has a field other than key and value, and protobuf then keeps
    it as an unknown field of the parent instead of a map entry, so it is not one.
    """
    key = np.int64(0)
    ks = e
    ke = e
    val = np.int64(0)
    vs = e
    ve = e
    seen = False
    dropped = False
    pos = s
    while pos < e:
        f, wt, pos = _tag(buf, pos, e)
        if pos < 0:
            return key, ks, ke, val, vs, ve, pos
        if f == 1:
            if wt != key_wt:
                return key, ks, ke, val, vs, ve, _E_MISMATCH
            if wt == 0:
                key, pos = _varint(buf, pos, e)
            else:
                ks, ke = _len(buf, pos, e)
                pos = ke if ks >= 0 else ks
        elif f == 2:
            if wt != val_wt:
                return key, ks, ke, val, vs, ve, _E_MISMATCH
            if wt == 0:
                val, pos = _varint(buf, pos, e)
            else:
                if seen:
                    return key, ks, ke, val, vs, ve, _E_UNUSUAL
                seen = True
                vs, ve = _len(buf, pos, e)
                pos = ve if vs >= 0 else vs
        else:
            pos = _skip(buf, pos, e, wt, f)
            dropped = True
        if pos < 0:
            return key, ks, ke, val, vs, ve, pos
    if dropped:
        # Protobuf still parses the entry, so a string key must be valid UTF-8.
        if ke > ks and not _utf8_ok(buf, ks, ke):
            return key, ks, ke, val, vs, ve, _E_UTF8
        return key, ks, ke, val, vs, ve, _DROP
    return key, ks, ke, val, vs, ve, 0


@njit(cache=True, _nrt=False, inline="always")
def _entry_fast(buf, s, e, key_wt, val_wt):
    """``_entry`` with the layout every writer uses (key, then a length-delimited value, once
    each) decoded in line; anything else goes to ``_entry``. Inlined where entries are hot."""
    if e - s >= 4 and val_wt == 2:
        if key_wt == 0 and buf[s] == 0x08:
            key, p = _varint(buf, s + 1, e)
            if p > 0 and p < e and buf[p] == 0x12:
                vs, ve = _len(buf, p + 1, e)
                if vs >= 0 and ve == e:
                    return key, e, e, np.int64(0), vs, ve, 0
        elif key_wt == 2 and buf[s] == 0x0A:
            ks, ke = _len(buf, s + 1, e)
            if ks >= 0 and ke < e and buf[ke] == 0x12:
                vs, ve = _len(buf, ke + 1, e)
                if vs >= 0 and ve == e:
                    return np.int64(0), ks, ke, np.int64(0), vs, ve, 0
    return _entry(buf, s, e, key_wt, val_wt)


@njit(cache=True, _nrt=False)
def _check_varints(buf, s, e, maxf):
    """Validate a message whose fields 1..maxf are all varints (others skipped)."""
    pos = s
    while pos < e:
        f, wt, pos = _tag(buf, pos, e)
        if pos < 0:
            return pos
        if f <= maxf and wt != 0:
            return _E_MISMATCH
        pos = _skip(buf, pos, e, wt, f)
        if pos < 0:
            return pos
    return 0


@njit(cache=True, _nrt=False)
def _tuple_len(buf, s, e):
    """Number of int64_values in a Tuple (packed or not); < 0 when damaged."""
    n = 0
    pos = s
    while pos < e:
        f, wt, pos = _tag(buf, pos, e)
        if pos < 0:
            return pos
        if f == 1:
            if wt == 0:
                _, pos = _varint(buf, pos, e)
                n += 1
            elif wt == 2:
                ps, pe = _len(buf, pos, e)
                if ps < 0:
                    return ps
                k = _count_packed(buf, ps, pe)
                if k < 0:
                    return k
                n += k
                pos = pe
            else:
                return _E_MISMATCH
        else:
            pos = _skip(buf, pos, e, wt, f)
        if pos < 0:
            return pos
    return n


@njit(cache=True, _nrt=False)
def _count_map_of_tuples(buf, s, e):
    """Validate a map<int32, Tuple> entry; returns the Tuple's length."""
    _, _, _, _, vs, ve, st = _entry(buf, s, e, 0, 2)
    if st < 0:
        return st
    n = _tuple_len(buf, vs, ve)
    if st == _DROP and n >= 0:
        return _DROPPED_TUPLE
    return n


@njit(cache=True, _nrt=False)
def _count_exec(buf, s, e, cnt):
    """Validate an ExecProfile and add its rows to ``cnt``."""
    pos = s
    while pos < e:
        f, wt, pos = _tag(buf, pos, e)
        if pos < 0:
            return pos
        if f <= 3:
            if wt != 0:
                return _E_MISMATCH
            pos = _skip(buf, pos, e, 0, f)
        elif f == 4 or f == 5 or f == 6 or f == 7 or f == 11:
            if wt != 2:
                return _E_MISMATCH
            ps, pe = _len(buf, pos, e)
            if ps < 0:
                return ps
            pos = pe
            if f == 4 or f == 5:
                _, ks, ke, _, vs, ve, st = _entry_fast(buf, ps, pe, 2, 2)
                if st < 0:
                    return st
                if st == 0:
                    cnt[C_ACCENT if f == 4 else C_CPUENT] += 1
                q = vs
                while q < ve:  # ExecTime.times
                    g, w, q = _tag(buf, q, ve)
                    if q < 0:
                        return q
                    if g == 1:
                        if w != 2:
                            return _E_MISMATCH
                        ts, te = _len(buf, q, ve)
                        if ts < 0:
                            return ts
                        k = _tuple_len(buf, ts, te)
                        if k < 0:
                            return k
                        if st == 0:
                            cnt[C_EXECS] += 1
                        q = te
                    else:
                        q = _skip(buf, q, ve, w, g)
                        if q < 0:
                            return q
            elif f == 6:
                cnt[C_EXDEV] += 1
            elif f == 7:
                cnt[C_MEM] += 1
                q = ps
                while q < pe:  # ExecMemory
                    g, w, q = _tag(buf, q, pe)
                    if q < 0:
                        return q
                    if g <= 10:
                        if w != 0:
                            return _E_MISMATCH
                        q = _skip(buf, q, pe, 0, g)
                    elif g == 11:
                        if w != 2:
                            return _E_MISMATCH
                        ms, me = _len(buf, q, pe)
                        if ms < 0:
                            return ms
                        _, _, _, _, vs, ve, st = _entry_fast(buf, ms, me, 0, 2)
                        if st < 0:
                            return st
                        st2 = _check_varints(buf, vs, ve, 2)
                        if st2 < 0:
                            return st2
                        if st == 0:
                            cnt[C_OMEM] += 1
                        q = me
                    else:
                        q = _skip(buf, q, pe, w, g)
                    if q < 0:
                        return q
            else:
                st = _check_varints(buf, ps, pe, 2)
                if st < 0:
                    return st
                cnt[C_ALLOC] += 1
        else:
            pos = _skip(buf, pos, e, wt, f)
        if pos < 0:
            return pos
    return 0


@njit(cache=True, _nrt=False)
def _count_trace(buf, s, e, cnt):
    """Validate a CodeDef and count its frames."""
    pos = s
    while pos < e:
        f, wt, pos = _tag(buf, pos, e)
        if pos < 0:
            return pos
        if f == 1:
            if wt != 2:
                return _E_MISMATCH
            ts, te = _len(buf, pos, e)
            if ts < 0:
                return ts
            q = ts
            while q < te:
                g, w, q = _tag(buf, q, te)
                if q < 0:
                    return q
                if (g == 1 or g == 3 or g == 4) and w != 2:
                    return _E_MISMATCH
                if (g == 2 or g >= 5 and g <= 8) and w != 0:
                    return _E_MISMATCH
                if g == 1 or g == 3 or g == 4:
                    a, b = _len(buf, q, te)
                    if a >= 0:
                        cnt[C_STRB] += b - a
                q = _skip(buf, q, te, w, g)
                if q < 0:
                    return q
            cnt[C_FRAMES] += 1
            pos = te
        else:
            pos = _skip(buf, pos, e, wt, f)
            if pos < 0:
                return pos
    return 0


@njit(cache=True, _nrt=False)
def _count_node(buf, s, e, cnt):
    """Validate one ProfileNode and count its rows; returns (status, last name start, name length, id)."""
    pos = s
    name_s = -1
    name_n = 0
    nid = np.int64(0)
    while pos < e:
        f, wt, pos = _tag(buf, pos, e)
        if pos < 0:
            return pos, name_s, name_n, nid
        if f == 8 or f == 13:
            if wt != 0:
                return _E_MISMATCH, name_s, name_n, nid
            v, pos = _varint(buf, pos, e)
            if f == 13:
                nid = v
            continue
        if f == 4:
            if wt == 0:
                _, pos = _varint(buf, pos, e)
                cnt[C_SHAPE] += 1
                continue
            if wt != 2:
                return _E_MISMATCH, name_s, name_n, nid
            ps, pe = _len(buf, pos, e)
            if ps < 0:
                return ps, name_s, name_n, nid
            k = _count_packed(buf, ps, pe)
            if k < 0:
                return k, name_s, name_n, nid
            cnt[C_SHAPE] += k
            pos = pe
            continue
        if f > 16:
            pos = _skip(buf, pos, e, wt, f)
            if pos < 0:
                return pos, name_s, name_n, nid
            continue
        if wt != 2:
            return _E_MISMATCH, name_s, name_n, nid
        ps, pe = _len(buf, pos, e)
        if ps < 0:
            return ps, name_s, name_n, nid
        pos = pe
        st = 0
        if f == 1:
            name_s = ps
            name_n = pe - ps
        elif f == 5 or f == 9:
            cnt[C_STRB] += pe - ps
        elif f == 2 or f == 3 or f == 14:
            _, _, _, _, _, _, st = _entry(buf, ps, pe, 0, 0)
            if f == 2 and st == 0:
                cnt[C_INPUTS] += 1
            elif f == 14 and st == 0:
                cnt[C_SRC] += 1
        if f == 5:
            cnt[C_TYPES] += 1
        elif f == 10:
            st = _count_trace(buf, ps, pe, cnt)
        elif f == 11:
            _, ks, ke, _, vs, ve, st = _entry(buf, ps, pe, 2, 2)
            if st == 0:
                cnt[C_ATTRS] += 1
                cnt[C_STRB] += ke - ks + ve - vs
        elif f == 12:
            _, _, _, _, vs, ve, st = _entry_fast(buf, ps, pe, 0, 2)
            if st == 0:
                st = _count_exec(buf, vs, ve, cnt)
                cnt[C_STEPS] += 1
            elif st == _DROP:
                st = _count_exec(buf, vs, ve, cnt[_NCOUNT:])  # validated, not counted
        elif f == 15 or f == 16:
            k = _count_map_of_tuples(buf, ps, pe)
            if k == _DROPPED_TUPLE:
                pass
            elif k < 0:
                st = k
            elif f == 15:
                cnt[C_OSH] += 1
                cnt[C_ODIMS] += k
        if st < 0:
            return st, name_s, name_n, nid
    return 0, name_s, name_n, nid



@njit(cache=True, nogil=True, _nrt=False)
def _count_kernel(buf, idx, node_s, node_e, keys, counts, err, errpos, name_pos):
    for j in range(len(idx)):
        i = idx[j]
        st, nm_s, nm_n, nid = _count_node(buf, node_s[i], node_e[i], counts[i])
        name_pos[i] = nm_s
        if st < 0:
            err[i] = st
            errpos[i] = node_s[i]
        elif nm_s < 0 or nm_n == 0:
            err[i] = _E_NONAME
        elif nid != keys[i]:
            err[i] = _E_ID


# ================================================================================ attr values

# Field kinds of the canonical-encoding check (see _canonical).
(K_NONE, K_I64, K_I32, K_BOOL, K_BYTES, K_STR, K_MSG, K_O_I64, K_O_I32, K_O_BOOL, K_O_F32, K_O_BYTES, K_O_STR,
 K_O_MSG, K_R_MSG, K_R_BYTES, K_P_I64, K_P_I32, K_P_U32, K_P_BOOL, K_P_F32, K_P_F64) = range(22)
(M_ATTR, M_LIST, M_SHAPE, M_DIM, M_TENSOR, M_HANDLE, M_DTS, M_VARIANT) = range(8)


def _attr_spec() -> tuple[np.ndarray, np.ndarray]:
    """Field kind and sub-message of AttrValue and everything it embeds (attr_value.proto & co).

    Fields missing here (NameAttrList, whose map order is up to the writer) are K_NONE: such an
    attr is re-serialized through protobuf.
    """
    kind = np.zeros((8, 20), np.int64)
    sub = np.zeros((8, 20), np.int64)

    def put(m, f, k, s=0):
        kind[m, f] = k
        sub[m, f] = s

    for f, k, s in ((1, K_O_MSG, M_LIST), (2, K_O_BYTES, 0), (3, K_O_I64, 0), (4, K_O_F32, 0), (5, K_O_BOOL, 0),
                    (6, K_O_I32, 0), (7, K_O_MSG, M_SHAPE), (8, K_O_MSG, M_TENSOR), (9, K_O_STR, 0)):
        put(M_ATTR, f, k, s)
    for f, k, s in ((2, K_R_BYTES, 0), (3, K_P_I64, 0), (4, K_P_F32, 0), (5, K_P_BOOL, 0), (6, K_P_I32, 0),
                    (7, K_R_MSG, M_SHAPE), (8, K_R_MSG, M_TENSOR)):
        put(M_LIST, f, k, s)
    put(M_SHAPE, 2, K_R_MSG, M_DIM)
    put(M_SHAPE, 3, K_BOOL)
    put(M_DIM, 1, K_I64)
    put(M_DIM, 2, K_STR)
    for f, k, s in ((1, K_I32, 0), (2, K_MSG, M_SHAPE), (3, K_I32, 0), (4, K_BYTES, 0), (5, K_P_F32, 0),
                    (6, K_P_F64, 0), (7, K_P_I32, 0), (8, K_R_BYTES, 0), (9, K_P_F32, 0), (10, K_P_I64, 0),
                    (11, K_P_BOOL, 0), (12, K_P_F64, 0), (13, K_P_I32, 0), (14, K_R_MSG, M_HANDLE),
                    (15, K_R_MSG, M_VARIANT), (16, K_P_U32, 0), (17, K_P_I64, 0), (18, K_BYTES, 0)):
        put(M_TENSOR, f, k, s)
    for f, k, s in ((1, K_STR, 0), (2, K_STR, 0), (3, K_STR, 0), (4, K_I64, 0), (5, K_STR, 0), (6, K_R_MSG, M_DTS)):
        put(M_HANDLE, f, k, s)
    put(M_DTS, 1, K_I32)
    put(M_DTS, 2, K_MSG, M_SHAPE)
    put(M_VARIANT, 1, K_STR)
    put(M_VARIANT, 2, K_BYTES)
    put(M_VARIANT, 3, K_R_MSG, M_TENSOR)
    return kind, sub


_SPEC_KIND, _SPEC_SUB = _attr_spec()


@njit(cache=True, _nrt=False)
def _minimal_varint(buf, s, e):
    """(value, new pos, canonical): canonical when no trailing zero groups pad it."""
    v, p = _varint(buf, s, e)
    if p < 0:
        return v, p, False
    n = p - s
    # No trailing zero groups; a 10th byte can only carry bit 63 (protobuf drops the rest).
    return v, p, (n == 1 or buf[p - 1] != 0) and (n < 10 or buf[p - 1] == 1)


@njit(cache=True, _nrt=False)
def _is_int32(v):
    return -2147483648 <= v <= 2147483647


@njit(cache=True, _nrt=False)
def _canonical(buf, s, e, kind, sub, stack):
    """True when ``buf[s:e]`` is an AttrValue exactly as protobuf's deterministic serializer writes it.

    That is: fields in ascending number order, no unknown fields, proto3 scalars only when not
    zero, oneof members at most once, repeated numbers packed (and never empty), minimal varints,
    int32 values sign-extended, bools 0/1, strings valid UTF-8, no maps. Then the raw slice equals
    ``AttrValue.FromString(slice).SerializeToString(deterministic=True)``.
    """
    depth = 0
    msg = M_ATTR
    last = 0
    oneof = False
    end = e
    pos = s
    while True:
        if pos == end:
            if depth == 0:
                return True
            depth -= 1
            end = stack[depth, 0]
            msg = stack[depth, 1]
            last = stack[depth, 2]
            oneof = stack[depth, 3] != 0
            continue
        t, p, ok = _minimal_varint(buf, pos, end)
        if p < 0 or not ok or t >> 32:
            return False
        f = t >> 3
        wt = t & 7
        if f <= 0 or f >= 20:
            return False
        k = kind[msg, f]
        if k == K_NONE or f < last:
            return False
        if f == last and k != K_R_MSG and k != K_R_BYTES:
            return False
        last = f
        if k >= K_O_I64 and k <= K_O_MSG:
            if oneof:
                return False
            oneof = True
        if k == K_I64 or k == K_I32 or k == K_BOOL or k == K_O_I64 or k == K_O_I32 or k == K_O_BOOL:
            if wt != 0:
                return False
            v, p, ok = _minimal_varint(buf, p, end)
            if p < 0 or not ok:
                return False
            if (k == K_I64 or k == K_I32) and v == 0:
                return False
            if (k == K_I32 or k == K_O_I32) and not _is_int32(v):
                return False
            if (k == K_BOOL and v != 1) or (k == K_O_BOOL and v != 0 and v != 1):
                return False
            pos = p
            continue
        if k == K_O_F32:
            if wt != 5 or end - p < 4:
                return False
            pos = p + 4
            continue
        if wt != 2:
            return False
        n, ps, ok = _minimal_varint(buf, p, end)
        if ps < 0 or not ok or n < 0 or n > end - ps:
            return False
        pe = ps + n
        if k == K_MSG or k == K_O_MSG or k == K_R_MSG:
            if depth >= stack.shape[0]:
                return False
            stack[depth, 0] = end
            stack[depth, 1] = msg
            stack[depth, 2] = last
            stack[depth, 3] = 1 if oneof else 0
            depth += 1
            msg = sub[msg, f]
            last = 0
            oneof = False
            end = pe
            pos = ps
            continue
        pos = pe
        if k == K_BYTES or k == K_STR:
            if pe == ps:
                return False
        if k == K_STR or k == K_O_STR:
            if not _utf8_ok(buf, ps, pe):
                return False
        elif k == K_P_F32 or k == K_P_F64:
            w = 4 if k == K_P_F32 else 8
            if pe == ps or (pe - ps) % w:
                return False
        elif k == K_P_I64 or k == K_P_I32 or k == K_P_U32 or k == K_P_BOOL:
            if pe == ps:
                return False
            q = ps
            while q < pe:
                v, q, ok = _minimal_varint(buf, q, pe)
                if q < 0 or not ok:
                    return False
                if k == K_P_I32 and not _is_int32(v):
                    return False
                if k == K_P_U32 and (v < 0 or v > 0xFFFFFFFF):
                    return False
                if k == K_P_BOOL and v != 0 and v != 1:
                    return False


# ================================================================================ fill kernel

_E_CHANGED = -6  # counts and contents disagree: the file changed while it was read

# Rows of the fill kernel's scratch array.
(S_IN_IDX, S_IN_PID, S_SRC_PID, S_SRC_SLOT, S_OSH_K, S_OSH_S, S_OSH_E, S_AT_KS, S_AT_KE, S_AT_VS, S_AT_VE, S_EX_K,
 S_EX_S, S_EX_E, S_ACC_C, S_ACC_S, S_ACC_E, S_CPU_C, S_CPU_S, S_CPU_E, S_DV, S_OM_K, S_OM_S, S_OM_E, S_ORD_A,
 S_TMP_A, S_ORD_B, S_TMP_B, S_STR_S, S_STR_E, S_STR_ID) = range(31)
_NSCR = 31
_WIRE_PROBLEMS[_E_CHANGED] = "it changed while it was being read"


@njit(cache=True, _nrt=False)
def _argsort_stable(keys, n, order, tmp):
    """Stable argsort of ``keys[:n]`` into ``order`` (``tmp`` is scratch): insertion sort of short
    runs, then bottom-up merges. No allocation: this runs for every exec record."""
    for x in range(n):
        order[x] = x
    run = 16
    for lo in range(0, n, run):
        hi = min(lo + run, n)
        for x in range(lo + 1, hi):
            v = order[x]
            y = x
            while y > lo and keys[order[y - 1]] > keys[v]:
                order[y] = order[y - 1]
                y -= 1
            order[y] = v
    width = run
    swapped = False
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a = lo
            b = mid
            for x in range(lo, hi):
                if a < mid and (b >= hi or keys[order[b]] >= keys[order[a]]):
                    tmp[x] = order[a]
                    a += 1
                else:
                    tmp[x] = order[b]
                    b += 1
        order, tmp = tmp, order
        swapped = not swapped
        width *= 2
    if swapped:  # the result is in the caller's tmp: copy it back
        for x in range(n):
            tmp[x] = order[x]


@njit(cache=True, _nrt=False)
def _keep_last_sorted(keys, n, order, tmp):
    """Positions 0..n-1 in stable key order, keeping only the last of equal keys (protobuf map
    semantics), in ``order[:m]``; returns m."""
    if n <= 1:
        order[0] = 0
        return n
    ascending = True
    lo = keys[0]
    hi = keys[0]
    for j in range(1, n):
        k = keys[j]
        if k <= keys[j - 1]:
            ascending = False
        lo = min(lo, k)
        hi = max(hi, k)
    if ascending:
        for j in range(n):
            order[j] = j
        return n
    if hi - lo < len(tmp) and hi - lo <= 4 * n:
        # Dense keys (steps 0..49, slots, input indexes): one pass through a direct-address table;
        # a later entry of the same key overwrites an earlier one, which is what a map does.
        span = hi - lo + 1
        for j in range(span):
            tmp[j] = -1
        for j in range(n):
            tmp[keys[j] - lo] = j
        m = 0
        for j in range(span):
            if tmp[j] >= 0:
                order[m] = tmp[j]
                m += 1
        return m
    _argsort_stable(keys, n, order, tmp)
    m = 0
    for j in range(n):
        if j + 1 < n and keys[order[j + 1]] == keys[order[j]]:
            continue
        order[m] = order[j]
        m += 1
    return m


@njit(cache=True, _nrt=False)
def _tuple2(buf, s, e):
    """The first two int64_values of a Tuple (0 when missing)."""
    v0 = np.int64(0)
    v1 = np.int64(0)
    n = 0
    pos = s
    while pos < e and n < 2:
        f, wt, pos = _tag(buf, pos, e)
        if pos < 0:
            break
        if f == 1 and wt == 0:
            v, pos = _varint(buf, pos, e)
            if n == 0:
                v0 = v
            else:
                v1 = v
            n += 1
        elif f == 1 and wt == 2:
            ps, pe = _len(buf, pos, e)
            if ps < 0:
                break
            q = ps
            while q < pe and n < 2:
                v, q = _varint(buf, q, pe)
                if q < 0:
                    break
                if n == 0:
                    v0 = v
                else:
                    v1 = v
                n += 1
            pos = pe
        else:
            pos = _skip(buf, pos, e, wt, f)
        if pos < 0:
            break
    return v0, v1


@njit(cache=True, _nrt=False)
def _tuple_values(buf, s, e, out, o, limit):
    """Write a Tuple's int64_values to ``out[o:]`` (at most up to ``limit``); returns how many."""
    n = 0
    pos = s
    while pos < e:
        f, wt, pos = _tag(buf, pos, e)
        if pos < 0:
            return n
        if f == 1 and wt == 0:
            v, pos = _varint(buf, pos, e)
            if pos < 0 or o + n >= limit:
                return n
            out[o + n] = v
            n += 1
        elif f == 1 and wt == 2:
            ps, pe = _len(buf, pos, e)
            if ps < 0:
                return n
            q = ps
            while q < pe:
                v, q = _varint(buf, q, pe)
                if q < 0 or o + n >= limit:
                    return n
                out[o + n] = v
                n += 1
            pos = pe
        else:
            pos = _skip(buf, pos, e, wt, f)
            if pos < 0:
                return n
    return n


@njit(cache=True, _nrt=False, inline="always")
def _device(buf, s, e, dev, miss, i):
    """Device code of ``buf[s:e]``; records the first string that is not interned yet."""
    dev_words, dev_tab, dev_w2, slots, bw = dev
    c = _dev_lookup(buf, bw, s, e - s, dev_words, dev_tab, dev_w2, slots)
    if c < 0:
        if miss[i, 0] == 0:
            miss[i, 0] = 1
            miss[i, 1] = s
            miss[i, 2] = e
        return 0
    return c


@njit(cache=True, _nrt=False, inline="always")
def _fill_exec(buf, s, e, nid, step, i, dev, scr, rows, lim, out, miss):
    """Decode one ExecProfile into the node_steps, exec_devices, execs, memory, output_memory and
    allocations rows at ``rows`` (advanced in place)."""
    acc_c, acc_s, acc_e, cpu_c, cpu_s, cpu_e = scr[S_ACC_C], scr[S_ACC_S], scr[S_ACC_E], scr[S_CPU_C], scr[S_CPU_S], \
        scr[S_CPU_E]
    dv, om_k, om_s, om_e, sort_a, sort_b = scr[S_DV], scr[S_OM_K], scr[S_OM_S], scr[S_OM_E], scr[S_ORD_B], scr[S_TMP_B]
    o_steps, o_exdev, o_execs, o_mem, o_omem, o_alloc = out
    rank = dev[1][2]
    run_count = np.int64(0)
    t0 = np.int64(0)
    t1 = np.int64(0)
    na = 0
    nc = 0
    nd = 0
    nmem = 0
    pos = s
    while pos < e:
        f, wt, pos = _tag_fast(buf, pos, e)
        if pos < 0:
            return _E_CHANGED
        if f <= 3 and wt == 0:
            v, pos = _varint_fast(buf, pos, e)
            if f == 1:
                run_count = v
            elif f == 2:
                t0 = v
            else:
                t1 = v
            continue
        if wt != 2 or f > 11:
            pos = _skip(buf, pos, e, wt, f)
            if pos < 0:
                return _E_CHANGED
            continue
        ps, pe = _len_fast(buf, pos, e)
        if ps < 0:
            return _E_CHANGED
        pos = pe
        if f == 4 or f == 5:
            _, ks, ke, _, vs, ve, st = _entry_fast(buf, ps, pe, 2, 2)
            if st < 0:
                return _E_CHANGED
            if st == _DROP:
                continue
            c = _device(buf, ks, ke, dev, miss, i)
            if f == 4:
                if na >= len(acc_c):
                    return _E_CHANGED
                acc_c[na] = rank[c]
                acc_s[na] = vs
                acc_e[na] = ve
                na += 1
            else:
                if nc >= len(cpu_c):
                    return _E_CHANGED
                cpu_c[nc] = rank[c]
                cpu_s[nc] = vs
                cpu_e[nc] = ve
                nc += 1
        elif f == 6:
            if nd >= len(dv):
                return _E_CHANGED
            dv[nd] = (_device(buf, ps, pe, dev, miss, i) << 32) | nd
            nd += 1
        elif f == 7:
            r = rows[C_MEM]
            if r >= lim[C_MEM]:
                return _E_CHANGED
            seq = nmem
            nmem += 1
            o_mem[0, r] = nid
            o_mem[1, r] = step
            o_mem[2, r] = seq
            for c in range(3, 13):
                o_mem[c, r] = 0
            nom = 0
            q = ps
            while q < pe:
                g, w, q = _tag_fast(buf, q, pe)
                if q < 0:
                    return _E_CHANGED
                if g <= 10 and w == 0:
                    v, q = _varint_fast(buf, q, pe)
                    o_mem[2 + g, r] = v
                elif g == 11 and w == 2:
                    ms, me = _len_fast(buf, q, pe)
                    if ms < 0:
                        return _E_CHANGED
                    k, _, _, _, vs, ve, st = _entry_fast(buf, ms, me, 0, 2)
                    q = me
                    if st == _DROP:
                        continue
                    if nom >= len(om_k):
                        return _E_CHANGED
                    om_k[nom] = np.int64(np.int32(k))
                    om_s[nom] = vs
                    om_e[nom] = ve
                    nom += 1
                    q = me
                else:
                    q = _skip(buf, q, pe, w, g)
                    if q < 0:
                        return _E_CHANGED
            rows[C_MEM] = r + 1
            if nom <= 1:  # the usual case, without a call
                m = nom
                sort_a[0] = 0
            else:
                m = _keep_last_sorted(om_k, nom, sort_a, sort_b)
            order = sort_a
            for x in range(m):
                y = order[x]
                ro = rows[C_OMEM]
                if ro >= lim[C_OMEM]:
                    return _E_CHANGED
                b = np.int64(0)
                ptr = np.int64(0)
                q = om_s[y]
                qe = om_e[y]
                while q < qe:
                    g, w, q = _tag_fast(buf, q, qe)
                    if q < 0:
                        return _E_CHANGED
                    if g <= 2 and w == 0:
                        v, q = _varint_fast(buf, q, qe)
                        if g == 1:
                            b = v
                        else:
                            ptr = v
                    else:
                        q = _skip(buf, q, qe, w, g)
                        if q < 0:
                            return _E_CHANGED
                o_omem[0, ro] = nid
                o_omem[1, ro] = step
                o_omem[2, ro] = seq
                o_omem[3, ro] = om_k[y]
                o_omem[4, ro] = b
                o_omem[5, ro] = ptr
                rows[C_OMEM] = ro + 1
        elif f == 11:
            r = rows[C_ALLOC]
            if r >= lim[C_ALLOC]:
                return _E_CHANGED
            o_alloc[0, r] = nid
            o_alloc[1, r] = step
            o_alloc[2, r] = 0
            o_alloc[3, r] = 0
            q = ps
            while q < pe:
                g, w, q = _tag_fast(buf, q, pe)
                if q < 0:
                    return _E_CHANGED
                if g <= 2 and w == 0:
                    v, q = _varint_fast(buf, q, pe)
                    o_alloc[1 + g, r] = v
                else:
                    q = _skip(buf, q, pe, w, g)
                    if q < 0:
                        return _E_CHANGED
            rows[C_ALLOC] = r + 1
    r = rows[C_STEPS]
    if r >= lim[C_STEPS]:
        return _E_CHANGED
    o_steps[0, r] = nid
    o_steps[1, r] = step
    o_steps[2, r] = run_count
    o_steps[3, r] = t0
    o_steps[4, r] = t1
    rows[C_STEPS] = r + 1
    # exec_devices: sorted by device (stable), duplicates kept
    for x in range(1, nd):
        y = x
        while y > 0 and rank[dv[y] >> 32] < rank[dv[y - 1] >> 32]:
            tmp = dv[y]
            dv[y] = dv[y - 1]
            dv[y - 1] = tmp
            y -= 1
    for x in range(nd):
        r = rows[C_EXDEV]
        if r >= lim[C_EXDEV]:
            return _E_CHANGED
        o_exdev[0, r] = nid
        o_exdev[1, r] = step
        o_exdev[2, r] = dv[x] >> 32
        o_exdev[3, r] = dv[x] & 0xFFFFFFFF  # position in the file, for the reference's dictionary order
        rows[C_EXDEV] = r + 1
    # execs: accelerator then cpu, each by device, each map keeping its last entry per device
    for kind in range(2):
        keys = acc_c if kind == 0 else cpu_c
        ss = acc_s if kind == 0 else cpu_s
        ee = acc_e if kind == 0 else cpu_e
        n = na if kind == 0 else nc
        if n <= 1:  # the usual case, without a call
            m = n
            sort_a[0] = 0
        else:
            m = _keep_last_sorted(keys, n, sort_a, sort_b)
        order = sort_a
        for x in range(m):
            y = order[x]
            code = dev[1][3, keys[y]]  # rank -> code
            q = ss[y]
            qe = ee[y]
            while q < qe:
                g, w, q = _tag_fast(buf, q, qe)
                if q < 0:
                    return _E_CHANGED
                if g == 1 and w == 2:
                    ts, te = _len_fast(buf, q, qe)
                    if ts < 0:
                        return _E_CHANGED
                    # Fast path for the usual [start, duration] packed in one field.
                    if te - ts >= 4 and buf[ts] == 0x0A and buf[ts + 1] < 0x80 and ts + 2 + buf[ts + 1] == te:
                        v0, q2 = _varint_fast(buf, ts + 2, te)
                        v1, q3 = _varint_fast(buf, q2, te) if q2 > 0 and q2 < te else (np.int64(0), q2)
                        if q2 < 0 or q3 != te:
                            v0, v1 = _tuple2(buf, ts, te)
                    else:
                        v0, v1 = _tuple2(buf, ts, te)
                    r = rows[C_EXECS]
                    if r >= lim[C_EXECS]:
                        return _E_CHANGED
                    o_execs[0, r] = nid
                    o_execs[1, r] = step
                    o_execs[2, r] = code
                    o_execs[3, r] = kind
                    o_execs[4, r] = v0
                    o_execs[5, r] = v1
                    rows[C_EXECS] = r + 1
                    q = te
                else:
                    q = _skip(buf, q, qe, w, g)
                    if q < 0:
                        return _E_CHANGED
    return 0


@njit(cache=True, _nrt=False)
def _copy_str(buf, s, e, sbuf, rows, lim):
    """Copy ``buf[s:e]`` to the batch's string buffer; returns its offset there (< 0: no room)."""
    r = rows[C_STRB]
    n = e - s
    if n < 0 or r + n > lim[C_STRB]:
        return _E_CHANGED
    for k in range(n):
        sbuf[r + k] = buf[s + k]
    rows[C_STRB] = r + n
    return r


@njit(cache=True, _nrt=False)
def _attr_order(buf, ks, ke, n, order):
    """Attr entries ordered by key bytes (stable), keeping the last of equal keys, in ``order[:m]``;
    returns m."""
    for x in range(n):
        order[x] = x
    for x in range(1, n):
        y = x
        while y > 0 and _bytes_lt(buf, ks[order[y]], ke[order[y]] - ks[order[y]],
                                  ks[order[y - 1]], ke[order[y - 1]] - ks[order[y - 1]]):
            tmp = order[y]
            order[y] = order[y - 1]
            order[y - 1] = tmp
            y -= 1
    m = 0
    for x in range(n):
        if x + 1 < n:
            a = order[x]
            b = order[x + 1]
            if ke[a] - ks[a] == ke[b] - ks[b] and _bytes_eq(buf, ks[a], buf, ks[b], ke[a] - ks[a]):
                continue
        order[m] = order[x]
        m += 1
    return m


@njit(cache=True, _nrt=False)
def _code_ref(ids, v):
    """Value code of id ``v`` in id_to_string; the code of "" when the id is unknown."""
    id_keys, id_code, empty_code = ids
    j = np.searchsorted(id_keys, v)
    if j < len(id_keys) and id_keys[j] == v:
        return id_code[j]
    return empty_code


@njit(cache=True, _nrt=False)
def _fill_trace(buf, s, e, nid, ids, rows, lim, o_frames, scr, sbuf):
    pos = s
    while pos < e:
        f, wt, pos = _tag(buf, pos, e)
        if pos < 0:
            return _E_CHANGED
        if f != 1 or wt != 2:
            pos = _skip(buf, pos, e, wt, f)
            if pos < 0:
                return _E_CHANGED
            continue
        ts, te = _len(buf, pos, e)
        if ts < 0:
            return _E_CHANGED
        pos = te
        r = rows[C_FRAMES]
        if r >= lim[C_FRAMES]:
            return _E_CHANGED
        # strings (file, function, line): (start, end) of the inline text, and ids
        str_s = scr[S_STR_S]
        str_e = scr[S_STR_E]
        str_id = scr[S_STR_ID]
        for k in range(3):
            str_s[k] = 0
            str_e[k] = 0
            str_id[k] = 0
        lineno = np.int64(0)
        fsl = np.int64(0)
        q = ts
        while q < te:
            g, w, q = _tag(buf, q, te)
            if q < 0:
                return _E_CHANGED
            if (g == 1 or g == 3 or g == 4) and w == 2:
                a, b = _len(buf, q, te)
                if a < 0:
                    return _E_CHANGED
                k = 0 if g == 1 else (1 if g == 3 else 2)
                str_s[k] = a
                str_e[k] = b
                q = b
            elif (g == 2 or (g >= 5 and g <= 8)) and w == 0:
                v, q = _varint(buf, q, te)
                if g == 2:
                    lineno = np.int64(np.int32(v))
                elif g == 5:
                    fsl = np.int64(np.int32(v))
                else:
                    str_id[g - 6] = v
            else:
                q = _skip(buf, q, te, w, g)
                if q < 0:
                    return _E_CHANGED
        o_frames[0, r] = nid
        o_frames[1, r] = r - rows[C_FRAMES + _NROWT]
        o_frames[2, r] = lineno
        o_frames[3, r] = fsl
        for k in range(3):
            # tfprof: `t.file or id_to_string[t.file_id]` (likewise function, line)
            if str_e[k] > str_s[k]:
                o = _copy_str(buf, str_s[k], str_e[k], sbuf, rows, lim)
                if o < 0:
                    return _E_CHANGED
                o_frames[4 + k, r] = -2
                o_frames[7 + 2 * k, r] = o
                o_frames[8 + 2 * k, r] = o + str_e[k] - str_s[k]
            else:
                o_frames[4 + k, r] = _code_ref(ids, str_id[k])
                o_frames[7 + 2 * k, r] = 0
                o_frames[8 + 2 * k, r] = 0
        rows[C_FRAMES] = r + 1
    return 0


@njit(cache=True, _nrt=False)
def _fill_node(buf, s, e, nid, j, cnt, rows, lim, keys, step_set, ids, dev, spec, scr, out, miss, errv):
    """Decode node ``j`` of the batch (bytes ``buf[s:e]``) into its rows; returns a status."""
    (o_nodes, o_shape, o_inputs, o_types, o_osh, o_odims, o_attrs, o_frames, o_steps, o_exdev, o_execs, o_mem,
     o_omem, o_alloc, sbuf) = out
    n_in = cnt[C_INPUTS]
    in_idx, in_pid, src_pid, src_slot = scr[S_IN_IDX], scr[S_IN_PID], scr[S_SRC_PID], scr[S_SRC_SLOT]
    osh_k, osh_s, osh_e = scr[S_OSH_K], scr[S_OSH_S], scr[S_OSH_E]
    at_ks, at_ke, at_vs, at_ve = scr[S_AT_KS], scr[S_AT_KE], scr[S_AT_VS], scr[S_AT_VE]
    ex_k, ex_s, ex_e = scr[S_EX_K], scr[S_EX_S], scr[S_EX_E]
    sort_a, sort_b = scr[S_ORD_A], scr[S_TMP_A]
    # Touch every cache line of the node front to back first: the exec records are decoded in
    # step order, which the file does not follow (C++ writes maps in hash order), and random
    # reads from memory would each wait for a cache miss; a sequential pass lets the hardware
    # prefetcher stream the node into cache.
    touch = np.uint8(0)
    for p in range(s, e, 64):
        touch ^= buf[p]
    scr[S_STR_ID, 3] = touch
    n_i = n_src = n_osh = n_at = n_ex = 0
    op_s = op_e = cd_s = cd_e = hd_s = hd_e = 0
    float_ops = np.int64(0)
    pos = s
    while pos < e:
        f, wt, pos = _tag_fast(buf, pos, e)
        if pos < 0:
            return _E_CHANGED
        if wt == 0 and (f == 4 or f == 8):
            v, pos = _varint_fast(buf, pos, e)
            if f == 8:
                float_ops = v
            else:
                r = rows[C_SHAPE]
                if r >= lim[C_SHAPE]:
                    return _E_CHANGED
                o_shape[r] = v
                rows[C_SHAPE] = r + 1
            continue
        if wt != 2 or f > 15:
            pos = _skip(buf, pos, e, wt, f)
            if pos < 0:
                return _E_CHANGED
            continue
        ps, pe = _len_fast(buf, pos, e)
        if ps < 0:
            return _E_CHANGED
        pos = pe
        if f == 2 or f == 14:
            k, _, _, v, _, _, st = _entry(buf, ps, pe, 0, 0)
            if st == _DROP:
                continue
            if f == 2:
                if n_i >= n_in:
                    return _E_CHANGED
                in_idx[n_i] = np.int64(np.int32(k))
                in_pid[n_i] = v
                n_i += 1
            else:
                if n_src >= cnt[C_SRC]:
                    return _E_CHANGED
                src_pid[n_src] = k
                src_slot[n_src] = np.int64(np.int32(v))
                n_src += 1
        elif f == 4:
            q = ps
            while q < pe:
                v, q = _varint_fast(buf, q, pe)
                r = rows[C_SHAPE]
                if q < 0 or r >= lim[C_SHAPE]:
                    return _E_CHANGED
                o_shape[r] = v
                rows[C_SHAPE] = r + 1
        elif f == 5:
            r = rows[C_TYPES]
            if r >= lim[C_TYPES]:
                return _E_CHANGED
            o = _copy_str(buf, ps, pe, sbuf, rows, lim)
            if o < 0:
                return _E_CHANGED
            o_types[0, r] = nid
            o_types[1, r] = o
            o_types[2, r] = o + pe - ps
            rows[C_TYPES] = r + 1
        elif f == 6:
            cd_s = ps
            cd_e = pe
        elif f == 7:
            hd_s = ps
            hd_e = pe
        elif f == 9:
            op_s = ps
            op_e = pe
        elif f == 10:
            st = _fill_trace(buf, ps, pe, nid, ids, rows, lim, o_frames, scr, sbuf)
            if st < 0:
                return st
        elif f == 11:
            _, ks, ke, _, vs, ve, st = _entry(buf, ps, pe, 2, 2)
            if st == _DROP:
                continue
            if n_at >= cnt[C_ATTRS]:
                return _E_CHANGED
            at_ks[n_at] = ks
            at_ke[n_at] = ke
            at_vs[n_at] = vs
            at_ve[n_at] = ve
            n_at += 1
        elif f == 12:
            k, _, _, _, vs, ve, st = _entry_fast(buf, ps, pe, 0, 2)
            if st == _DROP:
                continue
            if n_ex >= cnt[C_STEPS]:
                return _E_CHANGED
            ex_k[n_ex] = k
            ex_s[n_ex] = vs
            ex_e[n_ex] = ve
            n_ex += 1
        elif f == 15:
            k, _, _, _, vs, ve, st = _entry(buf, ps, pe, 0, 2)
            if st == _DROP:
                continue
            if n_osh >= cnt[C_OSH]:
                return _E_CHANGED
            osh_k[n_osh] = np.int64(np.int32(k))
            osh_s[n_osh] = vs
            osh_e[n_osh] = ve
            n_osh += 1
    # nodes
    o = _copy_str(buf, op_s, op_e, sbuf, rows, lim)
    if o < 0:
        return _E_CHANGED
    o_nodes[0, j] = nid
    o_nodes[1, j] = o
    o_nodes[2, j] = o + op_e - op_s
    o_nodes[3, j] = _device(buf, cd_s, cd_e, dev, miss, j) if cd_e > cd_s else -1
    o_nodes[4, j] = _device(buf, hd_s, hd_e, dev, miss, j) if hd_e > hd_s else -1
    o_nodes[5, j] = float_ops
    n_shape = rows[C_SHAPE] - rows[C_SHAPE + _NROWT]
    params = np.int64(1) if n_shape > 0 else np.int64(0)
    for r in range(rows[C_SHAPE + _NROWT], rows[C_SHAPE]):
        if o_shape[r] < 0:
            params = 0
        params *= o_shape[r]
    o_nodes[6, j] = params
    o_nodes[7, j] = n_shape
    # node_inputs: by input index, the last entry of an index wins
    m = _keep_last_sorted(in_idx, n_i, sort_a, sort_b)
    order = sort_a
    for x in range(m):
        y = order[x]
        pid = in_pid[y]
        p = np.searchsorted(keys, pid)
        if p >= len(keys) or keys[p] != pid:
            if errv[j, 0] == 0:
                errv[j, 0] = _E_INPUT
                errv[j, 1] = pid
            p = 0
        slot = np.int64(0)
        for z in range(n_src - 1, -1, -1):
            if src_pid[z] == pid:
                slot = src_slot[z]
                break
        r = rows[C_INPUTS]
        o_inputs[0, r] = nid
        o_inputs[1, r] = in_idx[y]
        o_inputs[2, r] = pid
        o_inputs[3, r] = p
        o_inputs[4, r] = slot
        rows[C_INPUTS] = r + 1
    # output_shapes: by slot
    m = _keep_last_sorted(osh_k, n_osh, sort_a, sort_b)
    order = sort_a
    for x in range(m):
        y = order[x]
        r = rows[C_OSH]
        d0 = rows[C_ODIMS]
        nd = _tuple_values(buf, osh_s[y], osh_e[y], o_odims, d0, lim[C_ODIMS])
        o_osh[0, r] = nid
        o_osh[1, r] = osh_k[y]
        o_osh[2, r] = d0
        o_osh[3, r] = nd
        rows[C_OSH] = r + 1
        rows[C_ODIMS] = d0 + nd
    # node_attrs: by name
    kind, sub, stack = spec
    m = _attr_order(buf, at_ks, at_ke, n_at, sort_a)
    order = sort_a
    for x in range(m):
        y = order[x]
        r = rows[C_ATTRS]
        ko = _copy_str(buf, at_ks[y], at_ke[y], sbuf, rows, lim)
        vo = _copy_str(buf, at_vs[y], at_ve[y], sbuf, rows, lim)
        if ko < 0 or vo < 0:
            return _E_CHANGED
        o_attrs[0, r] = nid
        o_attrs[1, r] = ko
        o_attrs[2, r] = ko + at_ke[y] - at_ks[y]
        o_attrs[3, r] = vo
        o_attrs[4, r] = vo + at_ve[y] - at_vs[y]
        o_attrs[5, r] = 1 if _canonical(buf, at_vs[y], at_ve[y], kind, sub, stack) else 0
        rows[C_ATTRS] = r + 1
    # per step
    m = _keep_last_sorted(ex_k, n_ex, sort_a, sort_b)
    order = sort_a
    if m:
        out6 = (o_steps, o_exdev, o_execs, o_mem, o_omem, o_alloc)
        for x in range(m):
            y = order[x]
            step = ex_k[y]
            p = np.searchsorted(step_set, step)
            if p >= len(step_set) or step_set[p] != step:
                if errv[j, 0] == 0 or (errv[j, 0] == _E_STEP and step < errv[j, 1]):
                    errv[j, 0] = _E_STEP
                    errv[j, 1] = step
            st = _fill_exec(buf, ex_s[y], ex_e[y], nid, step, j, dev, scr, rows, lim, out6, miss)
            if st < 0:
                return st
    return 0


@njit(cache=True, nogil=True, _nrt=False)
def _fill_kernel(buf, idx, node_s, node_e, node_ids, counts, base, keys, step_set, ids, dev, spec, out, used, err,
                 errv, miss, scr, rows, lim, stack):
    kind, sub = spec
    for jj in range(len(idx)):
        j = idx[jj]
        for t in range(_NROWT):
            rows[t] = base[j, t]
            rows[t + _NROWT] = base[j, t]
            lim[t] = base[j, t] + counts[j, t]
        st = _fill_node(buf, node_s[j], node_e[j], node_ids[j], j, counts[j], rows, lim, keys, step_set, ids, dev,
                        (kind, sub, stack), scr, out, miss, errv)
        if st < 0:
            err[j] = st
        for t in range(_NROWT):
            used[j, t] = rows[t] - base[j, t]


@njit(cache=True, _nrt=False)
def _compact_rows(arr, base, used):
    """Move each node's ``used`` rows (``arr[:, row]``) from ``base`` down to close the gaps;
    returns the new row count."""
    r = 0
    for j in range(len(base)):
        b = base[j]
        if b != r:
            for k in range(used[j]):
                for c in range(arr.shape[0]):
                    arr[c, r + k] = arr[c, b + k]
        r += used[j]
    return r


@njit(cache=True)
def _first_seen(codes, n_values):
    """Renumber ``codes`` (-1 = null) in order of first appearance: (new codes, old code of each new)."""
    remap = np.full(n_values, -1, np.int64)
    order = np.empty(n_values, np.int64)
    out = np.empty(len(codes), np.int32)
    k = 0
    for i in range(len(codes)):
        c = codes[i]
        if c < 0:
            out[i] = 0
            continue
        if remap[c] < 0:
            remap[c] = k
            order[k] = c
            k += 1
        out[i] = remap[c]
    return out, order[:k]


@njit(cache=True)
def _group_file_order(node, step, pos):
    """Row permutation that puts each (node, step) group's rows back in file order (``pos``)."""
    n = len(node)
    perm = np.empty(n, np.int64)
    g = 0
    while g < n:
        h = g
        while h < n and node[h] == node[g] and step[h] == step[g]:
            h += 1
        for r in range(g, h):
            perm[g + pos[r]] = r
        g = h
    return perm


@njit(cache=True)
def _gather_spans(values, starts, lens):
    """Concatenate ``values[starts[i]:starts[i]+lens[i]]``; returns (values, int32 offsets)."""
    n = len(starts)
    offs = np.zeros(n + 1, np.int32)
    for i in range(n):
        offs[i + 1] = offs[i] + lens[i]
    out = np.empty(offs[n], values.dtype)
    for i in range(n):
        for k in range(lens[i]):
            out[offs[i] + k] = values[starts[i] + k]
    return out, offs


def _libc_pread():
    """libc's ``pread``, callable from compiled code (None where there is no such function)."""
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.pread
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_ssize_t
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_longlong]
    return fn


_PREAD = _libc_pread()


@njit(cache=True, nogil=True)
def _pread_nodes(pread, fd, starts, ends, dst, pos):
    """Read each node ``[starts[i], ends[i])`` of the file to ``dst[pos[i]:]`` with ``pread``, one
    call per run of nodes that follow each other in both; 0, or -1 on a short read."""
    base = dst.ctypes.data
    i = 0
    n = len(starts)
    while i < n:
        j = i + 1
        while j < n and starts[j] == ends[j - 1] and pos[j] == pos[j - 1] + ends[j - 1] - starts[j - 1]:
            j += 1
        off = starts[i]
        size = ends[j - 1] - off
        got = 0
        while got < size:
            k = pread(fd, base + pos[i] + got, size - got, off + got)
            if k <= 0:
                return -1
            got += k
        i = j
    return 0


def _pread_nodes_py(file, starts: np.ndarray, ends: np.ndarray, dst: np.ndarray, pos: np.ndarray) -> bool:
    """``_pread_nodes`` where libc's pread cannot be called: one seek and read per node."""
    view = memoryview(dst)
    for s, e, p in zip(starts.tolist(), ends.tolist(), pos.tolist()):
        file.seek(s)
        if file.readinto(view[p: p + e - s]) != e - s:
            return False
    return True


# ================================================================================ Python side


@dataclass
class ProfileIndex:
    """What the top-level scan learns about a ProfileProto file (node ids ascending)."""

    path: Path
    size: int
    keys: np.ndarray  # node ids (map keys), ascending, unique
    node_start: np.ndarray  # ProfileNode bytes [start, end) of each node
    node_end: np.ndarray
    name_start: np.ndarray  # where the scan found the node's name (the count kernel checks it)
    names: pa.StringArray  # node names, by id
    steps: np.ndarray  # ProfileProto.steps, ascending (repeats kept, as the reference keeps them)
    has_trace: bool
    miss_accelerator_stream: bool
    id_keys: np.ndarray  # id_to_string keys, ascending
    id_code: np.ndarray  # code of each id's string in code_values
    code_values: pa.StringArray  # the distinct id_to_string strings, then "" if it is not among them
    empty_code: int  # code of "" in code_values (an unknown id reads as "")

    @property
    def num_nodes(self) -> int:
        return len(self.keys)


def _words(a: np.ndarray) -> np.ndarray:
    """``a`` (uint8; 8-aligned, at least 8 bytes of padding) as uint64 words, for ``_word``."""
    w = np.frombuffer(memoryview(a), np.uint64, count=len(a) // 8)
    w.flags.writeable = False  # one numba type for every buffer
    return w


class _View:
    """A read-only byte buffer the kernels walk, with its word views."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.words = _words(array)


class _Mapped:
    """A read-only memory map of a file, with page release."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "rb")
        try:
            self.mm = mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            self.file.close()
            raise ProfileFormatError(f"`{path}` cannot be read: {exc}") from None
        self.array = np.frombuffer(self.mm, np.uint8)

    def release(self, start: int, end: int) -> None:
        """Drop the pages of ``[start, end)`` from this process (they stay in the page cache)."""
        lo = start - start % _PAGE
        if end > lo:
            try:
                self.mm.madvise(mmap.MADV_DONTNEED, lo, end - lo)
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        self.array = None
        try:
            self.mm.close()
        except BufferError:  # a view is still alive (an exception's traceback): unmapped when it goes
            pass
        self.file.close()

    def __enter__(self) -> _Mapped:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _check_file(path: str | os.PathLike) -> Path:
    """The checks of ``sources.read_bytes``, without reading the file."""
    p = Path(path)
    what, flag = KINDS["profile"]
    if not p.exists():
        raise InputNotFoundError(f"`{p}` does not exist (given as {flag}); check the path")
    if p.is_dir():
        raise ProfileFormatError(f"`{p}` is a directory, expected a {what} file (given as {flag})")
    try:
        size = p.stat().st_size
        with open(p, "rb"):
            pass
    except OSError as exc:
        raise ProfileFormatError(f"`{p}` cannot be read: {exc.strerror or exc}") from None
    if size == 0:
        raise ProfileFormatError(f"`{p}` is empty, expected a {what} file (given as {flag})")
    return p


def _wire_error(path: Path, code: int, at: int) -> ProfileFormatError:
    if code == _E_UNUSUAL:
        raise _Unusual()
    problem = _WIRE_PROBLEMS.get(code, "damaged wire format")
    return damaged(path, "profile", f"not protobuf wire format, or truncated: {problem}, near byte {at}")


def _strings(data: np.ndarray, offsets: np.ndarray, path: Path, what: str) -> pa.StringArray:
    arr = pa.StringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data))
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        raise damaged(path, "profile", f"{what} is not valid UTF-8") from None
    return arr


def scan_profile(path: str | os.PathLike) -> ProfileIndex:
    """Walk the top level of ProfileProto file ``path``: node positions and names, steps, strings."""
    p = _check_file(path)
    with _Mapped(p) as m:
        return _scan(p, m)


def _scan(p: Path, m: _Mapped) -> ProfileIndex:
    buf = m.array
    end = len(buf)
    ent = np.empty((4096, 5), np.int64)
    names = np.empty(1 << 16, np.uint8)
    steps = np.empty(256, np.int64)
    ids = np.empty((1024, 3), np.int64)
    state = np.zeros(6, np.int64)
    scrap = np.zeros(2 * _NCOUNT, np.int64)  # counters of nodes that only need validating
    pos = 0
    while pos < end:
        stop = min(end, pos + _SPAN)
        new = _scan_top(buf, pos, stop, end, ent, names, state, steps, ids, scrap)
        if new < 0:
            raise _wire_error(p, new, pos)
        if new < stop:  # an output array is full: grow it and go on from the same entry
            if state[0] >= len(ent):
                ent = np.concatenate([ent, np.empty_like(ent)])
            if state[3] >= len(ids):
                ids = np.concatenate([ids, np.empty_like(ids)])
            names = np.concatenate([names, np.empty_like(names)])
            steps = np.concatenate([steps, np.empty_like(steps)])
        m.release(pos, new)
        pos = new
    n = int(state[0])
    if n == 0:
        raise damaged(p, "profile", "it has no nodes")
    ent = ent[:n]
    name_off = np.append(ent[:, 4], state[1])
    name_len = np.diff(name_off)
    keys, keep = _last_of_each_key(ent[:, 0])
    if ((ent[keep, 3] < 0) | (name_len[keep] == 0)).any():
        raise damaged(p, "profile", "a node has no name or a wrong id; is this another kind of file?")
    all_names = _strings(names[: state[1]], name_off.astype(np.int32), p, "a node name")
    id_n = int(state[3])
    id_keys, id_keep = _last_of_each_key(ids[:id_n, 0])
    data, offs = _gather(buf, ids[:id_n, 1][id_keep], ids[:id_n, 2][id_keep])
    id_values = _strings(data, offs, p, "an id_to_string value")
    m.release(0, end)
    enc = pc.dictionary_encode(id_values)
    values = enc.dictionary
    empty = values.index("").as_py() if len(values) else -1
    if empty < 0:
        empty = len(values)
        values = pa.concat_arrays([values, pa.array([""], pa.string())])
    id_code = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return ProfileIndex(
        path=p,
        size=end,
        keys=keys,
        node_start=ent[keep, 1].copy(),
        node_end=ent[keep, 2].copy(),
        name_start=ent[keep, 3].copy(),
        names=all_names.take(pa.array(keep)),
        steps=np.sort(steps[: state[2]]),
        has_trace=bool(state[4]),
        miss_accelerator_stream=bool(state[5]),
        id_keys=id_keys,
        id_code=id_code,
        code_values=values,
        empty_code=empty,
    )


def _last_of_each_key(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique keys ascending, position of the last occurrence of each): protobuf map semantics."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    last = np.ones(len(sk), bool)
    last[:-1] = sk[1:] != sk[:-1]
    return sk[last].copy(), order[last]


def _batch_bounds(index: ProfileIndex, batch_nodes: int | None) -> list[tuple[int, int]]:
    n = index.num_nodes
    if batch_nodes is None:
        sizes = np.cumsum(index.node_end - index.node_start)
        cuts = [0]
        while cuts[-1] < n:
            done = sizes[cuts[-1] - 1] if cuts[-1] else 0
            nxt = int(np.searchsorted(sizes, done + _BATCH_BYTES, side="right"))
            cuts.append(min(n, max(nxt, cuts[-1] + 1)))
    else:
        if batch_nodes < 1:
            raise ValueError(f"batch_nodes must be >= 1, got {batch_nodes}")
        cuts = list(range(0, n, batch_nodes)) + [n]
    return list(zip(cuts[:-1], cuts[1:]))


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_THREADS = max(1, min(8, _cpus()))
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """Threads for the kernels (compiled ``nogil``: they run on all cores at once)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(_THREADS, thread_name_prefix="tfprof-wire")
        return _POOL


def _alloc(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialized array in Arrow's memory pool: it reuses the memory of batches already
    dropped, where fresh pages from the OS would each be zeroed by the kernel first."""
    n = int(np.prod(shape))
    buf = pa.allocate_buffer(max(n * np.dtype(dtype).itemsize, 8))
    return np.frombuffer(buf, dtype, count=n).reshape(shape)


_SCRATCH_COUNTS = [c for c in range(_NCOUNT) if c not in (C_ODIMS, C_SHAPE, C_FRAMES, C_STRB)]


def _fill_scratch(counts: np.ndarray, part: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-call scratch of the fill kernel: sized for the longest list of any node in ``part``."""
    longest = int(counts[part][:, _SCRATCH_COUNTS].max()) if len(part) else 0
    return (np.empty((_NSCR, 4 * max(longest, 3) + 16), np.int64), np.empty(2 * _NROWT, np.int64),
            np.empty(_NROWT, np.int64), np.empty((16, 4), np.int64))


class _Batcher:
    """Decodes sets of nodes of one file; keeps the device dictionary across batches.

    A batch's nodes are read with ``pread`` into one private buffer rather than walked through
    the memory map: a key-ordered batch of a file written in hash order has its nodes scattered
    over the whole file, and mapping pages around each one (twice: count and fill) costs more
    than copying the bytes once.
    """

    def __init__(self, path: Path, file, index: ProfileIndex) -> None:
        self.path = path
        self.file = file
        self.index = index
        self.exec_devices_seen: dict[int, None] = {}  # device codes, in order of first appearance
        self.canonical_seen: dict[int, None] = {}
        self.devices = _Devices()
        self.step_set = np.unique(index.steps)
        self.ids = (index.id_keys, index.id_code, np.int64(index.empty_code))
        self.spec = (_SPEC_KIND, _SPEC_SUB)
        self._buffers = [np.empty(0, np.uint8) for _ in range(_READ_AHEAD + 1)]
        self._seed()

    def _seed(self) -> None:
        """Intern the devices of a sample of nodes first, so that the first batch rarely re-runs."""
        n = self.index.num_nodes
        self._decode(np.unique(np.linspace(0, n - 1, min(n, 64)).astype(np.int64)))

    def read(self, a: int, b: int, slot: int = 0) -> tuple[_View, np.ndarray, np.ndarray]:
        """The bytes of the batch of node ids ``index.keys[a:b]`` (see ``_read``), into buffer ``slot``."""
        return self._read(self.index.node_start[a:b], self.index.node_end[a:b], slot)

    def _read(self, starts: np.ndarray, ends: np.ndarray, slot: int = 0) -> tuple[_View, np.ndarray, np.ndarray]:
        """The bytes of nodes ``[starts, ends)`` (in node-id order) one after the other in a
        private buffer, and their positions there.

        Node-id order, not file order: the kernels then read their input and write their output
        columns front to back. Nodes next to each other in both orders are read with one call.
        """
        lens = ends - starts
        pos = np.cumsum(lens) - lens
        need = (int(lens.sum()) + 15) // 8 * 8  # whole words, one of them padding (see _word)
        # A few buffers, reused batch after batch (fresh pages would be zeroed by the kernel first):
        # one being decoded, one being read ahead.
        if len(self._buffers[slot]) < need:
            self._buffers[slot] = np.empty(max(need, len(self._buffers[slot]) * 5 // 4), np.uint8)
        data = self._buffers[slot][:need]
        fd = self.file.fileno()
        if _PREAD is not None:  # one call per run of nodes, from compiled code
            ok = _pread_nodes(_PREAD, fd, starts, ends, data, pos) == 0
        else:
            ok = _pread_nodes_py(self.file, starts, ends, data, pos)
        if not ok:
            raise damaged(self.path, "profile", "it changed while it was being read")
        data = data.view()
        data.flags.writeable = False
        return _View(data), pos, pos + lens

    def _run(self, kernel, view: _View, ns: np.ndarray, ne: np.ndarray, nodes: np.ndarray, args: tuple,
             scratch=None) -> None:
        """Run ``kernel`` over ``nodes`` on every core (compiled ``nogil``).

        ``scratch(part)`` gives the extra (per-thread) arguments of a call over nodes ``part``.
        """
        def call(part: np.ndarray) -> None:
            kernel(view.array, part, ns, ne, *args, *(scratch(part) if scratch else ()))

        # In buffer order, so that each thread streams through memory (the hardware prefetcher
        # follows), each thread taking a contiguous part of the buffer of about equal size.
        if len(nodes) >= 2 * _THREADS and _THREADS > 1:
            size = np.cumsum(ne[nodes] - ns[nodes])
            cuts = np.searchsorted(size, size[-1] * np.arange(1, _THREADS) / _THREADS)
            list(_pool().map(call, np.split(nodes, cuts)))
        else:
            call(nodes)

    def decode(self, a: int, b: int, data: tuple | None = None) -> dict[str, pa.Table]:
        """The batch of node ids ``index.keys[a:b]``; ``data``: its bytes from ``read``, if read ahead."""
        return self._decode(np.arange(a, b), tables=True, data=data)

    def _decode(self, sel: np.ndarray, *, tables: bool = False, data: tuple | None = None
                ) -> dict[str, pa.Table] | None:
        idx = self.index
        B = len(sel)
        file_s, nids = idx.node_start[sel], idx.keys[sel]
        view, ns, ne = data if data is not None else self._read(file_s, idx.node_end[sel])
        everyone = np.arange(B)
        counts = np.zeros((B, 2 * _NCOUNT), np.int64)  # the second half: scrap for dropped entries
        err = np.zeros(B, np.int64)
        errpos = np.zeros(B, np.int64)
        name_pos = np.zeros(B, np.int64)
        self._run(_count_kernel, view, ns, ne, everyone, (nids, counts, err, errpos, name_pos))
        self._raise_count_errors(err, file_s)
        if (name_pos - ns != idx.name_start[sel] - file_s).any():
            raise _Unusual()  # a node with two names: the last one counts, not the one indexed
        rowc = counts[:, :_NROWT]
        base = np.cumsum(rowc, axis=0) - rowc
        total = rowc.sum(axis=0)

        def rows(t: int, ncol: int) -> np.ndarray:
            # One row per column: each column is contiguous (for Arrow) and the layout is always 'C'
            # (an F-order array with < 2 rows is also C-contiguous, and numba would compile again).
            return _alloc((ncol, int(total[t])), np.int64)

        out = (_alloc((8, B), np.int64), _alloc((int(total[C_SHAPE]),), np.int64), rows(C_INPUTS, 5),
               rows(C_TYPES, 3), rows(C_OSH, 4), _alloc((int(total[C_ODIMS]),), np.int64), rows(C_ATTRS, 6),
               rows(C_FRAMES, 13), rows(C_STEPS, 5), rows(C_EXDEV, 4), rows(C_EXECS, 6), rows(C_MEM, 13),
               rows(C_OMEM, 6), rows(C_ALLOC, 4), _alloc((int(total[C_STRB]),), np.uint8))
        used = np.zeros((B, _NROWT), np.int64)
        errv = np.zeros((B, 2), np.int64)
        miss = np.zeros((B, 3), np.int64)
        todo = everyone
        while len(todo):
            self._run(_fill_kernel, view, ns, ne, todo, (nids, counts, base, idx.keys, self.step_set, self.ids,
                      self._dev(view), self.spec, out, used, err, errv, miss),
                      lambda part: _fill_scratch(counts, part))
            todo = np.flatnonzero(miss[:, 0])
            if len(todo):  # device strings met for the first time: intern them, decode those nodes again
                new = [bytes(view.array[s:e]) for s, e in miss[todo, 1:]]
                for v in new:
                    try:
                        v.decode("utf-8")
                    except UnicodeDecodeError:
                        raise damaged(self.path, "profile", "a device name is not valid UTF-8") from None
                self.devices.add(new)
                miss[todo] = 0
                errv[todo] = 0
        bad = np.flatnonzero(err)
        if len(bad):
            raise _wire_error(self.path, int(err[bad[0]]), int(file_s[bad[0]]))
        self._raise_check_errors(errv, sel)
        if not tables:
            return None
        if (used != rowc).any():  # repeated map keys: the last entry won, close the gaps
            out = list(out)
            for t, k in ((C_INPUTS, 2), (C_OSH, 4), (C_ATTRS, 6), (C_STEPS, 8), (C_EXDEV, 9), (C_EXECS, 10),
                         (C_MEM, 11), (C_OMEM, 12), (C_ALLOC, 13)):
                if (used[:, t] != rowc[:, t]).any():
                    out[k] = out[k][:, : _compact_rows(out[k], base[:, t], used[:, t])]
        return self._tables(int(sel[0]), int(sel[-1]) + 1, out)

    def _dev(self, view: _View):
        d = self.devices
        return (d.words, d.tab, d.w2, d.slots, view.words)

    def _raise_count_errors(self, err: np.ndarray, file_s: np.ndarray) -> None:
        bad = np.flatnonzero(err)
        if not len(bad):
            return
        j = int(bad[0])
        code = int(err[j])
        if code < 0:
            raise _wire_error(self.path, code, int(file_s[j]))
        raise damaged(self.path, "profile", "a node has no name or a wrong id; is this another kind of file?")

    def _raise_check_errors(self, errv: np.ndarray, sel: np.ndarray) -> None:
        bad = np.flatnonzero(errv[:, 0])
        if not len(bad):
            return
        j = int(bad[0])
        name = self.index.names[int(sel[j])].as_py()
        if errv[j, 0] == _E_STEP:
            raise damaged(self.path, "profile", f"node `{name}` has stats for unlisted step {int(errv[j, 1])}")
        raise damaged(self.path, "profile", f"node `{name}` has an input with unknown id {int(errv[j, 1])}")

    # ---------------------------------------------------------------------------- Arrow

    def _tables(self, a: int, b: int, out) -> dict[str, pa.Table]:
        (o_nodes, o_shape, o_inputs, o_types, o_osh, o_odims, o_attrs, o_frames, o_steps, o_exdev, o_execs, o_mem,
         o_omem, o_alloc, sbuf) = out
        idx = self.index
        i64 = lambda col: pa.array(col, pa.int64())  # noqa: E731
        i32 = lambda col: pa.array(col.astype(np.int32), pa.int32())  # noqa: E731
        devs = self.devices.array()
        t = {}
        op = _strings(*_gather(sbuf, o_nodes[1, :], o_nodes[2, :]), self.path, "an op name")
        shape_off = np.zeros(b - a + 1, np.int32)
        np.cumsum(o_nodes[7, :], out=shape_off[1:])
        t["nodes"] = _table("nodes", [
            i64(o_nodes[0, :]), idx.names.slice(a, b - a), _encode(op),
            pa.ListArray.from_arrays(pa.array(shape_off), i64(o_shape)), i64(o_nodes[6, :]), i64(o_nodes[5, :]),
            _dict(o_nodes[3, :], devs), _dict(o_nodes[4, :], devs)])
        t["node_inputs"] = _table("node_inputs", [
            i64(o_inputs[0, :]), i32(o_inputs[1, :]), idx.names.take(pa.array(o_inputs[3, :])),
            i64(o_inputs[2, :]), i32(o_inputs[4, :])])
        types = _strings(*_gather(sbuf, o_types[1, :], o_types[2, :]), self.path, "an op type")
        t["node_types"] = conform("node_types", {"node_id": i64(o_types[0, :]), "op_type": types})
        dims, dims_off = _gather_spans(o_odims, o_osh[2, :], o_osh[3, :])
        t["output_shapes"] = _table("output_shapes", [
            i64(o_osh[0, :]), i32(o_osh[1, :]), pa.ListArray.from_arrays(pa.array(dims_off), i64(dims))])
        names = _strings(*_gather(sbuf, o_attrs[1, :], o_attrs[2, :]), self.path, "an attr name")
        t["node_attrs"] = _table("node_attrs", [
            i64(o_attrs[0, :]), _encode(names), self._attr_values(o_attrs, sbuf)])
        t["node_steps"] = _table("node_steps", [i64(o_steps[c, :]) for c in range(5)])
        for codes, seen in ((o_exdev[2, :], self.exec_devices_seen), (o_nodes[3, :], self.canonical_seen)):
            seen.update(dict.fromkeys(_first_seen(codes, max(len(devs), 1))[1].tolist()))
        perm = _group_file_order(o_exdev[0, :], o_exdev[1, :], o_exdev[3, :])
        t["exec_devices"] = _table("exec_devices", [
            i64(o_exdev[0, :]), i64(o_exdev[1, :]), _dict(o_exdev[2, :], devs, first_seen_order=perm)])
        t["execs"] = _table("execs", [
            i64(o_execs[0, :]), i64(o_execs[1, :]), _dict(o_execs[2, :], devs),
            _dict(o_execs[3, :], pa.array(["accelerator", "cpu"])), i64(o_execs[4, :]),
            i64(o_execs[5, :])])
        # ExecMemory fields 1..10 sit in columns 3..12; the table orders them differently.
        mem_cols = (3, 8, 9, 10, 11, 4, 5, 6, 7, 12)
        t["memory"] = _table("memory", [i64(o_mem[0, :]), i64(o_mem[1, :]), i32(o_mem[2, :])]
                             + [i64(o_mem[c, :]) for c in mem_cols])
        t["output_memory"] = _table("output_memory", [
            i64(o_omem[0, :]), i64(o_omem[1, :]), i32(o_omem[2, :]), i32(o_omem[3, :]), i64(o_omem[4, :]),
            pa.array(o_omem[5, :].view(np.uint64), pa.uint64())])
        t["allocations"] = _table("allocations", [i64(o_alloc[c, :]) for c in range(4)])
        t["code_frames"] = _table("code_frames", [
            i64(o_frames[0, :]), i32(o_frames[1, :]), self._code_strings(o_frames, 0, sbuf), i32(o_frames[2, :]),
            self._code_strings(o_frames, 1, sbuf), self._code_strings(o_frames, 2, sbuf), i32(o_frames[3, :])])
        return t

    def _attr_values(self, o_attrs: np.ndarray, sbuf: np.ndarray) -> pa.Array:
        data, offs = _gather(sbuf, o_attrs[3, :], o_attrs[4, :])
        values = pa.BinaryArray.from_buffers(pa.binary(), len(offs) - 1, [None, pa.py_buffer(offs), pa.py_buffer(data)])
        odd = np.flatnonzero(o_attrs[5, :] == 0)
        if not len(odd):
            return values
        # Not in canonical encoding (or not checked): let protobuf re-serialize it, as the reference does.
        from google.protobuf.message import DecodeError

        from tfprof.schema.proto import attr_value_pb2

        py = values.to_pylist()
        for r in odd:
            try:
                msg = attr_value_pb2.AttrValue.FromString(py[r])
            except (DecodeError, ValueError, RuntimeError):
                raise damaged(self.path, "profile", "not protobuf wire format, or truncated: an attr value "
                              "is not a valid AttrValue") from None
            py[r] = msg.SerializeToString(deterministic=True)
        return pa.array(py, pa.binary())

    def _code_strings(self, o_frames: np.ndarray, k: int, sbuf: np.ndarray) -> pa.DictionaryArray:
        codes = o_frames[4 + k, :]
        values = self.index.code_values
        inline = np.flatnonzero(codes == -2)
        if len(inline):
            extra = _strings(*_gather(sbuf, o_frames[7 + 2 * k, inline], o_frames[8 + 2 * k, inline]),
                             self.path, "a code trace string")
            both = pc.dictionary_encode(pa.concat_arrays([values, extra]))
            remap = both.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            codes = np.where(codes >= 0, remap[np.maximum(codes, 0)], 0)
            codes[inline] = remap[len(values) + np.arange(len(inline))]
            values = both.dictionary
        return _dict(codes, values)


def _table(name: str, columns: list) -> pa.Table:
    return pa.Table.from_arrays(columns, schema=TABLES[name].schema)


def _encode(strings: pa.Array) -> pa.DictionaryArray:
    """Dictionary-encode in order of first appearance (what ``conform`` does)."""
    return pc.dictionary_encode(strings).cast(pa.dictionary(pa.int32(), pa.string()))


def _dict(codes: np.ndarray, values: pa.Array, first_seen_order: np.ndarray | None = None) -> pa.DictionaryArray:
    """A dictionary column from codes into ``values`` (-1 = null), listing the used values in order
    of first appearance (in ``first_seen_order`` of the rows when given)."""
    n_values = max(len(values), 1)
    if first_seen_order is None:
        new, order = _first_seen(codes, n_values)
    else:
        new_p, order = _first_seen(codes[first_seen_order], n_values)
        new = np.empty_like(new_p)
        new[first_seen_order] = new_p
    mask = codes < 0
    indices = pa.array(new, pa.int32(), mask=mask if mask.any() else None)
    return pa.DictionaryArray.from_arrays(indices, values.take(pa.array(order)))


# ================================================================================ API


class ProfileReader:
    """Streams the tables of one ProfileProto file.

    >>> reader = ProfileReader("profile_100")                    # doctest: +SKIP
    >>> for batch in reader.batches(): write(batch)              # per-node tables   # doctest: +SKIP
    >>> write(reader.profile_tables())                           # steps, devices, info, ...  # doctest: +SKIP

    ``batches()`` yields dicts of the per-node tables (``BATCH_TABLES``) for consecutive ranges
    of node ids. With ``prefetch`` (the default), while the caller handles one batch the next one
    is decoded and the one after is read, in the background; a caller that already hands batches
    to a thread of its own can turn it off and keep one batch less in memory.
    ``profile_tables()`` gives the whole-profile tables once the batches are consumed.
    """

    def __init__(self, path: str | os.PathLike, *, batch_nodes: int | None = None,
                 index: ProfileIndex | None = None, prefetch: bool = True) -> None:
        self.path = _check_file(path)
        self.batch_nodes = batch_nodes
        self.prefetch = prefetch
        self._index = index
        self._batcher: _Batcher | None = None
        self._fallback: dict[str, pa.Table] | None = None
        self._done = False

    @property
    def index(self) -> ProfileIndex | None:
        """The top-level scan (None when the file needs the reference decoder)."""
        if self._index is None and self._fallback is None:
            try:
                self._index = scan_profile(self.path)
            except _Unusual:
                self._fallback = profile_proto.tables_from_message(profile_proto.parse_profile(self.path))
        return self._index

    def batches(self) -> Iterator[dict[str, pa.Table]]:
        """The per-node tables, batch by batch (node ids ascending)."""
        yielded = False
        try:
            for batch in self._batches():
                yielded = True
                yield batch
        except _Unusual:
            if yielded:
                raise damaged(self.path, "profile", "a map entry holds its value twice; decode it with "
                              "tfprof.ingest.wire.decode_profile, which falls back to protobuf") from None
            self._use_reference()
            yield from _reference_batches(self._fallback, self.batch_nodes)
        self._done = True

    def _use_reference(self) -> None:
        self._index = None
        self._fallback = profile_proto.tables_from_message(profile_proto.parse_profile(self.path))

    def _batches(self) -> Iterator[dict[str, pa.Table]]:
        """``batches``, raising ``_Unusual`` for what the kernels leave to protobuf."""
        index = self.index
        if index is None:
            yield from _reference_batches(self._fallback, self.batch_nodes)
            return
        bounds = _batch_bounds(index, self.batch_nodes)
        if not self.prefetch:
            with open(self.path, "rb") as f:
                b = self._batcher = _Batcher(self.path, f, index)
                for a, z in bounds:
                    yield b.decode(a, z)
            return
        with open(self.path, "rb") as f, ThreadPoolExecutor(1, thread_name_prefix="tfprof-wire-next") as ahead, \
                ThreadPoolExecutor(1, thread_name_prefix="tfprof-wire-read") as reader:
            b = self._batcher = _Batcher(self.path, f, index)
            # Three stages run at once: the caller handles batch k, batch k+1 is decoded, the
            # bytes of the batches after it are read.
            reads = {k: reader.submit(b.read, *bounds[k], k % (_READ_AHEAD + 1))
                     for k in range(min(_READ_AHEAD, len(bounds)))}

            def decode(k: int) -> dict[str, pa.Table]:
                data = reads.pop(k).result()
                if k + _READ_AHEAD < len(bounds):
                    j = k + _READ_AHEAD
                    reads[j] = reader.submit(b.read, *bounds[j], j % (_READ_AHEAD + 1))
                return b.decode(*bounds[k], data=data)

            nxt = ahead.submit(decode, 0)
            for k in range(len(bounds)):
                batch = nxt.result()
                if k + 1 < len(bounds):
                    nxt = ahead.submit(decode, k + 1)
                yield batch

    def profile_tables(self) -> dict[str, pa.Table]:
        """steps, devices, info (and the empty allocator_memory, checkpoint_tensors), as the
        reference's ``finish`` builds them; call it after ``batches()`` is exhausted."""
        if not self._done:
            raise RuntimeError("profile_tables() needs every batch to have been read first")
        if self._fallback is not None:
            return {k: v for k, v in self._fallback.items() if k not in BATCH_TABLES}
        index, b = self._index, self._batcher
        devs = b.devices.strings
        seen = list(b.exec_devices_seen) + [c for c in b.canonical_seen if c not in b.exec_devices_seen]
        names = pa.array([devs[c].decode() for c in seen], pa.string())
        return {
            "steps": conform("steps", {"step": pa.array(index.steps, pa.int64())}),
            "allocator_memory": TABLES["allocator_memory"].schema.empty_table(),
            "checkpoint_tensors": TABLES["checkpoint_tensors"].schema.empty_table(),
            # derive.devices_table lists devices in order of first appearance in exec_devices and
            # then in nodes.canonical_device: the same order, from what the batches saw.
            "devices": derive.devices_table(pa.table({"device": names}),
                                            pa.table({"canonical_device": pa.array([], pa.string())})),
            "info": conform("info", {"has_trace": [index.has_trace],
                                     "miss_accelerator_stream": [index.miss_accelerator_stream]}),
        }


def iter_profile_batches(
    path: str | os.PathLike, *, batch_nodes: int | None = None, index: ProfileIndex | None = None,
    prefetch: bool = True,
) -> Iterator[dict[str, pa.Table]]:
    """The per-node tables of ProfileProto ``path`` (``BATCH_TABLES``), in batches of node ids.

    Each batch covers the next ``batch_nodes`` node ids (default: about ``_BATCH_BYTES`` of the
    file), so concatenating the batches gives the globally sorted tables. ``index`` (from
    ``scan_profile``) saves the scan; ``prefetch``: see ``ProfileReader``. Damaged files raise
    ``ProfileFormatError``. The whole-profile tables come from ``ProfileReader.profile_tables``.
    """
    yield from ProfileReader(path, batch_nodes=batch_nodes, index=index, prefetch=prefetch).batches()


def _reference_batches(tables: dict[str, pa.Table], batch_nodes: int | None) -> Iterator[dict[str, pa.Table]]:
    """Batches cut from the reference decoder's tables (for the rare encodings the kernels leave)."""
    ids = tables["nodes"].column("node_id").to_numpy()
    step = batch_nodes or len(ids)
    for lo in range(0, len(ids), step):
        first, last = ids[lo], ids[min(lo + step, len(ids)) - 1]
        batch = {}
        for name in BATCH_TABLES:
            col = tables[name].column("node_id").to_numpy()
            i, j = np.searchsorted(col, first, "left"), np.searchsorted(col, last, "right")
            batch[name] = tables[name].slice(i, j - i)
        yield batch


def decode_profile(path: str | os.PathLike) -> dict[str, pa.Table]:
    """Every table of ProfileProto ``path``: equal to ``tables_from_message(parse_profile(path))``."""
    reader = ProfileReader(path)
    try:
        batches = list(reader._batches())
    except _Unusual:  # an encoding the kernels leave to protobuf (see ``_Unusual``)
        reader._use_reference()
        return reader._fallback
    reader._done = True
    tables = {name: concat_batches([b[name] for b in batches]) for name in BATCH_TABLES}
    tables.update(reader.profile_tables())
    order = list(profile_proto._FROM_PROTO) + ["allocator_memory", "checkpoint_tensors", "devices", "info"]
    return {name: tables[name] for name in order}


def concat_batches(parts: list[pa.Table]) -> pa.Table:
    """One table from batches of it, with one dictionary per column (values in order of first use)."""
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables(parts).unify_dictionaries().combine_chunks()

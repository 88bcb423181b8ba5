"""Numba helpers that read one XStat off the wire and write its value as text: as ``json.dumps``
writes the value the reference path holds (for an event's ``args``) or as ``str()`` does (for
the columns the classification reads).

Every writer takes ``out`` (a uint8 buffer), ``o`` (where to write) and ``write``; it returns the
position after what it wrote, and with ``write`` False only counts, so one function both measures
and fills. XStat field numbers (xplane.proto): metadata_id 1, then the value oneof: double 2,
uint64 3, int64 4, str 5, bytes 6, ref 7 (the name of the stat metadata of that id).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof.ingest.wire.fields import read_len, read_tag, read_varint, skip, utf8_ok

# stat value kinds: the XStat field number of the value (0: none set)
DOUBLE, UINT64, INT64, STR, BYTES, REF = 2, 3, 4, 5, 6, 7
NOT_UTF8 = -8  # status of a str value that is not UTF-8
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
_TEN = np.uint64(10)


@njit(cache=True, _nrt=False)
def stat(buf, s, e, check):
    """(metadata id, value kind, value, value start, value end, status) of the XStat ``buf[s:e]``.
    A varint value comes back as its int64 bits, a double, string or bytes value as where its
    bytes lie; the last value field wins (a oneof). ``check``: whether a str value must be UTF-8.
    Status < 0 when the stat is damaged."""
    meta = kind = value = 0
    vs = ve = s
    pos = s
    while pos < e:
        f, wt, pos = read_tag(buf, pos, e)
        if pos < 0:
            return meta, kind, value, vs, ve, pos
        if (f == 1 or f == 3 or f == 4 or f == 7) and wt == 0:
            v, pos = read_varint(buf, pos, e)
            if f == 1:
                meta = v
            else:
                kind, value = f, v
        elif f == 2 and wt == 1:
            if e - pos < 8:
                return meta, kind, value, vs, ve, -2
            kind, vs, ve, pos = f, pos, pos + 8, pos + 8
        elif (f == 5 or f == 6) and wt == 2:
            a, b = read_len(buf, pos, e)
            if a < 0:
                return meta, kind, value, vs, ve, a
            if check and f == 5 and not utf8_ok(buf, a, b):
                return meta, kind, value, vs, ve, NOT_UTF8
            kind, vs, ve, pos = f, a, b, b
        else:
            pos = skip(buf, pos, e, wt, f)
        if pos < 0:
            return meta, kind, value, vs, ve, pos
    return meta, kind, value, vs, ve, 0


@njit(cache=True, _nrt=False)
def bits(buf, s):
    """The 8 little-endian bytes at ``buf[s]`` (a double) as int64."""
    v = np.int64(0)
    for k in range(8):
        v |= np.int64(buf[s + k]) << (8 * k)
    return v


@njit(cache=True, _nrt=False)
def find(keys, values, lo, hi, x):
    """``values[i]`` for the ``keys[i] == x`` in sorted ``keys[lo:hi]``; -1 when there is none."""
    end = hi
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return values[lo] if lo < end and keys[lo] == x else -1


@njit(cache=True, _nrt=False)
def lookup(dense, keys, values, tab, p, x):
    """The value of key ``x`` in plane ``p``'s part of a lookup table (-1: none): ``tab[p]`` = (start
    in ``dense``, its span or -1 when the plane's keys are not dense, start and end in the sorted
    ``keys``/``values``)."""
    span = tab[p, 1]
    if span >= 0:
        return dense[tab[p, 0] + x] if 0 <= x < span else -1
    return find(keys, values, tab[p, 2], tab[p, 3], x)


@njit(cache=True, _nrt=False, inline="always")
def put(out, o, c, write):
    if write:
        out[o] = c
    return o + 1


@njit(cache=True, _nrt=False)
def put_bytes(src, s, e, out, o, write):
    if write:
        for k in range(e - s):
            out[o + k] = src[s + k]
    return o + e - s


@njit(cache=True, _nrt=False)
def put_table(txt, offs, i, out, o, write):
    """Entry ``i`` of a text table (``txt[offs[i]:offs[i + 1]]``)."""
    return put_bytes(txt, offs[i], offs[i + 1], out, o, write)


@njit(cache=True, _nrt=False)
def put_uint(out, o, u, write):
    """The decimal digits of uint64 ``u``."""
    n = 1
    t = u
    while t >= _TEN:
        t //= _TEN
        n += 1
    if write:
        p = o + n - 1
        for _ in range(n):
            out[p] = np.uint8(u % _TEN) + np.uint8(48)
            u //= _TEN
            p -= 1
    return o + n


@njit(cache=True, _nrt=False)
def put_int(out, o, v, kind, write):
    """Integer ``v`` (int64 bits) in decimal: unsigned for a uint64 value."""
    if kind == UINT64 or v >= 0:
        return put_uint(out, o, np.uint64(v), write)
    o = put(out, o, 45, write)
    return put_uint(out, o, np.uint64(-(v + 1)) + np.uint64(1), write)


@njit(cache=True, _nrt=False)
def put_hex(buf, s, e, out, o, write):
    """Bytes ``buf[s:e]`` as lowercase hex (``bytes.hex``)."""
    if write:
        for k in range(e - s):
            c = buf[s + k]
            out[o + 2 * k] = _HEX[c >> 4]
            out[o + 2 * k + 1] = _HEX[c & 15]
    return o + 2 * (e - s)


@njit(cache=True, _nrt=False)
def _u4(out, o, cp, write):
    """``\\u`` and the code unit ``cp`` in 4 lowercase hex digits."""
    o = put(out, o, 92, write)
    o = put(out, o, 117, write)
    for shift in (12, 8, 4, 0):
        o = put(out, o, _HEX[(cp >> shift) & 15], write)
    return o


@njit(cache=True, _nrt=False)
def put_json_str(buf, s, e, out, o, write):
    """The UTF-8 text ``buf[s:e]`` (valid: checked before) as a JSON string literal exactly as
    ``json.dumps`` writes it: ASCII only, ``\\"``, ``\\\\``, the short escapes of \\n \\r \\t \\b \\f,
    every other control character and non-ASCII character as ``\\uXXXX`` (a surrogate pair past
    U+FFFF)."""
    o = put(out, o, 34, write)
    i = s
    while i < e:
        c = np.int64(buf[i])
        if c < 0x80:
            i += 1
            if c == 34 or c == 92:
                o = put(out, o, 92, write)
                o = put(out, o, c, write)
            elif 0x20 <= c <= 0x7E:
                o = put(out, o, c, write)
            elif c == 10 or c == 13 or c == 9 or c == 8 or c == 12:
                o = put(out, o, 92, write)
                o = put(out, o, 110 if c == 10 else (114 if c == 13 else (116 if c == 9 else (98 if c == 8 else 102))),
                        write)
            else:
                o = _u4(out, o, c, write)
            continue
        if c < 0xE0:
            cp = ((c & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F)
            i += 2
        elif c < 0xF0:
            cp = ((c & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (np.int64(buf[i + 2]) & 0x3F)
            i += 3
        else:
            cp = (((c & 0x07) << 18) | ((np.int64(buf[i + 1]) & 0x3F) << 12) | ((np.int64(buf[i + 2]) & 0x3F) << 6)
                  | (np.int64(buf[i + 3]) & 0x3F))
            i += 4
        if cp < 0x10000:
            o = _u4(out, o, cp, write)
        else:
            cp -= 0x10000
            o = _u4(out, o, 0xD800 | (cp >> 10), write)
            o = _u4(out, o, 0xDC00 | (cp & 0x3FF), write)
    return put(out, o, 34, write)

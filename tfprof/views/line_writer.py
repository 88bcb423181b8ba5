"""The numba kernel that writes the lines of a tree report into one uint8 buffer, and its byte copies.

``lines`` compiles a line's items to the arrays this kernel reads: rows ``(op, a, b, c)`` of
pieces (the opcodes below), a string table whose first two literals are 16 spaces and ``", "``,
and value columns of a kind each (``KINDS``). ``distinct`` collects the (value, kind) pairs of
the value columns, which Python formats once each; ``write`` finds each one again by direct
index (values below ``SMALL``) or hash.

``write`` works in blocks of rows: first, one pass per piece turns the block's rows into
(start, length) spans of the string table, then each line copies its spans (``_copy``: 16 bytes
at a time, which may write a few bytes past a string's end that the next string overwrites;
every array a copy touches ends in ``ROOM`` spare bytes). Every copy and byte written checks
its ranges first: the buffer is sized from a bound on every line, and were that bound wrong
the kernel would raise instead of writing past it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# piece opcodes: rows (op, a, b, c) of the kernel's program
LIT = 0  # literal a
VAL = 1  # formatted value of value column a, in region b (a prefix and suffix around it)
OWN = 2  # VAL where the row is accounted, else literal c
ACC_LIT = 3  # literal a where the row is accounted, else literal b
ROW = 4  # row string column a

KINDS = {"number": 0, "time": 1, "memory": 2, "ratio": 3}
_N_KINDS = len(KINDS)
SMALL = 1024  # values in [0, SMALL) find their text by direct index, larger ones by hash
MAX_VALUES = 24  # value columns come as a tuple of this size: one compiled signature
_BLOCK = 256
SPACES = 0  # literal 0 is 16 spaces
SEP = 1  # literal 1 is ", "
_U0, _U16 = np.uint64(0), np.uint64(16)
ROOM = 16  # spare bytes at the end of every array _copy reads or writes (its 16-byte moves)
_HASH = np.uint64(0x9E3779B97F4A7C15)
_KIND_MIX = np.uint64(0xC2B2AE3D27D4EB4F)


@njit(inline="always")
def _move16(out, p, src, s):  # pragma: no cover - numba
    """``out[p:p + 16] = src[s:s + 16]`` (``p``, ``s`` unsigned, both ranges inside their arrays):
    16 loads, then 16 stores, which LLVM merges into one 16-byte move. Unsigned indices spare
    numba's negative-index wraparound, which would keep the bytes apart."""
    b0, b1, b2, b3 = src[s], src[s + np.uint64(1)], src[s + np.uint64(2)], src[s + np.uint64(3)]
    b4, b5, b6, b7 = src[s + np.uint64(4)], src[s + np.uint64(5)], src[s + np.uint64(6)], src[s + np.uint64(7)]
    b8, b9, b10, b11 = src[s + np.uint64(8)], src[s + np.uint64(9)], src[s + np.uint64(10)], src[s + np.uint64(11)]
    b12, b13, b14, b15 = src[s + np.uint64(12)], src[s + np.uint64(13)], src[s + np.uint64(14)], src[s + np.uint64(15)]
    out[p], out[p + np.uint64(1)], out[p + np.uint64(2)], out[p + np.uint64(3)] = b0, b1, b2, b3
    out[p + np.uint64(4)], out[p + np.uint64(5)], out[p + np.uint64(6)], out[p + np.uint64(7)] = b4, b5, b6, b7
    out[p + np.uint64(8)], out[p + np.uint64(9)], out[p + np.uint64(10)], out[p + np.uint64(11)] = b8, b9, b10, b11
    out[p + np.uint64(12)], out[p + np.uint64(13)], out[p + np.uint64(14)], out[p + np.uint64(15)] = b12, b13, b14, b15


@njit(inline="always")
def _copy(out, pos, src, start, length):  # pragma: no cover - numba
    """Copy ``src[start:start + length]`` into ``out`` at ``pos``, 16 bytes at a time; returns the
    new ``pos``. Up to 15 bytes past the string are read, and written in ``out``: bytes after
    ``pos`` that the writer, going forward, has not written yet and overwrites next. Both arrays
    therefore end in ``ROOM`` spare bytes, and the ranges are checked first: a copy never reads
    or writes outside its array. (An exact copy, bytes or overlapping 16/8/4-byte moves, made
    the kernel 1.6-3x slower: the short strings of a report make a byte loop branch a lot.)"""
    if start < 0 or length < 0 or start + length + 16 > src.shape[0] or pos < 0 or pos + length + 16 > out.shape[0]:
        raise IndexError("line writer: a copy out of its buffer")
    p, s, n = np.uint64(pos), np.uint64(start), np.uint64(length)
    k = _U0
    while k < n:
        _move16(out, p + k, src, s + k)
        k += _U16
    return pos + length


@njit(inline="always")
def _put(out, pos, byte):  # pragma: no cover - numba
    """``out[pos] = byte``, checked; returns ``pos + 1``."""
    if pos < 0 or pos >= out.shape[0]:
        raise IndexError("line writer: a byte out of its buffer")
    out[pos] = byte
    return pos + 1


@njit(inline="always")
def _lookup(table, v, kind, bits):  # pragma: no cover - numba
    """The slot of (v, kind): its own, or the empty slot (``table[h, 1] == -1``) it belongs in."""
    mask = (1 << bits) - 1
    h = np.int64(((np.uint64(v) + np.uint64(kind) * _KIND_MIX) * _HASH) >> np.uint64(64 - bits))
    while table[h, 1] >= 0 and (table[h, 0] != v or (table[h, 1] >> 32) != kind):
        h = (h + 1) & mask
    return h


@njit(cache=True)
def _table(found, kinds, count, bits):  # pragma: no cover - numba
    table = np.full((1 << bits, 2), -1, np.int64)
    for d in range(count):
        if not 0 <= found[d] < SMALL:
            h = _lookup(table, found[d], kinds[d], bits)
            table[h, 0] = found[d]
            table[h, 1] = (kinds[d] << 32) | d
    return table


@njit(cache=True)
def distinct(values, col_kind, k):  # pragma: no cover - numba
    """The distinct (value, kind) pairs of the first ``k`` columns of ``values`` in first-seen
    order, and where to find a pair's index: ``small[kind, value]`` for a value in
    ``[0, SMALL)``, else the hash table of size ``1 << bits``, rows ``[value, kind << 32 | index]``
    (-1 in an empty slot's second column)."""
    bits = 10
    found = np.empty(1 << bits, np.int64)
    kinds = np.empty(1 << bits, np.int64)
    table = _table(found, kinds, 0, bits)
    small = np.full((_N_KINDS, SMALL), -1, np.int64)
    count = 0
    hashed = 0
    for c in range(k):
        col = values[c]
        kind = col_kind[c]
        for i in range(col.shape[0]):
            v = col[i]
            if i > 0 and v == col[i - 1]:
                continue
            if 0 <= v < SMALL:
                if small[kind, v] >= 0:
                    continue
                small[kind, v] = count
            else:
                h = _lookup(table, v, kind, bits)
                if table[h, 1] >= 0:
                    continue
                table[h, 0] = v
                table[h, 1] = (kind << 32) | count
                hashed += 1
            if count == found.shape[0]:
                found = np.concatenate((found, np.empty(count, np.int64)))
                kinds = np.concatenate((kinds, np.empty(count, np.int64)))
            found[count] = v
            kinds[count] = kind
            count += 1
            if 2 * hashed >= (1 << bits):  # keep the load under a half
                bits += 1
                table = _table(found, kinds, count, bits)
    return found[:count], kinds[:count], small, table, bits


@njit(cache=True)
def write(
    out, start, indent, name_views, name_inline, name_data, name_base, name_offs, accounted, values, col_kind,
    small, table, bits, src, src_offs, region_base, row_offs, row_valid, ops, item_start, item_row, item_sep,
    tail_row, newline, line_offs,
):  # pragma: no cover - numba
    """Write every line into ``out`` from byte ``start`` (each ended by ``newline``); returns the
    end. ``line_offs[i]`` is where line i starts, ``line_offs[n]`` the end.

    The names are Arrow string views (``name_views``: rows of (length, prefix or inline bytes,
    buffer, offset), ``name_inline`` the same bytes, ``name_data`` the data buffers one after
    the other, buffer b from ``name_base[b]``) or, where ``name_views`` has no rows,
    ``name_data[name_offs[i]:name_offs[i + 1]]``. ``src`` holds the strings (literals; per
    region, distinct value d as string ``region_base[region] + d``; ``src_offs``: where each
    starts) and then the row strings (``row_offs[r, i]``: where row string r of row i starts).
    Item ``it`` is pieces ``item_start[it]:item_start[it + 1]`` of ``ops``, left out where row
    string ``item_row[it]`` (if any) is null, after a ``", "`` where ``item_sep[it]`` and an
    earlier item of the line is there (a separator that is always there is in its pieces)."""
    n = indent.shape[0]
    n_items = item_row.shape[0]
    n_pieces = ops.shape[0] + item_sep.sum()
    span_start = np.zeros((n_pieces, _BLOCK), np.int64)
    span_len = np.zeros((n_pieces, _BLOCK), np.int64)
    present = np.empty(_BLOCK, np.bool_)
    seen = np.empty(_BLOCK, np.bool_)  # an earlier item of the line is present
    n_values = 0
    for o in range(ops.shape[0]):
        if ops[o, 0] == VAL or ops[o, 0] == OWN:
            n_values = max(n_values, ops[o, 1] + 1)
    value_idx = np.empty((n_values, _BLOCK), np.int64)
    views = name_views.shape[0] > 0
    pos = start
    for i0 in range(0, n, _BLOCK):
        m = min(n, i0 + _BLOCK) - i0
        for c in range(n_values):  # the distinct index of every value of the block
            col = values[c]
            kind = col_kind[c]
            for j in range(m):  # (written out: a helper function here ran ten times slower)
                v = col[i0 + j]
                if 0 <= v < SMALL:
                    value_idx[c, j] = small[kind, v]
                else:
                    value_idx[c, j] = table[_lookup(table, v, kind, bits), 1] & 0xFFFFFFFF
        seen[:m] = False
        p = 0
        for it in range(n_items):
            r = item_row[it]
            for j in range(m):
                present[j] = r < 0 or row_valid[r, i0 + j]
            if item_sep[it]:
                for j in range(m):
                    span_start[p, j] = src_offs[SEP]
                    span_len[p, j] = 2 if present[j] and seen[j] else 0
                p += 1
            for j in range(m):
                seen[j] = seen[j] or present[j]
            for o in range(item_start[it], item_start[it + 1]):
                op, a, b, c = ops[o, 0], ops[o, 1], ops[o, 2], ops[o, 3]
                if op == ROW:
                    for j in range(m):
                        span_start[p, j] = row_offs[a, i0 + j]
                        span_len[p, j] = row_offs[a, i0 + j + 1] - row_offs[a, i0 + j]
                elif op == LIT or op == ACC_LIT:
                    for j in range(m):
                        s = a if op == LIT or accounted[i0 + j] else b
                        span_start[p, j] = src_offs[s]
                        span_len[p, j] = src_offs[s + 1] - src_offs[s]
                else:  # VAL, OWN
                    for j in range(m):
                        s = c if op == OWN and not accounted[i0 + j] else region_base[b] + value_idx[a, j]
                        span_start[p, j] = src_offs[s]
                        span_len[p, j] = src_offs[s + 1] - src_offs[s]
                if r >= 0:  # a left-out item writes nothing
                    for j in range(m):
                        if not present[j]:
                            span_len[p, j] = 0
                p += 1
        for j in range(m):
            i = i0 + j
            line_offs[i] = pos
            end = pos + indent[i]
            while pos < end:
                pos = _copy(out, pos, src, src_offs[SPACES], min(16, end - pos))
            if views:  # a string view: 12 bytes inline, else (buffer, offset) of name_data
                length = name_views[i, 0]
                if length > 12:
                    pos = _copy(out, end, name_data, name_base[name_views[i, 2]] + name_views[i, 3], length)
                else:
                    pos = _copy(out, end, name_inline, 16 * i + 4, length)
            else:
                pos = _copy(out, end, name_data, name_offs[i], name_offs[i + 1] - name_offs[i])
            pos = _put(out, _put(out, pos, 32), 40)  # " ("
            for q in range(p):
                pos = _copy(out, pos, src, span_start[q, j], span_len[q, j])
            pos = _put(out, pos, 41)  # ")"
            if tail_row >= 0 and row_valid[tail_row, i]:
                pos = _copy(out, pos, src, row_offs[tail_row, i], row_offs[tail_row, i + 1] - row_offs[tail_row, i])
            if newline:
                pos = _put(out, pos, 10)
    line_offs[n] = pos
    return pos

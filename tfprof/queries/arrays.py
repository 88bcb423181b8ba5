"""Array helpers shared by the views and the indexes, free of polars: the indexes are built at
ingest, in a process that need not load it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit


def in_id_order(nodes: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """``nodes`` (a table with a ``node_id`` column) in node-id order, and its ids: a store
    keeps them so, a profile built in memory may not."""
    ids = nodes.column("node_id").to_numpy()
    if len(ids) > 1 and (np.diff(ids) <= 0).any():
        nodes = nodes.take(np.argsort(ids, kind="stable"))
        ids = nodes.column("node_id").to_numpy()
    return nodes, ids


def rows_of(ids: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Each of ``want``'s row in the sorted ``ids``; -1 where it has none."""
    if not len(ids):
        return np.full(len(want), -1, np.int64)
    if ids[-1] - ids[0] == len(ids) - 1:  # consecutive ids (tfprof numbers its nodes 0..n-1)
        at = np.subtract(want, ids[0], dtype=np.int64)
        if len(at) and (at.min() < 0 or at.max() >= len(ids)):
            at[(at < 0) | (at >= len(ids))] = -1
        return at
    at = np.minimum(np.searchsorted(ids, want), len(ids) - 1)
    return np.where(ids[at] == want, at, -1)


@njit(cache=True, nogil=True)
def grow(a, size):  # pragma: no cover - numba
    """``a`` copied into a new array of ``size`` elements (a growing buffer in a kernel)."""
    out = np.empty(size, a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True, nogil=True)
def tree_order(dparent_rows: np.ndarray):  # pragma: no cover - numba
    """Display order of rows whose siblings are already in display order: a DFS from the root.

    ``dparent_rows[i]`` is the row of row i's displayed parent (-1 for the root). Returns the
    rows in pre-order and each one's level (1 = a child of the root).
    """
    n = dparent_rows.shape[0]
    counts = np.zeros(n + 2, np.int64)  # slot 0: root's children, slot r+1: children of row r
    for i in range(n):
        counts[dparent_rows[i] + 2] += 1
    starts = np.cumsum(counts)
    fill = starts.copy()
    children = np.empty(n, np.int64)
    for i in range(n):  # a counting sort keeps each parent's children in their row order
        slot = dparent_rows[i] + 1
        children[fill[slot]] = i
        fill[slot] += 1
    order = np.empty(n, np.int64)
    level = np.empty(n, np.int64)
    stack = np.empty(n + 1, np.int64)
    slevel = np.empty(n + 1, np.int64)
    top = 0
    for c in range(starts[1] - 1, starts[0] - 1, -1):
        stack[top] = children[c]
        slevel[top] = 1
        top += 1
    k = 0
    while top > 0:
        top -= 1
        i = stack[top]
        lv = slevel[top]
        order[k] = i
        level[k] = lv
        k += 1
        for c in range(starts[i + 2] - 1, starts[i + 1] - 1, -1):
            stack[top] = children[c]
            slevel[top] = lv + 1
            top += 1
    return order, level


def string_parts(strings: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """The offsets (int64, one more than the strings) and bytes of a string column, for the
    kernels; a null is the empty string. Only 32-bit offsets are copied (widened)."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    if not (pa.types.is_string(strings.type) or pa.types.is_large_string(strings.type)):
        strings = strings.cast(pa.large_string())
    if strings.null_count:
        strings = pc.fill_null(strings, "")
    _, offsets, data = strings.buffers()
    width = 4 if pa.types.is_string(strings.type) else 8
    offsets = np.frombuffer(offsets, np.int32 if width == 4 else np.int64, count=len(strings) + 1,
                            offset=strings.offset * width).astype(np.int64)
    data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return offsets, data


@njit(cache=True, nogil=True)
def str_hash(data, start, length):  # pragma: no cover - numba
    """A 64-bit hash (FNV-1a, folded) of ``data[start:start + length]``."""
    h = np.uint64(0xCBF29CE484222325)
    for i in range(start, start + length):
        h = (h ^ np.uint64(data[i])) * np.uint64(0x100000001B3)
    return h ^ (h >> np.uint64(31))


@njit(cache=True, nogil=True)
def slot_of(h, cap):  # pragma: no cover - numba
    """Where a 64-bit hash starts probing in a table of ``cap`` slots (a power of two)."""
    return np.int64(h & np.uint64(cap - 1))


@njit(cache=True, nogil=True)
def rehash(hashes, m, cap):  # pragma: no cover - numba
    """An open-addressing table of ``cap`` slots holding entries 0..m-1 by their 64-bit
    ``hashes``, each in the first free slot from its own on (linear probing); -1 is empty."""
    table = np.full(cap, -1, np.int32)
    for e in range(m):
        slot = slot_of(hashes[e], cap)
        while table[slot] >= 0:
            slot = (slot + 1) & (cap - 1)
        table[slot] = e
    return table


@njit(cache=True, nogil=True)
def make_room(table, hashes, n, cap):  # pragma: no cover - numba
    """``table`` and its size, doubled and rebuilt (``rehash``) once ``n`` entries fill more
    than half of it."""
    if 2 * n > cap:
        cap *= 2
        table = rehash(hashes, n, cap)
    return table, cap


@njit(cache=True, nogil=True)
def str_equal(a_data, a, b_data, b, length):  # pragma: no cover - numba
    """Whether ``a_data[a:a + length]`` and ``b_data[b:b + length]`` hold the same bytes."""
    for i in range(length):
        if a_data[a + i] != b_data[b + i]:
            return False
    return True


def span_strings(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.LargeStringArray:
    """The byte spans ``data[starts[i]:ends[i]]`` as a string column (spans of UTF-8 text cut at
    ASCII bytes stay UTF-8)."""
    offsets, out = _gather_spans(data, starts, ends)
    return pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(out))


@njit(cache=True, nogil=True)
def _gather_spans(data, starts, ends):  # pragma: no cover - numba
    """The byte spans ``data[starts[i]:ends[i]]`` one after the other: int64 offsets and bytes."""
    n = starts.shape[0]
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + ends[i] - starts[i]
    out = np.empty(max(offsets[n], 1), np.uint8)
    for i in range(n):
        o = offsets[i]
        for k in range(starts[i], ends[i]):
            out[o + k - starts[i]] = data[k]
    return offsets, out

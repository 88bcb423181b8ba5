"""Array helpers shared by the views and the indexes, free of polars: the indexes are built at
ingest, in a process that need not load it."""

from __future__ import annotations

import numpy as np
from numba import njit


def rows_of(ids: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Each of ``want``'s row in the sorted ``ids``; -1 where it has none."""
    if not len(ids):
        return np.full(len(want), -1, np.int64)
    if ids[-1] - ids[0] == len(ids) - 1:  # consecutive ids (tfprof numbers its nodes 0..n-1)
        at = want - ids[0]
        return np.where((at >= 0) & (at < len(ids)), at, -1)
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

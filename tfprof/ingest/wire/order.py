"""Map semantics for the fill kernel: entries in key order, the last of equal keys kept.

Protobuf keeps the last entry of a repeated map key, and the tables list a node's map entries
by key; TensorFlow's C++ writes maps in hash order. Nothing here allocates: these run for every
node and exec record, on the caller's scratch arrays.
"""

from __future__ import annotations

from numba import njit

from tfprof.ingest.wire.fields import bytes_eq, bytes_lt


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
def attr_order(buf, ks, ke, n, order):
    """Attr entries ordered by key bytes (stable), keeping the last of equal keys, in ``order[:m]``;
    returns m."""
    for x in range(n):
        order[x] = x
    for x in range(1, n):
        y = x
        while y > 0 and bytes_lt(buf, ks[order[y]], ke[order[y]] - ks[order[y]],
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
            if ke[a] - ks[a] == ke[b] - ks[b] and bytes_eq(buf, ks[a], buf, ks[b], ke[a] - ks[a]):
                continue
        order[m] = order[x]
        m += 1
    return m


@njit(cache=True, _nrt=False, inline="always")
def map_order(keys, n, order, tmp):
    """``_keep_last_sorted`` with the usual map of at most one entry done in line."""
    if n <= 1:
        order[0] = 0
        return n
    return _keep_last_sorted(keys, n, order, tmp)

"""Which span encloses each event of a trace: the parent of every event on its thread, by time.

A trace's spans on one thread nest (a Python frame holds a module's span, which holds an op's,
which holds the ops it calls); instants (memory events, flow ends) sit inside spans. Sorted by
(thread, start, longest first), one pass with a stack finds each event's innermost enclosing span.
``parents`` runs that pass as a numba kernel on the kernels engine and as plain Python on the
reference engine (small traces, before the kernels are compiled); both give the same array.
"""

from __future__ import annotations

import numpy as np

from tfprof import kernels


def _parents_py(thread: np.ndarray, start: np.ndarray, end: np.ndarray, span: np.ndarray) -> np.ndarray:
    """Parent position (in the given order) of each event, -1 for none. The input is sorted by
    thread, then start ascending, then end descending; only spans (``span``) can be parents. A span
    that overlaps its predecessor without ending inside it is not its child."""
    n = len(start)
    out = np.full(n, -1, dtype=np.int64)
    stack = np.empty(n, dtype=np.int64)
    top = 0
    for i in range(n):
        while top > 0:
            j = stack[top - 1]
            if thread[j] == thread[i] and end[i] <= end[j] and start[i] >= start[j]:
                break
            top -= 1
        if top > 0:
            out[i] = stack[top - 1]
        if span[i]:
            stack[top] = i
            top += 1
    return out




def _longest_first_py(key: np.ndarray, neg_end: np.ndarray, order: np.ndarray) -> None:
    """Within each run of ``order`` (a stable sort by ``key``) that shares a key, the events put
    in ``neg_end`` order, stably, in place: a short run by insertion, a long one by merge sort."""
    n = len(order)
    a = 0
    while a < n:
        b = a + 1
        while b < n and key[order[b]] == key[order[a]]:
            b += 1
        if b - a > 32:
            run = order[a:b].copy()
            order[a:b] = run[np.argsort(neg_end[run], kind="mergesort")]
        else:
            for i in range(a + 1, b):
                v = order[i]
                j = i - 1
                while j >= a and neg_end[order[j]] > neg_end[v]:
                    order[j + 1] = order[j]
                    j -= 1
                order[j + 1] = v
        a = b


def order(thread: np.ndarray, start: np.ndarray, end: np.ndarray, event_id: np.ndarray) -> np.ndarray:
    """The positions of the events in (thread, start, end descending, event_id) order, the order
    ``parents`` needs, ties in the given order: numpy's ``lexsort`` over the four keys; on the
    kernels engine, when the ids already ascend and (thread, start) fits one int64, a stable
    sort of that one key (the events mostly come in time order already, which it is quick on)
    and a pass that orders the events sharing a (thread, start) longest first."""
    neg_end = -end
    span = int(start.max(initial=0)) - int(start.min(initial=0)) + 1
    fits = len(start) > 0 and (int(thread.max()) + 1) * span < 2**62 and int(thread.min()) >= 0
    if not (kernels.enabled() and fits and bool((np.diff(event_id) >= 0).all())):
        return np.lexsort((event_id, neg_end, start, thread))
    key = thread.astype(np.int64) * span + (start - start.min())
    out = np.argsort(key, kind="stable")
    kernels.compiled(_longest_first_py)(key, np.ascontiguousarray(neg_end, dtype=np.int64), out)
    return out


def parents(thread: np.ndarray, start: np.ndarray, end: np.ndarray, span: np.ndarray) -> np.ndarray:
    """The innermost span enclosing each event on the same thread, as a position into the arrays
    (-1: none). The arrays must be sorted as ``_parents_py`` says."""
    args = (
        np.ascontiguousarray(thread, dtype=np.int64),
        np.ascontiguousarray(start, dtype=np.int64),
        np.ascontiguousarray(end, dtype=np.int64),
        np.ascontiguousarray(span, dtype=np.bool_),
    )
    if kernels.enabled() and len(start) > 0:
        return kernels.compiled(_parents_py)(*args)
    return _parents_py(*args)


def _nearest_py(parent: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``nearest`` in one forward pass: a parent comes before its children in ``parents``' order,
    so its own answer is known when a child asks."""
    out = np.full(len(parent), -1, dtype=np.int64)
    for i in range(len(parent)):
        p = parent[i]
        if p >= 0:
            out[i] = p if wanted[p] else out[p]
    return out


def nearest(parent: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each event, its nearest ancestor (parent, grandparent, …) for which ``wanted`` holds;
    -1 for none. ``parent`` is ``parents``' answer, in its order (a parent before its children):
    one pass on the kernels engine, whole-array steps (one per level of nesting) on the reference."""
    if kernels.enabled() and len(parent) > 0:
        return kernels.compiled(_nearest_py)(np.ascontiguousarray(parent, dtype=np.int64),
                                             np.ascontiguousarray(wanted, dtype=np.bool_))
    out = parent.copy()
    todo = out >= 0
    todo[todo] = ~wanted[out[todo]]
    while todo.any():
        out[todo] = parent[out[todo]]
        todo &= out >= 0
        todo[todo] = ~wanted[out[todo]]
    return out

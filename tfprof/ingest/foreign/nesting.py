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

"""The scope tree's shape
(docs/TFPROF_BEHAVIOUR.md, 'Scope view'), an index: graph nodes plus synthetic parents for missing
name prefixes, children in name order, laid out in pre-order."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from tfprof.queries.arrays import (
    grow,
    make_room,
    slot_of,
    span_strings,
    str_equal,
    str_hash,
    tree_order,
)
from tfprof.queries.indexes.names import name_order

if TYPE_CHECKING:
    from tfprof.profile import Profile


def scope_layout(prof: Profile) -> dict[str, pa.Table]:
    """The index of the scope tree's shape: ``layout`` (see ``layout``)."""
    return {"layout": layout(prof)}


def layout(prof: Profile) -> pa.Table:
    """The scope tree in pre-order (children by name): ``pos``, ``parent``, ``name``, ``node_id``
    (null for a synthetic parent), ``name_rank`` (names as sortable integers).

    One kernel finds every name's parent (``_scope_parents``), creating the missing name
    prefixes; one string sort ranks the names; the pre-order follows from the parents and ranks.
    """
    ids, _, offsets, data = name_order(prof)  # a node without a name is named ""
    src, length, parent = _scope_parents(offsets, data)
    all_names = span_strings(data, offsets[src], offsets[src] + length)
    by_name = pc.sort_indices(all_names).to_numpy()  # byte order, as tfprof compares names
    rank = np.empty(len(src), np.int64)
    rank[by_name] = np.arange(len(src))
    # rows in name order: a row's parent row, then the pre-order of those rows (siblings by name)
    parent_rows = np.where(parent >= 0, rank[np.maximum(parent, 0)], -1)[by_name]
    order, _ = tree_order(parent_rows)
    entry = by_name[order]  # the entry at each position
    pos = np.empty(len(src), np.int64)
    pos[entry] = np.arange(len(src))
    synthetic = entry >= len(ids)
    node_id = np.zeros(len(src), np.int64)
    node_id[~synthetic] = ids[entry[~synthetic]]
    return pa.table({
        "pos": np.arange(len(src)),
        "parent": np.where(parent[entry] >= 0, pos[np.maximum(parent[entry], 0)], -1),
        "name": all_names.take(entry),
        "node_id": pa.array(node_id, mask=synthetic),
        "name_rank": order + 1,
    })


@njit(cache=True, nogil=True)
def _scope_parents(offsets, data):  # pragma: no cover - numba
    """The scope tree of names ``data[offsets[i]:offsets[i + 1]]``: entries 0..n-1 are the
    names, later entries the missing prefixes before a ``/`` (synthetic parents). Per entry:
    the name it is a prefix of, its length, and its parent entry (-1 at the top).

    A name's parent is the text before its last ``/``, cut as tfprof cuts it (``a//b`` has
    parent ``a/``). Entries are found by their text in an open-addressing hash table; each
    name walks up its prefixes only until one already exists. Of equal names, the first one
    is the parent of the others' children.
    """
    n = offsets.shape[0] - 1
    size = max(16, n + n // 2)
    src = np.empty(size, np.int64)
    length = np.empty(size, np.int64)
    hashes = np.empty(size, np.uint64)  # each entry's hash, for growing the table
    cap = 16
    while cap < 2 * size:
        cap *= 2
    table = np.full(cap, -1, np.int32)  # entry numbers
    for i in range(n):  # every name first: a name may be another's parent
        src[i] = i
        length[i] = offsets[i + 1] - offsets[i]
        hashes[i] = str_hash(data, offsets[i], length[i])
        slot = slot_of(hashes[i], cap)
        while table[slot] >= 0:
            e = table[slot]
            if length[e] == length[i] and str_equal(data, offsets[src[e]], data, offsets[i], length[i]):
                break
            slot = (slot + 1) & (cap - 1)
        if table[slot] < 0:
            table[slot] = i
    m = n
    parent = np.full(size, -1, np.int64)
    for i in range(n):
        cur = i
        while True:
            start = offsets[src[cur]]
            cut = length[cur] - 1
            while cut >= 0 and data[start + cut] != 47:  # '/'
                cut -= 1
            if cut < 0:
                break  # a top-level name
            h = str_hash(data, start, cut)
            slot = slot_of(h, cap)
            found = -1
            while table[slot] >= 0:
                e = table[slot]
                if length[e] == cut and str_equal(data, offsets[src[e]], data, start, cut):
                    found = e
                    break
                slot = (slot + 1) & (cap - 1)
            if found >= 0:
                parent[cur] = found
                break
            if m == size:  # a new synthetic parent
                size *= 2
                src, length, parent, hashes = grow(src, size), grow(length, size), grow(parent, size), grow(hashes, size)
                parent[m:] = -1
            src[m], length[m], hashes[m] = src[cur], cut, h
            table[slot] = m
            parent[cur] = m
            cur = m
            m += 1
            table, cap = make_room(table, hashes, m, cap)
    return src[:m].copy(), length[:m].copy(), parent[:m].copy()

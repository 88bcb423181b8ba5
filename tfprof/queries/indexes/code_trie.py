"""The code view's call-stack trie (docs/TFPROF_BEHAVIOUR.md, 'Code view'), an index.

Each trace frame reads ``<file basename>:<line>:<function>`` (a long function name cut to 17
characters and ``...``). A node's path is its traces from the outermost call in; a gradient
node takes its forward op's path with ``" (gradient)"`` copies of the traces. Each trie node is
a distinct path prefix; children are created in tfprof's order: the forward nodes by name,
then the gradient paths by their forward op's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from tfprof.errors import TfprofError
from tfprof.queries.arrays import (
    grow,
    make_room,
    rehash,
    rows_of,
    slot_of,
    span_strings,
    str_equal,
    str_hash,
    string_parts,
)
from tfprof.queries.indexes.names import name_order

if TYPE_CHECKING:
    from tfprof.profile import Profile

GRADIENT_SUFFIX = " (gradient)"


class NoCodeTraces(TfprofError):
    """The profile has no code traces (no op log with traces was given)."""


def trace_strings(file: pa.Array, lineno: pa.Array, function: pa.Array) -> pa.Array:
    """tfprof's short form of each frame (docs/TFPROF_BEHAVIOUR.md, 'Trace strings')."""
    function = function.cast(pa.string())
    short = pc.if_else(
        pc.less(pc.binary_length(function), 20), function,
        pc.binary_join_element_wise(pc.utf8_slice_codeunits(function, 0, 17), "...", ""),
    )
    base = pc.replace_substring_regex(file.cast(pa.string()), "^.*/", "")
    return pc.binary_join_element_wise(base, lineno.cast(pa.string()), short, ":")


def forward_names(names: pa.Array | pa.ChunkedArray) -> pa.Array:
    """For gradient nodes, the forward op name between `gradients/` and `_grad/`; else null.

    tfprof (tfprof_code.cc IsGradNode) takes the text after the first ``gradients/`` up to the
    first ``_grad/``; when ``_grad/`` comes first its unsigned length wraps and it takes the rest
    of the name — reproduced.
    """
    offsets, data = string_parts(names)
    start, end = _forward_spans(offsets, data, np.arange(len(names)))
    grad = start >= 0
    found = span_strings(data, start[grad], end[grad])
    return pc.replace_with_mask(pa.nulls(len(names), pa.large_string()), pa.array(grad), found).cast(pa.string())


_GRADIENTS = np.frombuffer(b"gradients/", np.uint8)
_GRAD = np.frombuffer(b"_grad/", np.uint8)


@njit(cache=True, nogil=True)
def _find(data, start, end, pattern):  # pragma: no cover - numba
    """The first position of ``pattern`` in ``data[start:end]``, or -1."""
    m = pattern.shape[0]
    for i in range(start, end - m + 1):
        if data[i] == pattern[0] and str_equal(data, i, pattern, 0, m):
            return i
    return -1


@njit(cache=True, nogil=True)
def _forward_spans(offsets, data, rows):  # pragma: no cover - numba
    """Per name ``rows[k]``: the bytes ``[start, end)`` of its forward op name (``forward_names``),
    or start -1 for a name that is no gradient node's."""
    n = rows.shape[0]
    start = np.full(n, -1, np.int64)
    end = np.zeros(n, np.int64)
    for k in range(n):
        a, b = offsets[rows[k]], offsets[rows[k] + 1]
        g = _find(data, a, b, _GRADIENTS)
        if g < 0:
            continue
        s = _find(data, a, b, _GRAD)
        if s < 0:
            continue
        head = g + _GRADIENTS.shape[0]
        if s < g:  # the wrapped length: the rest of the name
            start[k], end[k] = head, b
        elif s > head:  # ("_grad/" cannot start inside "gradients/"); an empty name is none
            start[k], end[k] = head, s
    return start, end


@njit(cache=True, nogil=True)
def _match_forward(offsets, data, rows, start, end):  # pragma: no cover - numba
    """Per name ``rows[k]`` with a forward op name (``start[k] >= 0``): the first k' whose
    name is not a gradient's and equals it, or -1; -2 for the others."""
    n = rows.shape[0]
    cap = 16
    while cap < 2 * n:
        cap *= 2
    table = np.full(cap, -1, np.int64)
    for k in range(n):  # the forward names (the first of equal ones)
        if start[k] >= 0:
            continue
        a = offsets[rows[k]]
        size = offsets[rows[k] + 1] - a
        slot = slot_of(str_hash(data, a, size), cap)
        while table[slot] >= 0:
            j = table[slot]
            b = offsets[rows[j]]
            if offsets[rows[j] + 1] - b == size and str_equal(data, a, data, b, size):
                break
            slot = (slot + 1) & (cap - 1)
        if table[slot] < 0:
            table[slot] = k
    match = np.full(n, -2, np.int64)
    for k in range(n):
        if start[k] < 0:
            continue
        size = end[k] - start[k]
        slot = slot_of(str_hash(data, start[k], size), cap)
        match[k] = -1
        while table[slot] >= 0:
            j = table[slot]
            b = offsets[rows[j]]
            if offsets[rows[j] + 1] - b == size and str_equal(data, start[k], data, b, size):
                match[k] = j
                break
            slot = (slot + 1) & (cap - 1)
    return match


def code_trie_index(prof: Profile) -> dict[str, pa.Table] | None:
    """``static_trie``, or None for a profile without code traces (the index builder)."""
    try:
        return static_trie(prof)
    except NoCodeTraces:
        return None


def static_trie(prof: Profile) -> dict[str, pa.Table]:
    """The call-stack trie of a profile (it depends on no option, so stores keep it as an
    index): ``trie`` (trie nodes in pre-order: ``parent``, ``label``), ``labels`` (``trace``
    text and ``name_rank`` per label), ``leaves`` (each member node's leaf position ``tid``)
    and ``unmatched`` (one row: gradient groups with no forward node)."""
    frames = prof.columns("code_frames", ["node_id", "depth"])
    if frames.num_rows == 0:
        raise NoCodeTraces("No code trace information")
    ids, depths = frames.column("node_id").to_numpy(), frames.column("depth").to_numpy()
    del frames
    order = None
    if not _sorted_frames(ids, depths):  # stores keep them sorted (the schema's sort key)
        order = np.lexsort((depths, ids))
        ids = ids[order]
    del depths
    # Trace strings are built once per distinct (file, line, function) — found by a hash over
    # the dictionary codes, not by comparing strings — then carried as ids (``code``), numbered
    # in string order; the gradient copy of trace c is c + len(names). One column is read at a
    # time: a large profile has tens of millions of frames.
    file_code, file_values = _coded(prof, "file", order)
    function_code, function_values = _coded(prof, "function", order)
    line = prof.columns("code_frames", ["lineno"]).column("lineno").to_numpy()
    if order is not None:
        line = line[order]
    del order
    triple, first_row = _intern_triples(file_code, line, function_code)
    traces = trace_strings(file_values.take(file_code[first_row]), pa.array(line[first_row]),
                           function_values.take(function_code[first_row]))
    del file_code, line, function_code
    names = pc.unique(traces)
    names = names.take(pc.sort_indices(names))
    codes = pc.index_in(traces, value_set=names).to_numpy().astype(np.int32)[triple]
    del triple

    # Members and the node whose frames make their path: forward nodes walk their own frames
    # (phase 0, created in name order); a gradient node walks its forward op's frames with the
    # " (gradient)" copies of the traces (phase 1, created in the forward name's order).
    all_ids, by_name, offsets, data = name_order(prof)
    first = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))  # each node's first frame
    uniq = ids[first]
    rank = np.flatnonzero(rows_of(uniq, all_ids[by_name]) >= 0)
    traced = by_name[rank]  # the rows of the nodes with frames, by name; rank: their place
    node_id = all_ids[traced]
    del all_ids
    start, end = _forward_spans(offsets, data, traced)
    match = _match_forward(offsets, data, traced, start, end)  # a gradient's forward node
    is_fwd = start < 0
    matched = match >= 0
    lost = ~is_fwd & ~matched
    missing = pc.count_distinct(span_strings(data, start[lost], end[lost])).as_py()
    del offsets, data
    fwd_ids = node_id[is_fwd]
    member = np.concatenate([fwd_ids, node_id[matched]])
    src = np.concatenate([fwd_ids, node_id[match[matched]]])
    offset = np.concatenate([np.zeros(len(fwd_ids), np.int32), np.full(int(matched.sum()), len(names), np.int32)])
    # A gradient group sorts by its forward name, which is its forward node's name: its place
    # in name order.
    key = np.concatenate([rank[is_fwd], (1 << 40) + rank[match[matched]]])
    # Members go in creation-key order, so a trie node's creator is the first member through it
    # and siblings are created in the order tfprof sorts them.
    order = np.argsort(key, kind="stable")
    member, src, offset = member[order], src[order], offset[order]
    at = np.searchsorted(uniq, src)  # a member's path: its source's frames
    ends = np.append(first[1:], ids.shape[0])
    del ids
    parent, code, leaf = _build_trie(first[at].astype(np.int64), ends[at].astype(np.int64), codes, offset)
    del codes
    pos = _preorder(parent)  # children in creation order
    out_parent, out_label = _in_preorder(pos, parent, code)
    del parent, code
    labels = pa.concat_arrays([names, pc.binary_join_element_wise(names, GRADIENT_SUFFIX, "")])
    at_leaf = leaf >= 0
    return {
        # Trie nodes in pre-order (the row is the node's position): parent position, label.
        "trie": pa.table({"parent": out_parent, "label": out_label}),
        # Labels: the trace text and its rank among all labels (sorting siblings by name).
        "labels": pa.table({
            "trace": labels,
            "name_rank": pc.rank(labels, sort_keys="ascending", tiebreaker="dense").cast(pa.int64()),
        }),
        "leaves": pa.table({"member": member[at_leaf], "tid": pos[leaf[at_leaf]]}),
        "unmatched": pa.table({"gradient_groups": pa.array([missing], pa.int64())}),
    }


def _coded(prof: Profile, column: str, order: np.ndarray | None) -> tuple[np.ndarray, pa.Array]:
    """Column ``column`` of the code frames as dictionary codes (in ``order``, if given) and
    the dictionary's values."""
    values = prof.columns("code_frames", [column]).column(column)
    if not pa.types.is_dictionary(values.type):
        values = pc.dictionary_encode(values)
    values = values.unify_dictionaries()  # every chunk of a store has a dictionary of its own
    if not values.num_chunks:
        return np.zeros(0, np.int32), pa.array([], pa.string())
    codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in values.chunks])
    return (codes if order is None else codes[order]), values.chunks[0].dictionary


@njit(cache=True, nogil=True)
def _sorted_frames(ids, depths):  # pragma: no cover - numba
    for i in range(1, ids.shape[0]):
        if ids[i] < ids[i - 1] or (ids[i] == ids[i - 1] and depths[i] <= depths[i - 1]):
            return False
    return True


@njit(cache=True, nogil=True)
def _mix3(a, b, c):  # pragma: no cover - numba
    """A 64-bit hash of three integers."""
    h = (np.uint64(a + 1) * np.uint64(0x9E3779B97F4A7C15)) ^ (np.uint64(b) * np.uint64(0xBF58476D1CE4E5B9))
    h ^= np.uint64(c) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(29))


@njit(cache=True, nogil=True)
def _intern_triples(f, line, g):  # pragma: no cover - numba
    """Number the distinct (f, line, g) rows in order of first appearance: per row its number,
    and per number its first row."""
    n = f.shape[0]
    cap = 1 << 10
    table = np.full(cap, -1, np.int32)  # number of the triple in a slot
    first = np.empty(cap // 2, np.int64)
    hashes = np.empty(cap // 2, np.uint64)
    out = np.empty(n, np.int32)
    k = 0
    for i in range(n):
        h = _mix3(np.int64(f[i]), np.int64(line[i]), np.int64(g[i]))
        s = slot_of(h, cap)
        while True:
            t = table[s]
            if t < 0:
                table[s] = k
                first[k], hashes[k] = i, h
                t = k
                k += 1
                if 2 * k >= cap:  # keep the table at most half full
                    cap *= 2
                    first, hashes = grow(first, cap // 2), grow(hashes, cap // 2)
                    table = rehash(hashes, k, cap)
                break
            r = first[t]
            if f[r] == f[i] and line[r] == line[i] and g[r] == g[i]:
                break
            s = (s + 1) & (cap - 1)
        out[i] = t
    return out, first[:k].copy()


@njit(cache=True, nogil=True)
def _build_trie(lo, hi, codes, offset):  # pragma: no cover - numba
    """Insert member i's path (trace codes ``codes[lo[i]:hi[i]] + offset[i]``) into a trie.

    A trie node is found by (parent node, code) in an open-addressing hash table, so the build
    is one pass over the path rows; the part of a path that repeats the previous member's path
    (members in the same scope share most of their stack) takes that path's nodes without a
    lookup. Nodes are numbered in creation order (a parent before its children). Returns per
    trie node its parent (-1 at the top) and code, and each member's leaf (-1: no path).
    """
    cap = 1 << 16
    table = np.full(cap, -1, np.int32)
    size = 1 << 12
    parent = np.empty(size, np.int32)
    code = np.empty(size, np.int32)
    hashes = np.empty(size, np.uint64)
    n = 0
    leaf = np.full(lo.shape[0], -1, np.int64)
    deepest = 0
    for i in range(lo.shape[0]):
        deepest = max(deepest, hi[i] - lo[i])
    last_code = np.empty(deepest, np.int64)  # the previous member's path: codes and nodes
    last_node = np.empty(deepest, np.int64)
    last_len = 0
    for i in range(lo.shape[0]):
        p = -1
        shared = True
        for d in range(hi[i] - lo[i]):
            c = codes[lo[i] + d] + offset[i]
            if shared and d < last_len and last_code[d] == c:
                p = last_node[d]
                continue
            shared = False
            h = _mix3(np.int64(p), np.int64(c), np.int64(0))
            slot = slot_of(h, cap)
            while True:
                t = table[slot]
                if t < 0:  # a new trie node
                    if n == size:
                        size *= 2
                        parent, code, hashes = grow(parent, size), grow(code, size), grow(hashes, size)
                    parent[n], code[n], hashes[n] = p, c, h
                    table[slot] = n
                    t = n
                    n += 1
                    table, cap = make_room(table, hashes, n, cap)
                    break
                if parent[t] == p and code[t] == c:
                    break
                slot = (slot + 1) & (cap - 1)
            last_code[d], last_node[d] = c, t
            p = t
        last_len = hi[i] - lo[i]
        leaf[i] = p
    return parent[:n].copy(), code[:n].copy(), leaf


@njit(cache=True, nogil=True)
def _preorder(parent):  # pragma: no cover - numba
    """Pre-order position of each node of a forest whose parents precede their children
    (``parent[v] < v``), siblings in number order: subtree sizes, then one pass handing each
    node the next free position under its parent."""
    n = parent.shape[0]
    acc = np.ones(n, np.int64)  # subtree sizes, then each node's next free child position
    for v in range(n - 1, -1, -1):
        if parent[v] >= 0:
            acc[parent[v]] += acc[v]
    pos = np.empty(n, np.int64)
    top = 0
    for v in range(n):
        p = parent[v]
        size = acc[v]
        if p < 0:
            pos[v] = top
            top += size
        else:
            pos[v] = acc[p]
            acc[p] += size
        acc[v] = pos[v] + 1
    return pos


@njit(cache=True, nogil=True)
def _in_preorder(pos, parent, code):  # pragma: no cover - numba
    """The trie's arrays reordered by pre-order position: parent positions and codes."""
    n = pos.shape[0]
    out_parent = np.empty(n, np.int64)
    out_code = np.empty(n, np.int32)
    for v in range(n):
        p = parent[v]
        out_parent[pos[v]] = pos[p] if p >= 0 else -1
        out_code[pos[v]] = code[v]
    return out_parent, out_code

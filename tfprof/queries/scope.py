"""The scope view: nodes arranged by name scope (spec 5.1), as one frame of displayed rows.

``scope(prof, opts)`` returns the displayed tree in display (pre-)order, root first, with
``depth`` (root = 1), ``indent``, ``accounted``, the node's self values and its ``total_*``
values as tfprof prints them. The scope tree (graph nodes plus synthetic parents for missing
name prefixes, children in name order) is laid out as a pre-order forest; Account keeps
accounted nodes and their ancestors; ``tfprof.queries.forest.display`` does the rest.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from tfprof.profile import Profile
from tfprof.queries.forest import display, flags, grow, keep_accounted, tree_order
from tfprof.queries.metrics import attach_details, extras_for, node_frame, node_rows
from tfprof.queries.options import Options
from tfprof.queries.tree import SINGLE_MIN_FILTERS, is_all, matches, should_show
from tfprof.schema import METRICS

ROOT = "_TFProfRoot"
SCOPE_PARENT = "_kTFScopeParent"  # op type of synthetic scope parents (and of the root)


def accounted(frame: pl.DataFrame, opts: Options) -> pl.Expr:
    """ReAccount: `[".*"]` accounts everything, else any op type fully matching any regex."""
    if is_all(opts.account_type_regexes):
        return pl.lit(True)
    return pl.col("op_types").list.eval(matches(pl.element(), opts.account_type_regexes)).list.any()


def scope(prof: Profile, opts: Options) -> pl.DataFrame:
    """The displayed scope tree, root first, in display order."""
    nodes = node_frame(prof, opts.step, extras_for(opts))
    layout = prof.index("scope_layout", scope_layout)["layout"]  # the tree's shape never changes
    # Each tree node's row in `nodes` (node-id order); -1 for synthetic parents. The tree gets
    # the numbers only; what is printed but not computed with is attached to the shown rows.
    row = node_rows(nodes, layout["node_id"])
    values = {}
    for m in (*METRICS, "run_count"):
        v = nodes[m].to_numpy()
        values[m] = np.where(row >= 0, v[np.maximum(row, 0)], 0) if len(v) else np.zeros(len(row), np.int64)
    if is_all(opts.account_type_regexes):
        acc = np.ones(len(row), np.bool_)
    else:
        node_acc = flags(nodes, accounted(nodes, opts))
        parent_acc = flags(pl.DataFrame({"op_types": [[SCOPE_PARENT]]}), accounted(nodes, opts))[0]
        acc = np.where(row >= 0, node_acc[np.maximum(row, 0)] if len(node_acc) else False, parent_acc)
    tree = layout.with_columns(**values, accounted=acc)
    forest = keep_accounted(tree)
    del tree
    root_visits = opts.max_depth >= 1 and not flags(pl.DataFrame({"n": [ROOT]}), matches("n", opts.trim_name_regexes))[0]
    rows, root = display(forest, opts, lambda f: should_show(f, opts, SINGLE_MIN_FILTERS), root_visits=root_visits)
    rows = attach_details(rows, nodes, {"shape": [], "op_types": [SCOPE_PARENT]})
    return with_root(rows, root, SCOPE_PARENT)


def scope_layout(prof: Profile) -> dict[str, pl.DataFrame]:
    """The index of the scope tree's shape: ``layout`` (see ``_layout``)."""
    return {"layout": _layout(prof)}


def _layout(prof: Profile) -> pl.DataFrame:
    """The scope tree in pre-order (children by name): ``pos``, ``parent``, ``name``, ``node_id``
    (null for a synthetic parent), ``name_rank`` (names as sortable integers).

    One kernel finds every name's parent (``_scope_parents``), creating the missing name
    prefixes; one string sort ranks the names; the pre-order follows from the parents and ranks.
    """
    nodes = prof.columns("nodes", ["node_id", "name"])
    names = nodes.column("name").combine_chunks()
    if not (pa.types.is_string(names.type) or pa.types.is_large_string(names.type)):
        names = names.cast(pa.large_string())
    if names.null_count:  # a node without a name is a node named "" (tfprof's empty string)
        names = pc.fill_null(names, "")
    _, offsets, data = names.buffers()
    width = 4 if pa.types.is_string(names.type) else 8  # 32- or 64-bit offsets: only they are widened
    offsets = np.frombuffer(offsets, np.int32 if width == 4 else np.int64, count=len(names) + 1,
                            offset=names.offset * width).astype(np.int64)
    data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    src, length, parent = _scope_parents(offsets, data)
    all_offsets, all_data = _gather_prefixes(offsets, data, src, length)
    all_names = pa.LargeStringArray.from_buffers(len(src), pa.py_buffer(all_offsets), pa.py_buffer(all_data))
    by_name = pc.sort_indices(all_names).to_numpy()  # byte order, as tfprof compares names
    rank = np.empty(len(src), np.int64)
    rank[by_name] = np.arange(len(src))
    # rows in name order: a row's parent row, then the pre-order of those rows (siblings by name)
    parent_rows = np.where(parent >= 0, rank[np.maximum(parent, 0)], -1)[by_name]
    order, _ = tree_order(parent_rows)
    entry = by_name[order]  # the entry at each position
    pos = np.empty(len(src), np.int64)
    pos[entry] = np.arange(len(src))
    synthetic = entry >= len(nodes)
    node_id = np.zeros(len(src), np.int64)
    node_id[~synthetic] = nodes.column("node_id").to_numpy()[entry[~synthetic]]
    return pl.DataFrame({
        "pos": np.arange(len(src)),
        "parent": np.where(parent[entry] >= 0, pos[np.maximum(parent[entry], 0)], -1),
        "name": pl.Series(all_names.take(entry), dtype=pl.String),
        "node_id": pa.array(node_id, mask=synthetic),
        "name_rank": order + 1,
    })


@njit(cache=True)
def _name_hash(data, start, length, cap):  # pragma: no cover - numba
    h = np.uint64(0xCBF29CE484222325)
    for i in range(start, start + length):
        h = (h ^ np.uint64(data[i])) * np.uint64(0x100000001B3)
    h ^= h >> np.uint64(31)
    return np.int64(h & np.uint64(cap - 1))


@njit(cache=True)
def _same(data, a, b, length):  # pragma: no cover - numba
    for i in range(length):
        if data[a + i] != data[b + i]:
            return False
    return True


@njit(cache=True)
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
    cap = 16
    while cap < 2 * size:
        cap *= 2
    table = np.full(cap, -1, np.int32)  # entry numbers
    for i in range(n):  # every name first: a name may be another's parent
        src[i] = i
        length[i] = offsets[i + 1] - offsets[i]
        slot = _name_hash(data, offsets[i], length[i], cap)
        while table[slot] >= 0:
            e = table[slot]
            if length[e] == length[i] and _same(data, offsets[src[e]], offsets[i], length[i]):
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
            slot = _name_hash(data, start, cut, cap)
            found = -1
            while table[slot] >= 0:
                e = table[slot]
                if length[e] == cut and _same(data, offsets[src[e]], start, cut):
                    found = e
                    break
                slot = (slot + 1) & (cap - 1)
            if found >= 0:
                parent[cur] = found
                break
            if m == size:  # a new synthetic parent
                size *= 2
                src, length, parent = grow(src, size), grow(length, size), grow(parent, size)
                parent[m:] = -1
            src[m], length[m] = src[cur], cut
            table[slot] = m
            parent[cur] = m
            cur = m
            m += 1
            if 2 * m > cap:  # keep the table at most half full
                cap *= 2
                table = np.full(cap, -1, np.int32)
                for e in range(m):
                    slot = _name_hash(data, offsets[src[e]], length[e], cap)
                    while table[slot] >= 0:
                        slot = (slot + 1) & (cap - 1)
                    table[slot] = e
    return src[:m].copy(), length[:m].copy(), parent[:m].copy()


@njit(cache=True)
def _gather_prefixes(offsets, data, src, length):  # pragma: no cover - numba
    """The entries' texts (prefixes of names) as one string column: offsets and bytes."""
    m = src.shape[0]
    out_off = np.empty(m + 1, np.int64)
    out_off[0] = 0
    for e in range(m):
        out_off[e + 1] = out_off[e] + length[e]
    out = np.empty(max(out_off[m], 1), np.uint8)
    for e in range(m):
        s = offsets[src[e]]
        o = out_off[e]
        for k in range(length[e]):
            out[o + k] = data[s + k]
    return out_off, out


def warm_up() -> None:
    """Load the scope layout's kernels from numba's cache (they run at ingest)."""
    offsets, data = np.array([0, 3], np.int64), np.frombuffer(b"a/b", np.uint8).copy()
    src, length, _ = _scope_parents(offsets, data)
    _gather_prefixes(offsets, data, src, length)


def with_root(rows: pl.DataFrame, root: dict[str, int], op_type: str) -> pl.DataFrame:
    """The displayed rows under a `_TFProfRoot` row holding the root totals."""
    root_row = pl.DataFrame(
        {
            **root,
            **{m: 0 for m in (*METRICS, "run_count")},
            "name": [ROOT],
            "depth": [1],
            "indent": [0],
            "accounted": [False],
            "shape": [[]],
            "op_types": [[op_type]],
        },
        schema_overrides={"shape": pl.List(pl.Int64), "op_types": pl.List(pl.String)},
    )
    return pl.concat([root_row, rows], how="diagonal_relaxed")

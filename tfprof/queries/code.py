"""The code view: graph nodes arranged by the Python call stacks that created them (spec 5.4).

The call-stack tree is a trie over the op-log traces (``code_frames``), keyed per level by the
trace string ``<file basename>:<line>:<function>``. Gradient nodes are folded onto a parallel
`` (gradient)`` copy of their forward op's stack. Everything is built from whole frames: each
trie node is a distinct path prefix, its children are ordered by creation (tfprof inserts
nodes in name order, then the gradient paths), and the display pass is
``tfprof.queries.forest.display`` in PrintCode mode.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from tfprof.errors import TfprofError
from tfprof.profile import Profile
from tfprof.queries.forest import display, grow, keep_accounted
from tfprof.queries.metrics import attach, extras_for, node_frame, node_numbers
from tfprof.queries.op import member_sets, picked_members
from tfprof.queries.options import Options
from tfprof.queries.scope import ROOT
from tfprof.queries.tree import MULTI_MIN_FILTERS, is_all, should_show
from tfprof.schema import METRICS

GRADIENT_SUFFIX = " (gradient)"


class NoCodeTraces(TfprofError):
    """The profile has no code traces (no op log with traces was given)."""


def trace_strings(frames: pl.LazyFrame) -> pl.LazyFrame:
    """``trace``: tfprof's short form of each frame (spec 5.4.2)."""
    function = pl.col("function").cast(pl.String)
    short = pl.when(function.str.len_bytes() < 20).then(function).otherwise(function.str.head(17) + "...")
    base = pl.col("file").cast(pl.String).str.replace(r"^.*/", "")
    return frames.with_columns(
        pl.concat_str(base, pl.lit(":"), pl.col("lineno").cast(pl.String), pl.lit(":"), short).alias("trace")
    )


def forward_names(names: pl.Expr) -> pl.Expr:
    """For gradient nodes, the forward op name between `gradients/` and `_grad/`; else null.

    tfprof (tfprof_code.cc IsGradNode) takes the text after the first ``gradients/`` up to the
    first ``_grad/``; when ``_grad/`` comes first its unsigned length wraps and it takes the rest
    of the name — reproduced.
    """
    g = names.str.find("gradients/", literal=True)
    s = names.str.find("_grad/", literal=True)
    start = g + len("gradients/")
    length = s - start
    return (
        pl.when(g.is_null() | s.is_null() | (length == 0))
        .then(None)
        .when(length < 0)
        .then(names.str.slice(start))
        .otherwise(names.str.slice(start, length))
    )


def code_tree(prof: Profile, opts: Options, metrics: tuple[str, ...] | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The trie of call stacks and the picked member nodes (each with its trie node ``tid``).

    One row per trie node, in pre-order (``tid`` = ``pos`` = the row), with self values summed
    over its picked member nodes, ``accounted`` and ``parent`` (the parent's ``pos``, -1 at the
    top). The sums are one scatter over the members into per-node arrays: the trie of a large
    profile has millions of nodes, few of them with members. ``metrics`` limits the summed
    columns (default: every metric and ``run_count``)."""
    index = prof.index("code_trie", static_trie)
    trie, labels, leaves = index["trie"], index["labels"], index["leaves"]
    counted = tuple(c for c in (*METRICS, "run_count") if metrics is None or c in metrics)
    # Members attach at the innermost trace of their path (the leaf).
    if metrics is None:
        nodes = node_frame(prof, opts.step, extras_for(opts))
    else:  # a report's members: what it sums, filters on and prints (not every node's strings)
        nodes = attach(prof, node_numbers(prof, opts.step).select("node_id", *counted), extras_for(opts))
        if "device" in opts.select:
            nodes = nodes.join(
                prof.lazy("nodes").select("node_id", pl.col("canonical_device").cast(pl.String).alias("device")).collect(),
                on="node_id", how="left", maintain_order="left",
            )
    members = leaves.join(nodes, left_on="member", right_on="node_id").rename({"member": "node_id"})
    picked = picked_members(members, opts)
    del members
    n = trie.height
    values = np.zeros((len(counted) + 1, n), np.int64)  # + the member count, "definitions"
    member_values = np.empty((len(counted) + 1, picked.height), np.int64)
    for i, c in enumerate(counted):
        member_values[i] = picked[c].to_numpy()
    member_values[len(counted)] = 1
    _scatter_add(picked["tid"].to_numpy().astype(np.int64), member_values, values)
    label = trie["label"].to_numpy()
    pos = np.arange(n, dtype=np.int64)
    frame = pl.DataFrame(
        {
            "tid": pos,
            "pos": pos,
            "parent": trie["parent"],
            "name": _label_names(labels["trace"]).gather(label),  # 4 bytes a node where it can
            "name_rank": labels["name_rank"].to_numpy().astype(np.int32)[label],
            **{c: values[i] for i, c in enumerate(counted)},
            "definitions": values[len(counted)],
            "accounted": (values[len(counted)] > 0) | is_all(opts.account_type_regexes),
        }
    )
    sets = member_sets(opts)
    if sets:  # device / op-type sets: only where the report prints them
        frame = frame.join(picked.group_by("tid").agg(*sets), on="tid", how="left", maintain_order="left")
    return frame, picked


def _label_names(traces: pl.Series) -> pl.Series:
    """The labels as an Enum (with the root's name among its categories), or as strings where
    two labels are equal."""
    values = traces.to_list()
    if len(set(values)) != len(values):
        return traces
    return traces.cast(pl.Enum([*values, *([ROOT] if ROOT not in values else [])]))


@njit(cache=True)
def _scatter_add(at, values, out):  # pragma: no cover - numba
    """``out[:, at[i]] += values[:, i]`` for every i (repeated targets add up)."""
    for j in range(values.shape[0]):
        for i in range(at.shape[0]):
            out[j, at[i]] += values[j, i]


def static_trie(prof: Profile) -> dict[str, pl.DataFrame]:
    """The call-stack trie of a profile (it depends on no option, so stores keep it as an
    index): ``trie`` (trie nodes in pre-order: ``parent``, ``label``), ``labels`` (``trace``
    text and ``name_rank`` per label), ``leaves`` (each member node's leaf position ``tid``)
    and ``unmatched`` (one row: gradient groups with no forward node)."""
    frames = prof.lazy("code_frames").select("node_id", "depth", "file", "lineno", "function").collect()
    if frames.height == 0:
        raise NoCodeTraces("No code trace information")
    ids, depths = frames["node_id"].to_numpy(), frames["depth"].to_numpy()
    if not _sorted_frames(ids, depths):  # stores keep them sorted (the schema's sort key)
        frames = frames.sort("node_id", "depth")
        ids = frames["node_id"].to_numpy()
    del depths
    # Trace strings are built once per distinct (file, line, function) — found by a hash over
    # the categorical codes, not by joining strings — then carried as ids (``code``), numbered
    # in string order; the gradient copy of trace c is c + len(names).
    triple, first_row = _intern_triples(
        frames["file"].to_physical().to_numpy(), frames["lineno"].to_numpy(), frames["function"].to_physical().to_numpy()
    )
    traces = trace_strings(frames.select("file", "lineno", "function")[first_row].lazy()).collect()["trace"]
    del frames
    names = traces.unique().sort().to_frame("trace").with_row_index("code").with_columns(pl.col("code").cast(pl.Int64))
    trace_code = names["code"].to_numpy()[names["trace"].search_sorted(traces)]
    codes = trace_code.astype(np.int32)[triple]
    del triple

    # Members and the node whose frames make their path: forward nodes walk their own frames
    # (phase 0, created in name order); a gradient node walks its forward op's frames with the
    # " (gradient)" copies of the traces (phase 1, created in the forward name's order).
    nodes = prof.lazy("nodes").select("node_id", "name").sort("name").with_row_index("rank").collect()
    first = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))  # each node's first frame
    uniq = ids[first]
    traced = nodes.filter(pl.col("node_id").is_in(pl.Series(uniq).implode())).with_columns(
        forward_names(pl.col("name")).alias("forward"), pl.col("rank").cast(pl.Int64)
    )
    forward = traced.filter(pl.col("forward").is_null())
    grads = traced.filter(pl.col("forward").is_not_null()).join(
        forward.select(pl.col("name").alias("forward"), pl.col("node_id").alias("fwd_id")), on="forward", how="left"
    )
    missing = grads.filter(pl.col("fwd_id").is_null())["forward"].n_unique()
    grad_ranks = grads.select("forward").unique().sort("forward").with_row_index("grank")
    grads = grads.filter(pl.col("fwd_id").is_not_null()).join(grad_ranks, on="forward")
    members = pl.concat(
        [
            forward.select("node_id", pl.col("node_id").alias("src"), pl.lit(0, pl.Int64).alias("offset"),
                           pl.col("rank").alias("key")),
            grads.select("node_id", pl.col("fwd_id").alias("src"), pl.lit(names.height, pl.Int64).alias("offset"),
                         ((1 << 40) + pl.col("grank").cast(pl.Int64)).alias("key")),
        ]
    )
    # Members go in creation-key order, so a trie node's creator is the first member through it
    # and siblings are created in the order tfprof sorts them.
    members = members.sort("key", maintain_order=True)
    at = np.searchsorted(uniq, members["src"].to_numpy())  # a member's path: its source's frames
    ends = np.append(first[1:], ids.shape[0])
    del ids
    parent, code, leaf = _build_trie(
        first[at].astype(np.int64), ends[at].astype(np.int64), codes, members["offset"].to_numpy().astype(np.int32)
    )
    del codes
    pos = _preorder(parent)  # children in creation order
    out_parent, out_label = _in_preorder(pos, parent, code)
    del parent, code
    labels = pl.concat([names, names.select(pl.col("code") + names.height, pl.col("trace") + GRADIENT_SUFFIX)])
    at_leaf = leaf >= 0
    return {
        # Trie nodes in pre-order (the row is the node's position): parent position, label.
        "trie": pl.DataFrame({"parent": out_parent, "label": out_label}),
        # Labels: the trace text and its rank among all labels (sorting siblings by name).
        "labels": labels.select("trace", pl.col("trace").rank("dense").cast(pl.Int64).alias("name_rank")),
        "leaves": pl.DataFrame({"member": members["node_id"].filter(pl.Series(at_leaf)), "tid": pos[leaf[at_leaf]]}),
        "unmatched": pl.DataFrame({"gradient_groups": [missing]}, schema={"gradient_groups": pl.Int64}),
    }


@njit(cache=True)
def _sorted_frames(ids, depths):  # pragma: no cover - numba
    for i in range(1, ids.shape[0]):
        if ids[i] < ids[i - 1] or (ids[i] == ids[i - 1] and depths[i] <= depths[i - 1]):
            return False
    return True


@njit(cache=True)
def _hash3(a, b, c, cap):  # pragma: no cover - numba
    h = (np.uint64(a + 1) * np.uint64(0x9E3779B97F4A7C15)) ^ (np.uint64(b) * np.uint64(0xBF58476D1CE4E5B9))
    h ^= np.uint64(c) * np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(cap - 1))


@njit(cache=True)
def _intern_triples(f, line, g):  # pragma: no cover - numba
    """Number the distinct (f, line, g) rows in order of first appearance: per row its number,
    and per number its first row."""
    n = f.shape[0]
    cap = 1 << 10
    table = np.full(cap, -1, np.int64)  # number of the triple in a slot
    first = np.empty(cap // 2, np.int64)
    out = np.empty(n, np.int32)
    k = 0
    for i in range(n):
        s = _hash3(np.int64(f[i]), np.int64(line[i]), np.int64(g[i]), cap)
        while True:
            t = table[s]
            if t < 0:
                table[s] = k
                first[k] = i
                t = k
                k += 1
                if 2 * k >= cap:  # keep the table at most half full
                    cap *= 2
                    first = grow(first, cap // 2)
                    table = np.full(cap, -1, np.int64)
                    for u in range(k):
                        r = first[u]
                        q = _hash3(np.int64(f[r]), np.int64(line[r]), np.int64(g[r]), cap)
                        while table[q] >= 0:
                            q = (q + 1) & (cap - 1)
                        table[q] = u
                break
            r = first[t]
            if f[r] == f[i] and line[r] == line[i] and g[r] == g[i]:
                break
            s = (s + 1) & (cap - 1)
        out[i] = t
    return out, first[:k].copy()


@njit(cache=True)
def _build_trie(lo, hi, codes, offset):  # pragma: no cover - numba
    """Insert member i's path (trace codes ``codes[lo[i]:hi[i]] + offset[i]``) into a trie.

    A trie node is found by (parent node, code) in an open-addressing hash table, so the build
    is one pass over the path rows. Nodes are numbered in creation order (a parent before its
    children). Returns per trie node its parent (-1 at the top) and code, and each member's
    leaf (-1: no path).
    """
    cap = 1 << 16
    table = np.full(cap, -1, np.int32)
    size = 1 << 12
    parent = np.empty(size, np.int32)
    code = np.empty(size, np.int32)
    n = 0
    leaf = np.full(lo.shape[0], -1, np.int64)
    for i in range(lo.shape[0]):
        p = -1
        for r in range(lo[i], hi[i]):
            c = codes[r] + offset[i]
            slot = _hash3(np.int64(p), np.int64(c), np.int64(0), cap)
            while True:
                t = table[slot]
                if t < 0:  # a new trie node
                    if n == size:
                        size *= 2
                        parent, code = grow(parent, size), grow(code, size)
                    parent[n], code[n] = p, c
                    table[slot] = n
                    t = n
                    n += 1
                    if 2 * n > cap:  # keep the table at most half full
                        cap *= 2
                        table = np.full(cap, -1, np.int32)
                        for u in range(n):
                            s = _hash3(np.int64(parent[u]), np.int64(code[u]), np.int64(0), cap)
                            while table[s] >= 0:
                                s = (s + 1) & (cap - 1)
                            table[s] = u
                    break
                if parent[t] == p and code[t] == c:
                    break
                slot = (slot + 1) & (cap - 1)
            p = t
        leaf[i] = p
    return parent[:n].copy(), code[:n].copy(), leaf


@njit(cache=True)
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


@njit(cache=True)
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


def code(prof: Profile, opts: Options, metrics: tuple[str, ...] | None = None) -> tuple[pl.DataFrame, int, pl.DataFrame]:
    """The displayed code tree (root first), the number of unaccounted gradient groups, and the
    picked member nodes with their trie node ``tid``. With ``metrics``, only those self and
    total columns (what a report prints, sorts and filters on): on a trie of millions of nodes
    the other columns are most of the memory."""
    parts = list(code_tree(prof, opts, metrics))
    members = parts.pop()
    missing = prof.index("code_trie", static_trie)["unmatched"]["gradient_groups"][0]
    unaccounted = int(missing) if parts[0].height else 0
    # A report's rows keep what it prints: name, accounted, the metrics and their totals, the sets.
    # The forest is handed over (no reference kept here), so display can free it as it goes;
    # multi views sort `occurrence` by the node's own member count (tfprof_show_multi.h SortNodes).
    keep = None if metrics is None else ["name", "accounted", "devices", "op_types", *metrics, *("total_" + m for m in metrics)]
    rows, root = display(
        keep_accounted(parts.pop()), opts, lambda f: should_show(f, opts, MULTI_MIN_FILTERS), code_mode=True,
        order_columns={"occurrence": "definitions"}, keep=keep,
    )
    if metrics is None:  # the public rows: names as strings
        rows = rows.with_columns(pl.col("name").cast(pl.String))
    root_row = pl.DataFrame({**root, "name": pl.Series([ROOT]).cast(rows.schema["name"]), "indent": [0], "accounted": [False]})
    return pl.concat([root_row, rows], how="diagonal_relaxed"), unaccounted, members


def warm_up() -> None:
    """Load the code view's compiled kernel (see ``tfprof.queries.forest.warm_up``)."""
    _scatter_add(np.zeros(1, np.int64), np.ones((1, 1), np.int64), np.zeros((1, 1), np.int64))

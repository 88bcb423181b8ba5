"""The graph view: nodes below the nodes that consume them (docs/TFPROF_BEHAVIOUR.md, 'Graph view').

tfprof accounts the graph with one depth-first walk from the graph's roots (nodes nobody
consumes, in name order) along inputs (in input order), visiting each node once: a node shared
by several consumers counts only under the first one reached (docs/TFPROF_BEHAVIOUR.md, 'Graph view'), and
unaccounted nodes are flattened away. That walk is a numba loop over CSR arrays; it yields a
forest in pre-order that ``tfprof.queries.forest.display`` shows like any other tree.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from tfprof.profile import Profile
from tfprof.queries.forest import display, flags
from tfprof.queries.indexes.graph_csr import graph_structure
from tfprof.queries.metrics import DETAILS, attach_details, extras_for, node_frame, with_samples
from tfprof.queries.scope import counted_columns, lean_columns, with_root
from tfprof.queries.spec import TreeSpec, as_spec, sample_names
from tfprof.queries.tree import accounted


@njit(cache=True, nogil=True)
def _account_walk(roots, starts, children, account):  # pragma: no cover - numba
    """tfprof's TFGraph::Account: returns, for accounted nodes reached, their discovery order
    (= forest pre-order) and the nearest accounted ancestor on the walk (-1: top level)."""
    n = account.shape[0]
    visited = np.zeros(n, np.bool_)
    order = np.full(n, -1, np.int64)
    forest_parent = np.full(n, -1, np.int64)
    stack_node = np.empty(n + 1, np.int64)
    stack_next = np.empty(n + 1, np.int64)
    stack_acc = np.empty(n + 1, np.int64)  # the accounted ancestor the node's children attach to
    k = 0
    for r in roots:
        if visited[r]:
            continue
        visited[r] = True
        top = 0
        stack_node[0] = r
        stack_next[0] = starts[r]
        if account[r]:
            forest_parent[r] = -1
            order[r] = k
            k += 1
            stack_acc[0] = r
        else:
            stack_acc[0] = -1
        top = 1
        while top > 0:
            v = stack_node[top - 1]
            i = stack_next[top - 1]
            if i >= starts[v + 1]:
                top -= 1
                continue
            stack_next[top - 1] = i + 1
            c = children[i]
            if visited[c]:
                continue
            visited[c] = True
            acc = stack_acc[top - 1]
            stack_node[top] = c
            stack_next[top] = starts[c]
            if account[c]:
                forest_parent[c] = acc
                order[c] = k
                k += 1
                stack_acc[top] = c
            else:
                stack_acc[top] = acc
            top += 1
    return order, forest_parent


def graph_forest(prof: Profile, spec: TreeSpec, metrics: tuple[str, ...] | None = None) -> pl.DataFrame:
    """Accounted nodes as a forest in pre-order: ``pos``, ``parent``, ``name``, ``node_id``,
    ``name_rank`` and the node's numbers (the printed details are attached after display)."""
    g = {k: f.to_series().to_numpy() for k, f in prof.index("graph_structure", graph_structure).items()}
    # node_frame rows are in node-id order; in name order a node's row number is its name rank
    nodes = with_samples(prof, node_frame(prof, spec.step, extras_for(spec.options)), spec)
    n = nodes.height
    account = flags(nodes, accounted(spec))[g["perm"]]
    order, forest_parent = _account_walk(g["roots"], g["starts"], g["children"], account)
    reached = np.flatnonzero(order >= 0)
    by_pos = np.empty(reached.shape[0], np.int64)  # name-order rows of the forest, in pre-order
    by_pos[order[reached]] = reached  # the walk numbers the reached nodes 0..k-1
    pos_of = np.full(n, -1, np.int64)
    pos_of[by_pos] = np.arange(by_pos.shape[0])
    fp = forest_parent[by_pos]
    kept = pl.exclude(DETAILS) if metrics is None else pl.col("node_id", "name", *counted_columns(spec, metrics),
                                                                 *sample_names(spec))
    numbers = nodes.select(kept)[pl.Series(g["perm"][by_pos])]
    return numbers.with_columns(
        pl.Series("pos", np.arange(by_pos.shape[0])),
        pl.Series("parent", np.where(fp >= 0, pos_of[np.maximum(fp, 0)], -1)),
        pl.Series("name_rank", by_pos),
        pl.lit(True).alias("accounted"),
    )


def graph(prof: Profile, spec: TreeSpec, metrics: tuple[str, ...] | None = None) -> pl.DataFrame:
    """The displayed graph tree, root first, in display order (columns, and ``metrics``, as
    ``scope``'s)."""
    spec = as_spec("graph", spec, prof)
    if metrics is not None:
        keep = lean_columns(spec, counted_columns(spec, metrics))
        rows, root = display(graph_forest(prof, spec, metrics), spec, keep=keep)
        return with_root(rows, root, spec.root_op_type)
    rows, root = display(graph_forest(prof, spec), spec)
    rows = attach_details(rows, node_frame(prof, spec.step, extras_for(spec.options)), {})
    return with_root(rows, root, spec.root_op_type)


def warm_up() -> None:
    """Load the graph walk's compiled kernel (see ``tfprof.queries.forest.warm_up``)."""
    one, starts = np.zeros(1, np.int64), np.zeros(2, np.int64)
    for a in (one, starts):
        a.setflags(write=False)  # as the index's arrays come from polars: read-only
    _account_walk(one, starts, one, np.ones(1, np.bool_))

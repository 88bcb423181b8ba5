"""The scope view: nodes arranged by name scope (docs/TFPROF_BEHAVIOUR.md, 'Scope view'), as one frame of displayed
rows.

``scope(prof, spec)`` returns the displayed tree in display (pre-)order, root first, with
``depth`` (root = 1), ``indent``, ``accounted``, the node's self values and its ``total_*``
values as tfprof prints them. The scope tree (graph nodes plus synthetic parents for missing
name prefixes, children in name order) is laid out as a pre-order forest; Account keeps
accounted nodes and their ancestors; ``tfprof.queries.forest.display`` does the rest.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tfprof.profile import Profile
from tfprof.queries.forest import display, flags, keep_accounted, under_root
from tfprof.queries.indexes.scope_tree import scope_layout
from tfprof.queries.metrics import attach_details, extras_for, node_frame, node_rows, with_samples
from tfprof.queries.spec import ROOT, SCOPE_PARENT, TreeSpec, as_spec, sample_names
from tfprof.queries.tree import accounted
from tfprof.schema.metrics import maxed, ratio_parts, ratios, summed, with_parts


def scope(prof: Profile, spec: TreeSpec, metrics: tuple[str, ...] | None = None) -> pl.DataFrame:
    """The displayed scope tree, root first, in display order (``spec``: a scope-layout spec;
    ``Options`` are read as the scope view's). With ``metrics``, only those self and total
    columns (and the spec's samples) beside ``name``, ``node_id`` and ``accounted``; without,
    every metric and the printed details."""
    spec = as_spec("scope", spec, prof)
    nodes = with_samples(prof, node_frame(prof, spec.step, extras_for(spec.options)), spec)
    layout = prof.index("scope_layout", scope_layout)["layout"]  # the tree's shape never changes
    # Each tree node's row in `nodes` (node-id order); -1 for synthetic parents. The tree gets
    # the numbers only; what is printed but not computed with is attached to the shown rows.
    row = node_rows(nodes, layout["node_id"])
    values = {}
    own = counted_columns(spec, metrics)
    for m in (*own, *sample_names(spec)):
        v = nodes[m].to_numpy()
        values[m] = np.where(row >= 0, v[np.maximum(row, 0)], 0) if len(v) else np.zeros(len(row), np.int64)
    if spec.account is None:
        acc = np.ones(len(row), np.bool_)
    else:
        node_acc = flags(nodes, accounted(spec))
        parent_acc = flags(pl.DataFrame({"op_types": [[SCOPE_PARENT]]}), accounted(spec))[0]
        acc = np.where(row >= 0, node_acc[np.maximum(row, 0)] if len(node_acc) else False, parent_acc)
    tree = layout.with_columns(**values, accounted=acc)
    forest = keep_accounted(tree)
    del tree
    if metrics is not None:
        rows, root = display(forest, spec, keep=lean_columns(spec, own))
        return with_root(rows, root, spec.root_op_type)
    rows, root = display(forest, spec)
    rows = attach_details(rows, nodes, {"shape": [], "op_types": [SCOPE_PARENT]})
    return with_root(rows, root, spec.root_op_type)


def counted_columns(spec: TreeSpec, metrics: tuple[str, ...] | None) -> tuple[str, ...]:
    """The self columns a tree sums: ``metrics`` and what the spec orders and filters on, or all."""
    every = (*summed(), "run_count", *maxed())
    if metrics is None:
        return every
    used = {c.removeprefix("total_") for c in with_parts((*metrics, *spec.order, *(c for c, _ in spec.thresholds)))}
    return tuple(c for c in every if c in used)


def lean_columns(spec: TreeSpec, own: tuple[str, ...]) -> list[str]:
    """The displayed rows' columns of a lean tree (``metrics`` given): the self columns ``own``
    and their totals, the ratios divided from them, the totals of the spec's samples, no printed
    details."""
    shown = (*own, *divided(own))
    return ["name", "node_id", "accounted", *shown, *("total_" + c for c in (*shown, *sample_names(spec)))]


def divided(own: tuple[str, ...]) -> tuple[str, ...]:
    """The ratio metrics' columns a tree summing the self columns ``own`` can divide."""
    return tuple(m.column for m in ratios() if set(ratio_parts(m)) <= set(own))


def with_root(rows: pl.DataFrame, root: dict[str, int], op_type: str) -> pl.DataFrame:
    """The displayed rows under a `_TFProfRoot` row holding the root totals."""
    numbers = {**root, **{m: 0 for m in (*summed(), "run_count", *maxed())}, **{m.column: 0.0 for m in ratios()}}
    # Series of one value each: a frame built from a dict of Python scalars infers every column's
    # type, a few milliseconds for one row.
    root_row = pl.DataFrame(
        [
            *(pl.Series(k, [v], pl.Float64 if isinstance(v, float) else pl.Int64) for k, v in numbers.items()),
            pl.Series("name", [ROOT], pl.String),
            pl.Series("depth", [1], pl.Int64),
            pl.Series("accounted", [False], pl.Boolean),
            pl.Series("shape", [[]], pl.List(pl.Int64)),
            pl.Series("op_types", [[op_type]], pl.List(pl.String)),
        ]
    )
    return under_root(rows, root_row)

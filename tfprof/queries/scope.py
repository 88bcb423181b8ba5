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

from tfprof.profile import Profile
from tfprof.queries.forest import display, flags, keep_accounted
from tfprof.queries.indexes.scope_tree import scope_layout
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


def with_root(rows: pl.DataFrame, root: dict[str, int], op_type: str) -> pl.DataFrame:
    """The displayed rows under a `_TFProfRoot` row holding the root totals."""
    numbers = {**root, **{m: 0 for m in (*METRICS, "run_count")}}
    # Series of one value each: a frame built from a dict of Python scalars infers every column's
    # type, a few milliseconds for one row.
    root_row = pl.DataFrame(
        [
            *(pl.Series(k, [v], pl.Int64) for k, v in numbers.items()),
            pl.Series("name", [ROOT], pl.String),
            pl.Series("depth", [1], pl.Int64),
            pl.Series("indent", [0], pl.Int64),
            pl.Series("accounted", [False], pl.Boolean),
            pl.Series("shape", [[]], pl.List(pl.Int64)),
            pl.Series("op_types", [[op_type]], pl.List(pl.String)),
        ]
    )
    return pl.concat([root_row, rows], how="diagonal_relaxed")

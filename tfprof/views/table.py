"""A view's displayed rows as a public table: one row per printed line, stable column names.

The queries return frames shaped for their renderers (``indent``, ``pos``, ``runs``,
``parameters``, ...). ``view_table`` keeps what a reader of the report needs, under the
names the tables use (``params``, ``run_count``), with self and total side by side:

>>> import tfprof
>>> from tfprof.api import run_view
>>> t = view_table("scope", run_view(tfprof.load(tfprof.sample_path()), "scope", {"max_depth": 1}).frame)
>>> t.columns[:4], t["name"][0], t["depth"][0]
(['name', 'depth', 'node_id', 'accounted'], '_TFProfRoot', 0)
"""

from __future__ import annotations

import polars as pl

from tfprof.schema import METRICS
from tfprof.schema import PUBLIC_NAMES as _RENAMES
from tfprof.schema.metrics import METRIC_LIST, derived, maxed, ratios
from tfprof.views.fields import FIELDS, cells

# Public columns, with their meaning. A view has those its rows carry: node_id only in the
# scope and graph views; definition_count only in op and code; total_run_count and
# total_definition_count not in op. Every metric column is Int64 and never null, but exact
# times (a foreign profile's µs) and ratios, which are Float64.
_SELF: dict[str, str] = derived(lambda: {
    "name": "node name (scope, graph), op type (op) or `file:line:function` (code); the root is `_TFProfRoot`",
    "depth": "nesting level as printed, root 0 (op view: the row's position in the sorted op list, which "
    "max_depth limits)",
    "node_id": "graph node id; null for the root and for name scopes that are not nodes (scope, graph views)",
    "accounted": "whether the row's own values count (tfprof prints `--` for the self value when false)",
    **{m.public_column: m.doc for m in METRIC_LIST},  # the metrics' records (schema.metrics)
    "run_count": "times run (count)",
    "definition_count": "graph nodes aggregated in the row (op, code views; count)",
})
# Each metric is followed by its total (tfprof's total_*: in the op view a cumulative sum): the
# schema's METRICS under their public names, the counts, then the largest-of metrics (their
# totals: the subtree's largest) and the ratios (their totals: the quotient of the parts' totals).
_PAIRED = derived(lambda: (*(_RENAMES.get(m, m) for m in METRICS), "run_count", "definition_count",
                           *maxed(), *(m.column for m in ratios())))
_TOTAL = "total of the subtree (scope, graph, code) or, in the op view, of this row and the accounted rows after it"
COLUMNS: dict[str, str] = derived(lambda: {
    **{c: _SELF[c] for c in ("name", "depth", "node_id", "accounted")},
    **{k: v for m in _PAIRED for k, v in ((m, _SELF[m]), ("total_" + m, f"{_TOTAL}: {_SELF[m]}"))},
})


def _columns_shown(select_name: str) -> tuple[str, ...]:
    """The public metric columns select name ``select_name`` prints on a scope or graph line:
    the values its registry cells read (those of the fields it implies too: ``micros`` prints
    all three times), under their self names."""
    read = (
        p[1].removeprefix("total_")
        for pieces, _ in cells((select_name,), "tree", ())
        for p in pieces
        if p[0] in ("own", "val")
    )
    return tuple(dict.fromkeys(_RENAMES.get(c, c) for c in read))


# The public metric columns each select field shows (with their ``total_`` pairs), read off the
# select-field registry; select names that print no number (device, op_types, input_shapes,
# tensor_value) add no column.
SELECT_COLUMNS: dict[str, tuple[str, ...]] = derived(
    lambda: {name: cols for name in FIELDS if (cols := _columns_shown(name))})


def view_table(layout: str, frame: pl.DataFrame, select: tuple[str, ...] | None = None, *,
               ours: bool = False) -> pl.DataFrame:
    """The public table of the displayed rows (``ViewResult.frame``) of a view of ``layout``
    (``ViewResult.layout``), in display order.

    With ``select`` (tfprof's select names), only the metric columns those fields print are kept,
    beside ``name``, ``depth``, ``node_id`` and ``accounted``; without it, every metric but ours
    (``macs``, registered ones), and with ``ours`` those too where the frame has them."""
    renamed = frame.rename({k: v for k, v in _RENAMES.items() if k in frame.columns})
    if layout == "groups":  # a list: its position
        depth = pl.col("depth")
    else:  # a tree: the printed level
        depth = pl.col("level")
    metrics = [c for c in list(COLUMNS)[4:] if c in renamed.columns]
    out = renamed.with_columns(
        depth.cast(pl.Int64).alias("depth"),
        # the code view's root has no self values; exact times (a foreign profile's µs, floats) stay floats
        *(pl.col(c).cast(pl.Float64 if renamed.schema[c].is_float() else pl.Int64).fill_null(0) for c in metrics),
        pl.col("accounted").fill_null(False),
    )
    if select is None:  # every metric tfprof has; ours (macs, registered ones) only where asked for
        left_out = set() if ours else {c for m in METRIC_LIST if m.ours for c in (m.public_column, "total_" + m.public_column)}
        return out.select(c for c in COLUMNS if c in out.columns and c not in left_out)
    shown = {c for f in select for m in SELECT_COLUMNS.get(f, ()) for c in (m, "total_" + m)}
    return out.select(c for c in COLUMNS if c in out.columns and (c in list(COLUMNS)[:4] or c in shown))

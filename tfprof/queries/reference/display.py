"""The reference backend's display pass over a forest (``layouts.Forest``): Account, subtree
totals, the start/trim/show/hide/min_*/max_depth walk, account_displayed_op_only, and the
order of the printed rows.

The forest's shape lives in its pre-order keys only; ``closure.sql`` turns them into
(ancestor, node) pairs once, and every later step is a join over those pairs
(``account.sql``, ``subtree_totals.sql``, ``display.sql``). Regexes and thresholds become flag
columns here, with polars, before the walk; the printed rows are put in order by ranking
siblings (``display_order.sql``) and keying the printed tree (``path_keys.sql``).
"""

from __future__ import annotations

import polars as pl

from tfprof.queries.reference.layouts import Forest, added, counted, full_match
from tfprof.queries.reference.sql import Sql, long, wide, width
from tfprof.queries.spec import TreeSpec
from tfprof.queries.tree import with_ratios, with_root_ratios
from tfprof.schema.metrics import by_column, maxed


def _totaled() -> list[str]:
    """What the subtree totals add: the forest's added columns, and the node count as a
    metric of 1 a node."""
    return [*added(), "definition_count"]


def _totals(sql: Sql, closure: pl.DataFrame, frame: pl.DataFrame, counted: pl.DataFrame) -> pl.DataFrame:
    """Per node ``id``, the ``total_*`` columns over the nodes of its subtree that are in
    ``counted``: sums, and the largest own value of the ``maxed`` columns."""
    values = long(frame.with_columns(pl.lit(1).alias("definition_count")), _totaled())
    sums = sql.run("subtree_totals", _closure=closure.select("anc", "id"), _values=values,
                   _counted=counted.select("id"))
    totals = wide(sums, _totaled(), "total", prefix="total_")
    if maxed():
        largest = (closure.select("anc", "id").join(counted.select("id"), on="id")
                   .join(frame.select("id", *maxed()), on="id")
                   .group_by("anc").agg(*(pl.col(c).max().alias("total_" + c) for c in maxed()))
                   .rename({"anc": "id"}))
        totals = totals.join(largest, on="id", how="left")
    return totals


def root_totals(frame: pl.DataFrame, extra_count: int = 0) -> dict[str, int]:
    """The root's totals over a forest's rows: sums (largest-of for ``maxed``), and the node count."""
    sums = frame.select(*(pl.col(c).sum().cast(pl.Int64) for c in added()),
                        *(pl.col(c).max().cast(pl.Int64) for c in maxed())).row(0, named=True)
    root = {"total_" + c: int(sums[c] or 0) for c in counted()}
    root["total_definition_count"] = frame.height + extra_count
    return root


def _passes(spec: TreeSpec) -> pl.Expr:
    """ShouldShow but for depth: the thresholds, show_name_regexes and hide_name_regexes."""
    cond = pl.lit(True)
    for column, minimum in spec.thresholds:
        cond = cond & (pl.col(column) >= minimum)
    return cond & full_match("name", spec.show) & ~full_match("name", spec.hide)


def _sort_columns(spec: TreeSpec) -> list[pl.Expr]:
    metric = spec.order[0] if spec.order and spec.order[0] != "name" else None
    return [
        (pl.col(metric) if metric else pl.lit(0)).cast(_sort_type(metric)).alias("sort_metric"),
        (pl.col("name").cast(pl.String) if spec.order == ("name",) else pl.lit("")).alias("sort_name"),
    ]


def _sort_type(column: str | None) -> pl.DataType:
    """A ratio sorts as the float it is; every other metric as an integer."""
    metric = by_column().get(column.removeprefix("total_")) if column else None
    return pl.Float64 if metric is not None and metric.kind == "ratio" else pl.Int64


def flag_columns(spec: TreeSpec) -> list[pl.Expr]:
    """What ``display.sql`` reads of each node beside the closure, from its name and numbers
    (``total_*`` joined on): ``start_hit``, ``trim_hit`` and ``passes``."""
    return [
        (full_match("name", spec.start) if spec.start is not None else pl.lit(False)).alias("start_hit"),
        full_match("name", spec.trim).alias("trim_hit"),
        _passes(spec).alias("passes"),
    ]


def display_params(spec: TreeSpec, code_mode: bool) -> dict[str, object]:
    """``display.sql``'s parameters for ``spec``."""
    return {"match_all": spec.start is None, "max_depth": spec.max_depth, "root_visits": spec.root_visits,
            "code_mode": code_mode}


def show_tree(sql: Sql, forest: Forest, spec: TreeSpec, *, code_mode: bool) -> tuple[pl.DataFrame, dict[str, int]]:
    """The printed rows of ``forest`` in display order (``depth``, ``level``, ``parent_row``, self
    and ``total_*`` columns) and the root's totals."""
    frame, keys = forest.frame, forest.keys
    closure = sql.run("closure", _keys=keys)
    if forest.keep_accounted:
        kept = sql.run("account", _closure=closure, _accounted=frame.select("id", "accounted"))
        frame, keys = frame.join(kept, on="id", how="semi"), keys.join(kept, on="id", how="semi")
        closure = closure.join(kept, on="id", how="semi").join(kept.rename({"id": "anc"}), on="anc", how="semi")
    root = with_root_ratios(root_totals(frame), spec.time_scale)
    frame = with_ratios(frame.join(_totals(sql, closure, frame, frame), on="id", how="left"), spec.time_scale)

    flags = frame.select("id", *flag_columns(spec))
    shown = sql.run("display", display_params(spec, code_mode), _forest=flags, _closure=closure)
    rows = frame.join(shown, on="id")
    if spec.displayed_only:
        rows = rows.drop(*("total_" + c for c in (*_totaled(), *maxed()))).join(
            _totals(sql, closure, rows, shown), on="id", how="left")
        rows = with_ratios(rows, spec.time_scale)
        root = with_root_ratios(root_totals(rows, extra_count=1), spec.time_scale)  # tfprof's root counts itself here

    return in_display_order(sql, rows, keys, spec), root


def in_display_order(sql: Sql, rows: pl.DataFrame, keys: pl.DataFrame, spec: TreeSpec) -> pl.DataFrame:
    """The printed ``rows`` (``display.sql``'s ``depth`` and ``dparent`` joined on) in display
    order, with ``level`` and ``parent_row``: siblings ranked by the order option, the printed
    tree keyed in pre-order. ``keys``: the forest's pre-order keys (of these rows at least)."""
    ranked = sql.run("display_order", _shown=rows.join(keys, on="id").select(
        "id", "dparent", *_sort_columns(spec), "key"))
    placed = sql.run("path_keys", {"width": width(ranked["sib"].max() or 0)}, _tree=ranked)
    rows = rows.join(placed, on="id").sort("key").with_row_index("_row")
    # each row's printed parent as a row of the result: its dparent's row, -1 under the root
    parents = rows.select(pl.col("id").alias("dparent"), pl.col("_row").cast(pl.Int64).alias("parent_row"))
    rows = rows.join(parents, on="dparent", how="left", maintain_order="left").with_columns(
        pl.col("parent_row").fill_null(-1), pl.col("level").cast(pl.Int64))
    return rows.drop("_row", "key", "dparent", "sort_metric", "sort_name", strict=False)

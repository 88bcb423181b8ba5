"""The reference backend's list of groups (the op view; docs/TFPROF_BEHAVIOUR.md, 'Op view'):
graph nodes grouped by a node column, as a list cut and shown like tfprof's TFOp.

The accounted members' values are summed per group (``groups.sql``); the groups are listed in
name order, then stably by the order_by column (descending); each row's totals run from the
bottom of the list up (``cumulate.sql``); the printed part starts at the first row matching
start_name_regexes and stops before a trimmed row or past max_depth (``group_list.sql``); then
ShouldShow filters it, and with account_displayed_op_only the totals run over the shown rows.
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.reference.layouts import accounted_nodes, full_match
from tfprof.queries.reference.sql import Sql, long, wide
from tfprof.queries.spec import TreeSpec
from tfprof.queries.tree import with_ratios, with_root_ratios
from tfprof.schema.metrics import maxed, summed


def _cumulate(sql: Sql, rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (with ``pos``) with ``total_*``: each row plus every row after it (the
    largest-of metrics: the largest of it and every row after it)."""
    values = long(rows, list(summed()), "name").rename({"id": "name"}).join(rows.select("name", "pos"), on="name")
    totals = wide(sql.run("cumulate", _values=values), list(summed()), "total", prefix="total_", key="name")
    out = rows.drop(*("total_" + m for m in (*summed(), *maxed())), strict=False).join(totals, on="name", how="left")
    if maxed():
        out = out.sort("pos").with_columns(
            pl.col(m).reverse().cum_max().reverse().alias("total_" + m) for m in maxed())
    return out


def _first_totals(rows: pl.DataFrame) -> dict[str, int]:
    first = rows.sort("pos").head(1)
    return {"total_" + m: int(first["total_" + m][0]) if first.height else 0 for m in (*summed(), *maxed())}


def show_groups(sql: Sql, prof: Profile, spec: TreeSpec, nodes: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """The printed groups in list order (self sums, ``runs``, ``definitions``, ``total_*``,
    ``depth``) and the root's totals."""
    key = spec.group_key
    grouped = nodes.join(prof.lazy("nodes").select("node_id", pl.col(key).cast(pl.String).alias("grp")).collect(),
                         on="node_id")
    members = grouped.join(accounted_nodes(prof, spec).filter("accounted"), on="node_id").select(
        pl.col("node_id").alias("id"), "grp")
    values = long(nodes.with_columns(pl.lit(1).alias("definitions")), list(group_sums()), "node_id")
    rows = wide(sql.run("groups", _members=members, _values=values), list(group_sums()), "value", key="grp")
    largest = None
    if maxed():  # a group holds its largest member's
        largest = (members.join(nodes.select(pl.col("node_id").alias("id"), *maxed()), on="id")
                   .group_by("grp").agg(*(pl.col(c).max() for c in maxed())))
    return list_groups(sql, rows, spec, largest)


def group_sums() -> tuple[str, ...]:
    """The columns ``groups.sql`` sums per group for ``list_groups``."""
    return (*summed(), "run_count", "definitions")


def list_groups(sql: Sql, rows: pl.DataFrame, spec: TreeSpec,
                largest: pl.DataFrame | None = None) -> tuple[pl.DataFrame, dict[str, int]]:
    """``show_groups`` from the sums per group (``grp`` and ``group_sums()``; ``largest``: the
    ``maxed`` columns' largest member per group): ordered, cumulated, cut and filtered."""
    rows = rows.rename({"grp": "name", "run_count": "runs"})
    if largest is not None:
        rows = rows.join(largest.rename({"grp": "name"}), on="name", how="left").with_columns(
            pl.col(c).fill_null(0) for c in maxed())
    rows = with_ratios(rows, spec.time_scale)
    order = [c for c in spec.order if c != "name"]
    rows = rows.sort("name").sort(order, descending=True, maintain_order=True) if order else rows.sort("name")
    rows = rows.with_row_index("pos").with_columns(pl.col("pos").cast(pl.Int64), pl.lit(True).alias("accounted"))
    rows = with_ratios(_cumulate(sql, rows), spec.time_scale)
    root = with_root_ratios(_first_totals(rows), spec.time_scale)

    flags = rows.select(
        "name", "pos",
        full_match("name", spec.start or ()).alias("start_hit"),
        full_match("name", spec.trim).alias("trim_hit"),
    )
    window = sql.run("group_list", {"start_top": not spec.start, "max_depth": spec.max_depth}, _rows=flags)
    shown = rows.join(window.select("name", "depth"), on="name")
    cond = pl.lit(True)
    for column, minimum in spec.thresholds:
        cond = cond & (pl.col(column) >= minimum)
    shown = shown.filter(cond & full_match("name", spec.show) & ~full_match("name", spec.hide))
    if spec.displayed_only:
        shown = with_ratios(_cumulate(sql, shown), spec.time_scale)
        root = with_root_ratios(_first_totals(shown), spec.time_scale)
    return shown.sort("pos").drop("pos"), root

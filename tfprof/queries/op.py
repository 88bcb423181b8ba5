"""The op view: graph nodes grouped by op type (spec 5.3), one row per displayed op.

Rows come back in display order with self values (sums over the picked member nodes) and the
cumulative ``total_*`` values tfprof prints as "(cumulative %, self %)"; ``root`` holds the
grand totals the percentages divide by.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.metrics import extras_for, node_frame
from tfprof.queries.options import Options
from tfprof.queries.tree import MULTI_MIN_FILTERS, is_all, matches, should_show
from tfprof.schema import METRICS

# order_by -> self column sorted descending (in the op view totals equal self at sort time).
OP_ORDER = {
    "bytes": "requested_bytes",
    "peak_bytes": "peak_bytes",
    "residual_bytes": "residual_bytes",
    "output_bytes": "output_bytes",
    "micros": "exec_micros",
    "accelerator_micros": "accelerator_exec_micros",
    "cpu_micros": "cpu_exec_micros",
    "params": "parameters",
    "float_ops": "float_ops",
    "occurrence": "definitions",
}


@dataclass(frozen=True)
class OpView:
    """The displayed op rows and the root (grand-total) row."""

    rows: pl.DataFrame
    root: dict[str, int]
    members: pl.DataFrame  # picked member nodes (name, op, self values) of the displayed rows


def picked_members(nodes: pl.DataFrame, opts: Options) -> pl.DataFrame:
    """Member nodes that count for their group (ReInit): any op type matching any account regex.

    tfprof counts a node once per matching regex (spec 15.1 #2); we count it once
    (docs/COMPATIBILITY.md, DECISIONS.md).
    """
    if is_all(opts.account_type_regexes):
        return nodes
    hit = pl.col("op_types").list.eval(matches(pl.element(), opts.account_type_regexes)).list.any()
    return nodes.filter(hit.fill_null(False))


def member_sets(opts: Options) -> list[pl.Expr]:
    """A multi node's device and op-type sets (aggregations), when the report prints them.

    tfprof puts "" into the device set for members without a device, so it sorts first (quirk).
    """
    exprs = []
    if "device" in opts.select:
        exprs.append(pl.col("device").fill_null("").unique().sort().alias("devices"))
    if "op_types" in opts.select:
        exprs.append(
            pl.col("op_types").list.explode(keep_nulls=False, empty_as_null=False).unique().sort().alias("op_types")
        )
    return exprs


def op_view(prof: Profile, opts: Options) -> OpView:
    """Rows of the op view, in display order, with cumulative totals."""
    nodes = node_frame(prof, opts.step, extras_for(opts)).join(
        prof.lazy("nodes").select("node_id", pl.col("op").cast(pl.String)).collect(), on="node_id"
    )
    members = picked_members(nodes, opts)
    groups = members.group_by("op").agg(
        *(pl.col(m).sum() for m in METRICS),
        pl.col("run_count").sum().alias("runs"),
        pl.len().alias("definitions"),
        *member_sets(opts),
    )
    all_ops = nodes.select("op").unique()
    rows = all_ops.join(groups, on="op", how="left").with_columns(
        pl.col("definitions").fill_null(0),
        ((pl.col("definitions").fill_null(0) > 0) | pl.lit(is_all(opts.account_type_regexes))).alias("accounted"),
    )
    rows = rows.filter("accounted").rename({"op": "name"})
    rows = rows.with_columns(*(pl.col(m).fill_null(0) for m in (*METRICS, "runs")))
    rows = _sort(rows, opts.order_by)
    rows = _cumulate(rows)
    root = _totals_of_first(rows)

    start = _start_index(rows, opts.start_name_regexes)
    rows = rows.with_row_index("idx").with_columns(pl.col("idx").cast(pl.Int64))
    cut = rows.filter(matches("name", opts.trim_name_regexes) & (pl.col("idx") >= start))["idx"].min()
    stop = min(start + opts.max_depth + 1, cut if cut is not None else rows.height)
    window = rows.filter((pl.col("idx") >= start) & (pl.col("idx") < stop)).with_columns(
        (pl.col("idx") - start).alias("depth")
    )
    shown = window.filter(should_show(window, opts, {**MULTI_MIN_FILTERS, "min_occurrence": "definitions"}))
    if opts.account_displayed_op_only:
        shown = _cumulate(shown.drop([c for c in shown.columns if c.startswith("total_")]))
        root = _totals_of_first(shown)
    picked = members.filter(pl.col("op").is_in(shown["name"].implode()))
    return OpView(rows=shown.drop("idx"), root=root, members=picked)


def _sort(rows: pl.DataFrame, order_by: str) -> pl.DataFrame:
    rows = rows.sort("name")  # tfprof's map of ops is in name order: the stable sort's start
    col = OP_ORDER.get(order_by)
    if col is None:  # "", name and values the op view does not implement keep name order
        return rows
    return rows.sort(col, descending=True, maintain_order=True)


def _cumulate(rows: pl.DataFrame) -> pl.DataFrame:
    """Each row's totals: its own values plus every row below it (spec 5.3.2 step 4)."""
    return rows.with_columns(
        *(pl.col(m).reverse().cum_sum().reverse().alias("total_" + m) for m in METRICS)
    )


def _totals_of_first(rows: pl.DataFrame) -> dict[str, int]:
    if rows.height == 0:
        return {"total_" + m: 0 for m in METRICS}
    return {"total_" + m: int(rows["total_" + m][0]) for m in METRICS}


def _start_index(rows: pl.DataFrame, regexes: tuple[str, ...]) -> int:
    if not regexes or is_all(regexes):
        return 0
    hits = rows.with_row_index("i").filter(matches("name", regexes))["i"]
    return int(hits[0]) if len(hits) else rows.height

"""The op view, and any list of groups: graph nodes grouped by the value of one node column
(``spec.group_key``; ``op`` for the op view), one row per displayed group.

Rows come back in display order with self values (sums over the picked member nodes) and the
cumulative ``total_*`` values tfprof prints as "(cumulative %, self %)"; ``root`` holds the
grand totals the percentages divide by. Members carry their group in the column ``op``, where
the op view's renderers read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.metrics import extras_for, node_frame, with_samples
from tfprof.queries.options import Options
from tfprof.queries.spec import TreeSpec, as_spec, sample_names
from tfprof.queries.tree import accounted, matches, should_show, with_ratios, with_root_ratios
from tfprof.schema.metrics import maxed, summed


@dataclass(frozen=True)
class OpView:
    """The displayed op rows and the root (grand-total) row."""

    rows: pl.DataFrame
    root: dict[str, int]
    members: pl.DataFrame  # picked member nodes (name, op, self values) of the displayed rows


def picked_members(nodes: pl.DataFrame, spec: TreeSpec) -> pl.DataFrame:
    """Member nodes that count for their group (ReInit): any op type matching any account regex.

    tfprof counts a node once per matching regex (docs/TFPROF_BEHAVIOUR.md, 'Known quirks' #2); we count it once
    (docs/COMPATIBILITY.md row 2: the doubled numbers contradict the same profile's scope view).
    """
    if spec.account is None:
        return nodes
    return nodes.filter(accounted(spec).fill_null(False))


def with_group(prof: Profile, nodes: pl.DataFrame, spec: TreeSpec) -> pl.DataFrame:
    """``nodes`` with the group each belongs to (its ``spec.group_key`` value) as ``op``."""
    return nodes.join(
        prof.lazy("nodes").select("node_id", pl.col(spec.group_key).cast(pl.String).alias("op")).collect(),
        on="node_id",
    )


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


def op_view(prof: Profile, spec: TreeSpec) -> OpView:
    """Rows of a groups view (the op view for ``Options``), in display order, with cumulative totals."""
    spec = as_spec("op", spec, prof)
    opts = spec.options
    nodes = with_group(prof, with_samples(prof, node_frame(prof, spec.step, extras_for(opts)), spec), spec)
    members = picked_members(nodes, spec)
    groups = members.group_by("op").agg(
        *(pl.col(m).sum() for m in (*summed(), *sample_names(spec))),
        *(pl.col(m).max() for m in maxed()),  # an op type holds its largest member's
        pl.col("run_count").sum().alias("runs"),
        pl.len().alias("definitions"),
        *member_sets(opts),
    )
    all_ops = nodes.select("op").unique()
    rows = all_ops.join(groups, on="op", how="left").with_columns(
        pl.col("definitions").fill_null(0),
        ((pl.col("definitions").fill_null(0) > 0) | pl.lit(spec.account is None)).alias("accounted"),
    )
    rows = rows.filter("accounted").rename({"op": "name"})
    rows = rows.with_columns(*(pl.col(m).fill_null(0) for m in (*summed(), "runs", *maxed(), *sample_names(spec))))
    rows = _sort(with_ratios(rows, spec.time_scale), spec.order)
    rows = with_ratios(_cumulate(rows), spec.time_scale)
    root = with_root_ratios(_totals_of_first(rows), spec.time_scale)

    start = _start_index(rows, spec.start)
    rows = rows.with_row_index("idx").with_columns(pl.col("idx").cast(pl.Int64))
    cut = rows.filter(matches("name", spec.trim) & (pl.col("idx") >= start))["idx"].min()
    stop = min(start + spec.max_depth + 1, cut if cut is not None else rows.height)
    window = rows.filter((pl.col("idx") >= start) & (pl.col("idx") < stop)).with_columns(
        (pl.col("idx") - start).alias("depth")
    )
    shown = window.filter(should_show(spec))
    if spec.displayed_only:
        shown = with_ratios(_cumulate(shown.drop([c for c in shown.columns if c.startswith("total_")])),
                            spec.time_scale)
        root = with_root_ratios(_totals_of_first(shown), spec.time_scale)
    picked = members.filter(pl.col("op").is_in(shown["name"].implode()))
    return OpView(rows=shown.drop("idx"), root=root, members=picked)


def _sort(rows: pl.DataFrame, order: tuple[str, ...]) -> pl.DataFrame:
    rows = rows.sort("name")  # tfprof's map of ops is in name order: the stable sort's start
    if order in ((), ("name",)):  # the layout order is the name order
        return rows
    return rows.sort(list(order), descending=True, maintain_order=True)


def _cumulate(rows: pl.DataFrame) -> pl.DataFrame:
    """Each row's totals: its own values plus every row below it (docs/TFPROF_BEHAVIOUR.md, 'Op view', step 4)."""
    return rows.with_columns(
        *(pl.col(m).reverse().cum_sum().reverse().alias("total_" + m) for m in summed()),
        *(pl.col(m).reverse().cum_max().reverse().alias("total_" + m) for m in maxed()),
    )


def _totals_of_first(rows: pl.DataFrame) -> dict[str, int]:
    if rows.height == 0:
        return {"total_" + m: 0 for m in (*summed(), *maxed())}
    return {"total_" + m: int(rows["total_" + m][0]) for m in (*summed(), *maxed())}


def _start_index(rows: pl.DataFrame, regexes: tuple[str, ...] | None) -> int:
    if not regexes:  # None (every name) or no regex at all: the first row
        return 0
    hits = rows.with_row_index("i").filter(matches("name", regexes))["i"]
    return int(hits[0]) if len(hits) else rows.height

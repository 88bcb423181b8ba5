"""What the tree views share: regex tests, ShouldShow and the sort keys, read from a ``TreeSpec``."""

from __future__ import annotations

import polars as pl

from tfprof.queries.options import full_match_any
from tfprof.queries.spec import TreeSpec


def matches(col: str | pl.Expr, regexes: tuple[str, ...]) -> pl.Expr:
    """True where ``col`` fully matches any of ``regexes`` (RE2 FullMatch); False for none."""
    expr = pl.col(col) if isinstance(col, str) else col
    rx = full_match_any(regexes)
    return pl.lit(False) if rx is None else expr.cast(pl.String).str.contains(rx)  # (Enum names too)


def accounted(spec: TreeSpec) -> pl.Expr:
    """Whether a node counts: any of its ``op_types`` fully matches any account regex."""
    if spec.account is None:
        return pl.lit(True)
    return pl.col("op_types").list.eval(matches(pl.element(), spec.account)).list.any()


def should_show(spec: TreeSpec, depth_col: str = "depth") -> pl.Expr:
    """tfprof's ShouldShow as an expression: depth, thresholds, show and hide regexes."""
    cond = pl.col(depth_col) <= spec.max_depth
    for column, minimum in spec.thresholds:
        cond = cond & (pl.col(column) >= minimum)
    if spec.show is not None:
        cond = cond & matches("name", spec.show)
    if spec.hide:
        cond = cond & ~matches("name", spec.hide)
    return cond


def sort_key(order: tuple[str, ...]) -> tuple[list[str], list[bool]]:
    """Columns and descending flags that order siblings (stable on the layout order ``pre``)."""
    if not order:
        return ["pre"], [False]
    if order == ("name",):
        return ["name", "pre"], [False, False]
    return [*order, "pre"], [True] * len(order) + [False]

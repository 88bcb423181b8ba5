"""What the tree views share: regex tests, ShouldShow and the sort keys, read from a ``TreeSpec``."""

from __future__ import annotations

import polars as pl

from tfprof.queries.options import full_match_any
from tfprof.queries.spec import TreeSpec
from tfprof.schema.metrics import by_select, ratio_parts, ratios


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


def _quotient(num: pl.Expr, den: pl.Expr, scale: float) -> pl.Expr:
    """``num / den`` as a float in the parts' printed units (``scale``: the ticks of the parts'
    times, ``_scale``), 0 where ``den`` is 0 (no denominator: nothing to rate)."""
    return pl.when(den != 0).then(num.cast(pl.Float64) / den.cast(pl.Float64) * scale).otherwise(0.0)


def _scale(metric, time_scale: int) -> float:
    """What a quotient of query columns is multiplied by to be one of µs: a time part is held
    in ticks of ``time_scale`` per µs (``tfprof.queries.ticks``)."""
    num, den = (by_select()[s].kind == "time" for s in metric.of)
    return (time_scale if den else 1) / (time_scale if num else 1)


def with_ratios(frame: pl.DataFrame, time_scale: int = 1) -> pl.DataFrame:
    """``frame`` with each registered ratio metric (``tfprof.schema.metrics``) divided from its
    parts: its own value where the frame has the parts' own columns, its subtree value where it
    has their ``total_`` columns (the engines call it after they sum, and again after they
    re-sum the shown rows). ``time_scale``: ticks per µs of the frame's time columns."""
    exprs = []
    for m in ratios():
        num, den = ratio_parts(m)
        for prefix in ("", "total_"):
            if prefix + num in frame.columns and prefix + den in frame.columns:
                exprs.append(_quotient(pl.col(prefix + num), pl.col(prefix + den), _scale(m, time_scale))
                             .alias(prefix + m.column))
    return frame.with_columns(exprs) if exprs else frame


def with_root_ratios(root: dict, time_scale: int = 1) -> dict:
    """The root's totals (``total_*`` -> value) with each ratio whose parts they hold."""
    out = dict(root)
    for m in ratios():
        num, den = (root.get("total_" + c) for c in ratio_parts(m))
        if num is not None and den is not None:
            out["total_" + m.column] = num / den * _scale(m, time_scale) if den else 0.0
    return out

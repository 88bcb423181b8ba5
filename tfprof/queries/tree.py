"""What the tree views share: the metrics they total, regex tests, ShouldShow, sort keys."""

from __future__ import annotations

import polars as pl

from tfprof.queries.options import Options, full_match_any


# order_by value -> total column it sorts on (descending); others sort by name (spec 5.5).
ORDER_COLUMNS = {
    "bytes": "total_requested_bytes",
    "peak_bytes": "total_peak_bytes",
    "residual_bytes": "total_residual_bytes",
    "output_bytes": "total_output_bytes",
    "micros": "total_exec_micros",
    "accelerator_micros": "total_accelerator_exec_micros",
    "cpu_micros": "total_cpu_exec_micros",
    "params": "total_parameters",
    "float_ops": "total_float_ops",
}

# min_* option -> column compared (spec 5.1.4: totals, except params/float_ops/occurrence on self).
SINGLE_MIN_FILTERS = {
    "min_bytes": "total_requested_bytes",
    "min_peak_bytes": "total_peak_bytes",
    "min_residual_bytes": "total_residual_bytes",
    "min_output_bytes": "total_output_bytes",
    "min_micros": "total_exec_micros",
    "min_accelerator_micros": "total_accelerator_exec_micros",
    "min_cpu_micros": "total_cpu_exec_micros",
    "min_params": "parameters",  # tfprof: scope/graph compare self params (tfprof_show.cc)
    "min_float_ops": "float_ops",
    "min_occurrence": "run_count",
}

# The multi-node views (op, code) compare totals throughout (spec 5.4.3); min_occurrence is
# the op view's member count and is ignored by the code view (tfprof_op.h, tfprof_code.h).
MULTI_MIN_FILTERS = {
    **{k: v for k, v in SINGLE_MIN_FILTERS.items() if k != "min_occurrence"},
    "min_params": "total_parameters",
    "min_float_ops": "total_float_ops",
}


def matches(col: str | pl.Expr, regexes: tuple[str, ...]) -> pl.Expr:
    """True where ``col`` fully matches any of ``regexes`` (RE2 FullMatch); False for none."""
    expr = pl.col(col) if isinstance(col, str) else col
    rx = full_match_any(regexes)
    return pl.lit(False) if rx is None else expr.cast(pl.String).str.contains(rx)  # (Enum names too)


def is_all(regexes: tuple[str, ...]) -> bool:
    """tfprof's short-circuit: a list that is exactly ``[".*"]``."""
    return tuple(regexes) == (".*",)


def should_show(frame: pl.DataFrame, opts: Options, filters: dict[str, str], depth_col: str = "depth") -> pl.Expr:
    """tfprof's ShouldShow as an expression (thresholds, depth, show and hide regexes)."""
    cond = pl.col(depth_col) <= opts.max_depth
    for option, column in filters.items():
        threshold = getattr(opts, option)
        if threshold:
            cond = cond & (pl.col(column) >= threshold)
    if not is_all(opts.show_name_regexes):
        cond = cond & matches("name", opts.show_name_regexes)
    if opts.hide_name_regexes:
        cond = cond & ~matches("name", opts.hide_name_regexes)
    return cond


def sort_key(order_by: str, extra: dict[str, str] | None = None) -> tuple[list[str], list[bool]]:
    """Columns and descending flags that order siblings (stable on the incoming order ``pre``)."""
    if order_by == "":
        return ["pre"], [False]
    col = {**ORDER_COLUMNS, **(extra or {})}.get(order_by)
    if col is None:  # name, and every value tfprof does not implement for this view
        return ["name", "pre"], [False, False]
    return [col, "pre"], [True, False]

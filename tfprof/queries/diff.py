"""A view of profile B against the same view of profile A, as one polars query over both views' rows.

Both sides are public view tables (``tfprof.views.table.view_table``: every metric, self and
total), from the same spec run on each profile. The rules, also in docs/DIFF.md:

* **Matching: by path.** A row's path is its node name in the scope and graph views (names are
  unique in a graph and already hold the name scopes), its op type in the op view, and in the
  code view the names of the displayed frames from the top one down to the row, joined by
  ``/``. A path that occurs more than once on a side (a node shown twice) is matched by its
  occurrence number, first with first.
* **Renamed, added, removed.** There is no fuzzy matching: a renamed node is one removed row
  (only in A) and one added row (only in B). ``status`` says ``both``, ``added`` or
  ``removed``; the absent side's values are null, and in Δ and Δ% it counts as 0.
* **Values.** Each diffed column ``c`` gives ``c_a``, ``c_b``, ``c_delta`` (B − A) and
  ``c_delta_pct`` (100 × Δ / A; 0 where both are 0, null where only A is 0).
* **Filters.** The regex options and ``max_depth`` shape both views alike (they read names
  and the tree, not values). The ``min_*`` thresholds compare values, which differ between the
  sides: a row is kept when it passes them in A or in B. In the op view, whose ``max_depth``
  cuts a sorted list, the cut is made after the diff's own order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from tfprof.schema import PUBLIC_NAMES


SEP = "/"
KEYS = ("path", "occurrence")
ORDERS = ("delta", "delta_pct", "name", "tree")
STATUSES = ("both", "added", "removed")


def with_paths(table: pl.DataFrame, layout: str) -> pl.DataFrame:
    """``table`` (a view's rows in display order) with ``path`` and ``occurrence`` (0 for the
    first row of a path, 1 for the second, ...) and ``pos`` (the display position)."""
    if layout == "code":
        path = code_paths(table["name"], table["depth"].to_numpy())
    else:
        path = table["name"]
    # a scope tree holds each name once, an op list each op type: no numbering to do there
    unique = layout in ("scope", "groups")
    occurrence = pl.lit(0, pl.Int64) if unique else pl.int_range(pl.len()).over("path").cast(pl.Int64)
    return table.with_columns(path.alias("path")).with_columns(
        occurrence.alias("occurrence"), pl.int_range(pl.len()).cast(pl.Int64).alias("pos")
    )


def code_paths(names: pl.Series, depth: np.ndarray) -> pl.Series:
    """Each row's frame path in a pre-order tree given by ``depth`` (the root at depth 0 keeps its
    name; a frame's path is its displayed ancestors' names below the root and its own)."""
    n = len(depth)
    paths = names.cast(pl.String)
    if n == 0:
        return paths
    index = np.arange(n)
    for d in range(1, int(depth.max())):  # rows at depth d+1 hang under the last row at depth d
        last = np.maximum.accumulate(np.where(depth == d, index, -1))
        rows = np.flatnonzero(depth == d + 1)
        if len(rows):
            parent = paths.gather(last[rows])
            paths = paths.scatter(rows, parent + SEP + names.gather(rows))
    return paths


def diff_tables(
    a: pl.DataFrame,
    b: pl.DataFrame,
    columns: Sequence[str],
    *,
    thresholds: Sequence[tuple[str, int]] = (),
    order: str = "delta",
    order_column: str | None = None,
    limit: int | None = None,
    carry: Sequence[str] = (),
    names_are_paths: bool = False,
) -> pl.DataFrame:
    """The diff of two view tables with paths (``with_paths``): one row per path and occurrence
    in either, columns ``path, name, depth, status`` then per column of ``columns`` its A, B, Δ
    and Δ% (module docstring). ``thresholds`` are the spec's (column, minimum) pairs; ``order``
    one of ``ORDERS`` on ``order_column`` (the first of ``columns`` by default); ``limit`` keeps
    that many rows after ordering; ``carry`` names columns of either side (each on one side
    only) kept as they are. ``names_are_paths``: a row's name is its path (every layout but
    code's), so the names are not joined and ordered as a second string column."""
    thresholds = [(PUBLIC_NAMES.get(c, c), v) for c, v in thresholds]  # the spec names query columns
    needed = list(dict.fromkeys([*columns, *(c for c, _ in thresholds)]))
    side = [*([] if names_are_paths else ["name"]), "depth", "pos", *needed]
    joined = _match(
        a.select(*KEYS, *(pl.col(c).alias(f"{c}_a") for c in side), *(c for c in carry if c in a.columns)),
        b.select(*KEYS, *(pl.col(c).alias(f"{c}_b") for c in side), *(c for c in carry if c in b.columns)),
    )
    if thresholds:
        joined = joined.filter(_passes(thresholds, "_a") | _passes(thresholds, "_b"))
    status = (
        pl.when(pl.col("pos_a").is_null()).then(pl.lit("added"))
        .when(pl.col("pos_b").is_null()).then(pl.lit("removed"))
        .otherwise(pl.lit("both"))
    )
    out = joined.select(
        *KEYS,
        *([] if names_are_paths else [pl.coalesce("name_b", "name_a").alias("name")]),
        pl.coalesce("depth_b", "depth_a").alias("depth"),
        status.cast(pl.Enum(STATUSES)).alias("status"),
        "pos_a",
        "pos_b",
        *(e for c in columns for e in _delta(c)),
        *carry,
    )
    out = order_rows(out, order, order_column or (columns[0] if columns else None))
    if limit is not None:
        out = out.head(limit)
    if names_are_paths:  # the same strings, not a copy
        out = out.select("path", "occurrence", pl.col("path").alias("name"), pl.exclude("path", "occurrence"))
    return out


def _match(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """The full join of both sides on ``KEYS``. It joins on a 64-bit hash of the path (integers
    join faster than strings) and checks that every matched pair has equal paths; on a collision
    (odds about n²/2⁶⁵) it joins on the paths themselves."""
    hashed = a.with_columns(pl.col("path").hash().alias("_hash")).join(
        b.rename({"path": "_path_b"}).with_columns(pl.col("_path_b").hash().alias("_hash")),
        on=["_hash", "occurrence"], how="full", coalesce=True,
    )
    if (hashed["path"] != hashed["_path_b"]).any():  # null where a side has no row: not a mismatch
        return a.join(b, on=list(KEYS), how="full", coalesce=True, nulls_equal=True)
    return hashed.with_columns(pl.coalesce("path", "_path_b").alias("path")).drop("_hash", "_path_b")


def _passes(thresholds: Sequence[tuple[str, int]], suffix: str) -> pl.Expr:
    return pl.all_horizontal(pl.col(c + suffix) >= v for c, v in thresholds).fill_null(False)


def _delta(column: str) -> list[pl.Expr]:
    a, b = pl.col(f"{column}_a"), pl.col(f"{column}_b")
    delta = b.fill_null(0) - a.fill_null(0)
    base = a.fill_null(0)
    pct = (
        pl.when((base == 0) & (delta == 0)).then(pl.lit(0.0))
        .when(base == 0).then(pl.lit(None, pl.Float64))
        .otherwise(delta.cast(pl.Float64) * 100.0 / base.cast(pl.Float64))
    )
    return [a, b, delta.alias(f"{column}_delta"), pct.alias(f"{column}_delta_pct")]


def order_rows(frame: pl.DataFrame, order: str, column: str | None) -> pl.DataFrame:
    """Rows by ``order``: ``delta`` (|Δ| of ``column``, largest first), ``delta_pct`` (|Δ%|,
    rows with no Δ% — added from nothing — first), ``name`` (path), ``tree`` (B's display order,
    then the removed rows in A's); ties by path and occurrence."""
    ties = [pl.col("path"), pl.col("occurrence")]
    if order == "tree" or column is None:
        return frame.sort([pl.col("pos_b").is_null(), "pos_b", "pos_a", *ties], nulls_last=True)
    if order == "name":
        return frame.sort(ties)
    if order == "delta":  # an argsort and one gather: faster than sorting the frame
        return frame[frame.select(pl.arg_sort_by([pl.col(f"{column}_delta").abs(), *ties],
                                                 descending=[True, False, False])).to_series()]
    pct = pl.col(f"{column}_delta_pct")
    return frame.sort(
        [pct.is_null() & (pl.col(f"{column}_delta") != 0), pct.abs(), *ties],
        descending=[True, True, False, False], nulls_last=True,
    )


def step_sums(tables: Sequence[pl.DataFrame], columns: Sequence[str], prefix: str) -> pl.DataFrame:
    """Per path and occurrence, over per-step view tables (one table per step), the sample sums
    of each of ``columns`` (``tfprof.queries.noise.sample_columns``): ``<prefix><c>_sum``, ...
    A row absent from a step's table counts as 0 there."""
    from tfprof.queries.noise import sample_columns

    stacked = pl.concat([t.select(*KEYS, *columns) for t in tables], how="vertical_relaxed")
    return stacked.group_by(list(KEYS)).agg(
        *(e for c in columns for e in sample_columns(f"{prefix}{c}_", c))
    )

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

from tfprof.queries.paths import CHECK_SEED, code_paths, path_keys, path_parents
from tfprof.schema import PUBLIC_NAMES

KEYS = ("path", "occurrence")
ORDERS = ("delta", "delta_pct", "name", "tree")
STATUSES = ("both", "added", "removed")


def with_paths(table: pl.DataFrame, layout: str, parent_row: pl.Series | None = None, *,
               keys: bool = False) -> pl.DataFrame:
    """``table`` (a view's rows in display order) with ``path`` and ``occurrence`` (0 for the
    first row of a path, 1 for the second, ...) and ``pos`` (the display position); with
    ``keys``, also ``_key`` and ``_check`` (``tfprof.queries.paths``), by which ``diff_tables``
    matches rows. A code tree's paths follow its displayed parents: ``parent_row``, the
    engine's column of the same rows."""
    depth = table["depth"].to_numpy()
    if layout == "code":
        if parent_row is None or len(parent_row) != table.height:
            raise ValueError("a code tree's paths need the displayed parents of its rows (parent_row)")
        parent = path_parents(parent_row.to_numpy())
        path = code_paths(table["name"], parent)
        key = [pl.Series("_key", path_keys(table["name"], parent, depth)),
               pl.Series("_check", path_keys(table["name"], parent, depth, CHECK_SEED))]
    else:
        path = table["name"]
        key = [path.hash().alias("_key"), path.hash(seed=CHECK_SEED).alias("_check")]
    # a scope tree holds each name once, an op list each op type: no numbering to do there
    unique = layout in ("scope", "groups")
    occurrence = pl.lit(0, pl.Int64) if unique else pl.int_range(pl.len()).over("_key").cast(pl.Int64)
    out = table.with_columns(path.alias("path"), *key).with_columns(
        occurrence.alias("occurrence"), pl.int_range(pl.len()).cast(pl.Int64).alias("pos")
    )
    return out if keys else out.drop("_key", "_check")


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
    names_are_paths: bool = True,
) -> pl.DataFrame:
    """The diff of two view tables with paths and keys (``with_paths``): one row per path and
    occurrence in either, columns ``path, occurrence, name, depth, status, pos_a, pos_b`` then
    per column of ``columns`` its A, B, Δ and Δ% (module docstring). ``thresholds`` are the
    spec's (column, minimum) pairs; ``order`` one of ``ORDERS`` on ``order_column`` (the first of
    ``columns`` by default); ``limit`` keeps that many rows after ordering; ``carry`` names
    columns of either side (each on one side only) kept as they are; ``names_are_paths``: a
    row's name is its path (every view but code).

    Rows are joined on their keys, never on the path strings; each match is checked on a second
    key, and a collision redoes the join on exact ranks of the paths. The strings are gathered
    once, for the ordered rows."""
    thresholds = [(PUBLIC_NAMES.get(c, c), v) for c, v in thresholds]  # the spec names query columns
    pairs = _pairs(a, b)  # pos_a, pos_b (null: no such row), occurrence

    def sides(column: str, at: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
        return a[column].gather(at["pos_a"]).alias(column + "_a"), b[column].gather(at["pos_b"]).alias(column + "_b")

    if thresholds:
        values = pl.DataFrame([s for c, _ in thresholds for s in sides(c, pairs)])
        pairs = pairs.filter(_passes(thresholds, "_a", values) | _passes(thresholds, "_b", values))
    column = order_column or (columns[0] if columns else None)
    keyed = pairs
    if order == "name":
        keyed = pairs.with_columns(_from_sides(a["path"], b["path"], pairs).alias("path"))
    elif column is not None and order != "tree":
        keyed = pairs.with_columns(*sides(column, pairs)).with_columns(_delta(column)[2:])
    pairs = pairs[order_rows(keyed, order, column)]
    if limit is not None:
        pairs = pairs.head(limit)
    path = _from_sides(a["path"], b["path"], pairs).alias("path")
    name = path.alias("name") if names_are_paths else _from_sides(a["name"], b["name"], pairs).alias("name")
    status = (
        pl.when(pl.col("pos_a").is_null()).then(pl.lit("added"))
        .when(pl.col("pos_b").is_null()).then(pl.lit("removed"))
        .otherwise(pl.lit("both"))
    )
    gathered = [
        *(s for c in columns for s in sides(c, pairs)),
        *(a[c].gather(pairs["pos_a"]) if c in a.columns else b[c].gather(pairs["pos_b"]) for c in carry),
    ]
    return pairs.with_columns(gathered).select(
        path,
        "occurrence",
        name,
        _from_sides(a["depth"], b["depth"], pairs).alias("depth"),
        status.cast(pl.Enum(STATUSES)).alias("status"),
        "pos_a",
        "pos_b",
        *(e for c in columns for e in _delta(c)),
        *carry,
    )


def _pairs(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """The rows of both sides matched on key and occurrence: ``pos_a``, ``pos_b`` (null where
    a side has no such row) and ``occurrence``; on a collision, matched on the paths' ranks."""

    def keys(t: pl.DataFrame, side: str) -> pl.DataFrame:
        return t.select("_key", "occurrence", pl.col("pos").alias(f"pos_{side}"))

    joined = keys(a, "a").join(keys(b, "b"), on=["_key", "occurrence"], how="full", coalesce=True)
    if not _matches_hold(a, b, joined):
        exact_a, exact_b = _exact_keys(a, b)
        joined = keys(exact_a, "a").join(keys(exact_b, "b"), on=["_key", "occurrence"], how="full", coalesce=True)
    return joined.select("pos_a", "pos_b", "occurrence")


def _from_sides(a: pl.Series, b: pl.Series, pairs: pl.DataFrame) -> pl.Series:
    """Per pair, the value of ``b`` at ``pos_b``, else of ``a`` at ``pos_a``: one gather from
    B, and from A for the rows only A has."""
    out = b.gather(pairs["pos_b"])
    only_a = np.flatnonzero(pairs["pos_b"].is_null().to_numpy())
    if len(only_a):
        out = out.scatter(only_a, a.gather(pairs["pos_a"].gather(only_a)))
    return out


def _matches_hold(a: pl.DataFrame, b: pl.DataFrame, joined: pl.DataFrame) -> bool:
    """Whether every row matched on ``_key`` is matched once and agrees on ``_check``."""
    both = joined.filter(pl.col("pos_a").is_not_null() & pl.col("pos_b").is_not_null())
    at_a, at_b = both["pos_a"].to_numpy(), both["pos_b"].to_numpy()
    if len(at_a) and (np.bincount(at_a).max() > 1 or np.bincount(at_b).max() > 1):  # a row matched twice
        return False
    return bool(np.array_equal(a["_check"].to_numpy()[at_a], b["_check"].to_numpy()[at_b]))


def _exact_keys(a: pl.DataFrame, b: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Both sides keyed by the dense rank of their paths over both (no collision possible),
    occurrences renumbered by it."""
    rank = pl.concat([a["path"], b["path"]]).rank("dense").cast(pl.UInt64)
    out = []
    for t, r in ((a, rank.head(a.height)), (b, rank.tail(b.height))):
        t = t.with_columns(r.alias("_key"))
        if not (t["occurrence"] == 0).all():
            t = t.with_columns(pl.int_range(pl.len()).over("_key").cast(pl.Int64).alias("occurrence"))
        out.append(t)
    return out[0], out[1]


def _passes(thresholds: Sequence[tuple[str, int]], suffix: str, frame: pl.DataFrame) -> pl.Series:
    return frame.select(pl.all_horizontal(pl.col(c + suffix) >= v for c, v in thresholds).fill_null(False)).to_series()


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


def order_rows(frame: pl.DataFrame, order: str, column: str | None) -> pl.Series:
    """The permutation that puts rows in ``order``: ``delta`` (|Δ| of ``column``, largest first),
    ``delta_pct`` (|Δ%|, rows with no Δ% — added from nothing — first), ``name`` (path, then
    occurrence), ``tree`` (B's display order, then the removed rows in A's). Ties go in tree
    order. ``frame`` has ``pos_a``, ``pos_b`` and what the order reads (``path``; the column's
    ``_delta`` and ``_delta_pct``)."""
    # B's rows by position, then A's own after all of them: one integer
    tree = pl.coalesce(pl.col("pos_b"), pl.col("pos_a") + (pl.col("pos_b").max() + 1).fill_null(0))
    if order == "name":
        keys, descending = [pl.col("path"), pl.col("occurrence")], [False, False]
    elif order == "tree" or column is None:
        keys, descending = [tree], [False]
    elif order == "delta":
        size = frame.select(pl.col("pos_a").max(), pl.col("pos_b").max()).fill_null(0).row(0)
        shift = (max(size) * 2 + 2).bit_length()  # tree positions fit below this bit
        largest = frame[f"{column}_delta"].abs().max() or 0
        if largest < 1 << (62 - shift):  # one integer key sorts several times faster than two
            one = -pl.col(f"{column}_delta").abs() * (1 << shift) + tree
            return frame.select(one.arg_sort()).to_series()
        keys, descending = [pl.col(f"{column}_delta").abs(), tree], [True, False]
    else:
        pct = pl.col(f"{column}_delta_pct")
        keys = [pct.is_null() & (pl.col(f"{column}_delta") != 0), pct.abs(), tree]
        descending = [True, True, False]
    return frame.select(pl.arg_sort_by(keys, descending=descending, nulls_last=True)).to_series()


def step_sums(tables: Sequence[pl.DataFrame], columns: Sequence[str], prefix: str) -> pl.DataFrame:
    """Per path and occurrence, over per-step view tables (one table per step), the sample sums
    of each of ``columns`` (``tfprof.queries.noise.sample_columns``): ``<prefix><c>_sum``, ...
    A row absent from a step's table counts as 0 there."""
    from tfprof.queries.noise import sample_columns

    stacked = pl.concat([t.select(*KEYS, *columns) for t in tables], how="vertical_relaxed")
    return stacked.group_by(list(KEYS)).agg(
        *(e for c in columns for e in sample_columns(f"{prefix}{c}_", c))
    )

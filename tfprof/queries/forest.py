"""The display pass of the tree views over a forest laid out in pre-order (graph and code views).

A forest is a frame with one row per node in pre-order (``pos`` = 0..n-1) and ``parent`` (the
parent's ``pos``, -1 for a top-level node). Each of tfprof's passes — subtree totals, start-node
search, PrintGraph/PrintCode visiting with lifting, displayed-only re-accounting, sorting — is a
single numba loop over these arrays in pre-order or reverse pre-order: O(n), however deep the
tree (graph-view forests can be thousands of levels deep, which rules out closure joins).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
from numba import njit

from tfprof.queries.arrays import tree_order
from tfprof.queries.spec import TreeSpec, is_sample
from tfprof.queries.tree import matches, should_show, sort_key, with_ratios, with_root_ratios
from tfprof.schema.metrics import maxed, summed


def counted() -> tuple[str, ...]:
    """The self columns a forest carries: the additive metrics now registered, and runs (their
    totals add up), then the largest-of ones (their totals are the subtree's largest)."""
    return (*summed(), "run_count", *maxed())

# Displayed rows up to this many cells are gathered in one call; larger ones column by column,
# each source column let go once copied (a multi-million-line report holds one copy, not two).
_ONE_GATHER_CELLS = 20_000_000


def subtree_sums(parent: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per node (rows of ``values``, one column per quantity), the sum over its subtree."""
    totals = np.array(values.T, dtype=np.int64, order="C")  # a copy, one quantity per row
    accumulate_subtrees(parent, totals)
    return totals.T


@njit(cache=True, nogil=True)
def accumulate_subtrees(parent: np.ndarray, values: np.ndarray) -> None:  # pragma: no cover - numba
    """``subtree_sums`` in place, over values laid out one quantity per row (``values[j, v]``):
    each metric's totals come out contiguous, ready to become a column, with no second copy."""
    k = values.shape[0]
    for v in range(parent.shape[0] - 1, -1, -1):
        p = parent[v]
        if p >= 0:
            for j in range(k):
                values[j, p] += values[j, v]


@njit(cache=True, nogil=True)
def accumulate_max(parent: np.ndarray, values: np.ndarray) -> None:  # pragma: no cover - numba
    """``accumulate_subtrees`` with the largest value in place of the sum."""
    k = values.shape[0]
    for v in range(parent.shape[0] - 1, -1, -1):
        p = parent[v]
        if p >= 0:
            for j in range(k):
                if values[j, v] > values[j, p]:
                    values[j, p] = values[j, v]


@njit(cache=True, nogil=True)
def _displayed_max(shown, dparent, values):  # pragma: no cover - numba
    """``_displayed_sums`` with the largest value in place of the sum (values one row a node)."""
    n = shown.shape[0]
    totals = values.copy()
    root = np.full(values.shape[1], np.iinfo(np.int64).min, values.dtype)
    any_shown = False
    for v in range(n - 1, -1, -1):
        if not shown[v]:
            continue
        any_shown = True
        d = dparent[v]
        for j in range(values.shape[1]):
            if d >= 0:
                if totals[v, j] > totals[d, j]:
                    totals[d, j] = totals[v, j]
            elif totals[v, j] > root[j]:
                root[j] = totals[v, j]
    if not any_shown:
        root[:] = 0
    return totals, root


@njit(cache=True, nogil=True)
def _starts(parent: np.ndarray, match: np.ndarray, match_all: bool):  # pragma: no cover - numba
    n = parent.shape[0]
    is_start = np.zeros(n, np.bool_)
    start_of = np.full(n, -1, np.int64)
    depth = np.zeros(n, np.int64)
    for v in range(n):
        p = parent[v]
        if match_all:
            is_start[v] = p < 0
        elif match[v] and (p < 0 or start_of[p] < 0):
            is_start[v] = True
        if is_start[v]:
            start_of[v] = v
            depth[v] = 2
        elif p >= 0 and start_of[p] >= 0:
            start_of[v] = start_of[p]
            depth[v] = depth[p] + 1
    return is_start, start_of, depth


@njit(cache=True, nogil=True)
def _visit(parent, is_start, start_of, blocked, skip, cond, root_visits, code_mode):  # pragma: no cover
    """PrintGraph/PrintScope (``blocked`` stops descent below a node) or PrintCode (``skip``
    drops a node with its subtree); returns shown flags and the displayed parent (-1 = root)."""
    n = parent.shape[0]
    visited = np.zeros(n, np.bool_)
    shown = np.zeros(n, np.bool_)
    dparent = np.full(n, -1, np.int64)
    for v in range(n):
        if start_of[v] < 0:
            continue
        p = parent[v]
        if code_mode:
            ok = (root_visits if is_start[v] else visited[p]) and not skip[v]
        else:
            ok = root_visits if is_start[v] else (visited[p] and not blocked[p])
        visited[v] = ok
        if not ok:
            continue
        shown[v] = cond[v]
        if not is_start[v]:
            dparent[v] = p if shown[p] else dparent[p]
    return shown, dparent


@njit(cache=True, nogil=True)
def _displayed_sums(shown, dparent, values):  # pragma: no cover - numba
    n = shown.shape[0]
    totals = np.zeros_like(values)
    root = np.zeros(values.shape[1], values.dtype)
    for v in range(n - 1, -1, -1):
        if not shown[v]:
            continue
        totals[v] += values[v]
        d = dparent[v]
        if d >= 0:
            totals[d] += totals[v]
        else:
            root += totals[v]
    return totals, root


def flags(frame: pl.DataFrame, expr: pl.Expr) -> np.ndarray:
    """``expr`` evaluated over ``frame`` as one bool per row (a literal is broadcast)."""
    return frame.select(pl.repeat(True, frame.height).alias("_") & expr).to_series().to_numpy().astype(np.bool_)


def display(forest: pl.DataFrame, spec: TreeSpec, *, keep: Sequence[str] | None = None) -> tuple[pl.DataFrame, dict[str, int]]:
    """Run tfprof's display pass of ``spec`` over ``forest``; return (displayed rows in order,
    root totals). A code tree (``spec.layout``) is shown as PrintCode shows it, any other as
    PrintGraph/PrintScope.

    ``keep`` names the columns of the displayed rows (default: all but the forest's
    bookkeeping); the tree's shape is always added: ``level`` (1 for a child of the root) and
    ``parent_row`` (the displayed parent's row in the result, -1 under the root).

    ``forest`` holds ``pos``, ``parent``, ``name`` and the self columns in ``counted()`` (or,
    for a report that prints and filters on fewer, those only), and any column ``spec``'s
    thresholds or order name that is not a total (the code tree's ``definitions``).
    """
    code_mode = spec.layout == "code"
    n = forest.height
    maxing = [c for c in maxed() if c in forest.columns]
    summing = [c for c in counted() if c in forest.columns and c not in maxing]  # a lean forest has only what is shown
    summing += [c for c in forest.columns if is_sample(c)]  # summed like the metrics
    parent = forest["parent"].to_numpy().astype(np.int64)
    values = np.empty((len(summing) + 1, n), np.int64)  # one metric per row, + the node count
    for i, c in enumerate(summing):
        values[i] = forest[c].to_numpy()
    values[len(summing)] = 1
    sums = values.sum(axis=1)
    root = {"total_" + c: int(sums[i]) for i, c in enumerate(summing)}
    root["total_definition_count"] = n
    accumulate_subtrees(parent, values)  # the self values stay in the forest's columns
    frame = forest.with_columns(
        *(pl.Series("total_" + c, values[i]) for i, c in enumerate(summing)),
        pl.Series("total_definition_count", values[len(summing)]),
    )
    del values
    if maxing:  # the largest own value in each subtree
        top = np.array([forest[c].to_numpy() for c in maxing], dtype=np.int64)
        root |= {"total_" + c: int(top[i].max(initial=0)) for i, c in enumerate(maxing)}
        accumulate_max(parent, top)
        frame = frame.with_columns(pl.Series("total_" + c, top[i]) for i, c in enumerate(maxing))
    frame, root = with_ratios(frame, spec.time_scale), with_root_ratios(root, spec.time_scale)

    match_all = spec.start is None
    match = np.zeros(n, np.bool_) if match_all else flags(frame, matches("name", spec.start))
    is_start, start_of, depth = _starts(parent, match, match_all)
    frame = frame.with_columns(pl.Series("depth", depth))
    trim = flags(frame, matches("name", spec.trim))
    too_deep = depth > spec.max_depth
    cond = flags(frame, should_show(spec))
    shown, dparent = _visit(parent, is_start, start_of, trim | too_deep, trim | too_deep, cond, spec.root_visits,
                            code_mode)

    if spec.displayed_only:
        own = np.empty((n, len(summing) + 1), np.int64)
        for i, c in enumerate(summing):
            own[:, i] = forest[c].to_numpy()
        own[:, len(summing)] = 1
        rtotals, rroot = _displayed_sums(shown, dparent, own)
        frame = frame.with_columns(
            *(pl.Series("total_" + c, rtotals[:, i]) for i, c in enumerate(summing)),
            pl.Series("total_definition_count", rtotals[:, len(summing)]),
        )
        root = {"total_" + c: int(rroot[i]) for i, c in enumerate(summing)}
        root["total_definition_count"] = int(rroot[len(summing)]) + 1  # the root counts itself (quirk)
        if maxing:
            mtotals, mroot = _displayed_max(shown, dparent, np.stack([forest[c].to_numpy() for c in maxing], axis=1)
                                            .astype(np.int64))
            frame = frame.with_columns(pl.Series("total_" + c, mtotals[:, i]) for i, c in enumerate(maxing))
            root |= {"total_" + c: int(mroot[i]) for i, c in enumerate(maxing)}
        frame, root = with_ratios(frame, spec.time_scale), with_root_ratios(root, spec.time_scale)

    # Order each displayed node's children: integer sort keys over the shown rows only, then one
    # gather of the whole frame in display order.
    idx = np.flatnonzero(shown)
    cols, desc = sort_key(spec.order)
    if "name_rank" in frame.columns:  # a precomputed rank of `name` sorts faster than the strings
        cols = ["name_rank" if c == "name" else c for c in cols]
    at = pl.Series(idx)
    keys = pl.DataFrame(  # no column but these for the layout order
        [*(frame[c].gather(at) for c in cols if c != "pre"), pl.Series("_dparent", dparent[idx]), pl.Series("pre", idx)]
    )
    perm = keys.select(pl.arg_sort_by(["_dparent", *cols], descending=[False, *desc])).to_series().to_numpy()
    del keys
    rows_sorted = idx[perm]
    del perm, idx, is_start, start_of, trim, too_deep, cond
    # displayed parents as positions in that sorted order
    row_of = np.full(n, -1, np.int64)
    row_of[rows_sorted] = np.arange(rows_sorted.shape[0])
    dp = dparent[rows_sorted]
    dp_rows = np.where(dp >= 0, row_of[np.maximum(dp, 0)], -1)
    del row_of, dp, dparent, shown
    order, level = tree_order(dp_rows)
    # each displayed row's parent as a row of the result (display order)
    row_in_result = np.empty(order.shape[0], np.int64)
    row_in_result[order] = np.arange(order.shape[0])
    up = dp_rows[order]
    parent_row = np.where(up >= 0, row_in_result[np.maximum(up, 0)], -1)
    del dp_rows, up, row_in_result
    # The displayed rows, without the forest's bookkeeping columns (see _ONE_GATHER_CELLS).
    shown_frame = frame.drop(["pos", "parent", "name_rank"], strict=False)
    if keep is not None:
        shown_frame = shown_frame.select(c for c in shown_frame.columns if c in keep)
    del frame, forest, parent
    at = pl.Series(rows_sorted[order])
    del rows_sorted, order
    if at.len() * shown_frame.width <= _ONE_GATHER_CELLS:
        out = shown_frame[at]  # one gather, every column at once
    else:
        out = {}
        for c in shown_frame.columns:
            out[c] = shown_frame[c].gather(at)
            shown_frame = shown_frame.drop(c)
        out = pl.DataFrame(out)
    return out.with_columns(pl.Series("level", level), pl.Series("parent_row", parent_row)), root


def under_root(rows: pl.DataFrame, root_row: pl.DataFrame) -> pl.DataFrame:
    """``display``'s rows (or any frame with ``level`` and ``parent_row``) below a one-row frame
    of the root's values: the root is row 0 at level 0, the rows' parents move one row down and
    the top rows' parent is the root."""
    root_row = root_row.with_columns(pl.lit(0, pl.Int64).alias("level"), pl.lit(-1, pl.Int64).alias("parent_row"))
    return pl.concat([root_row, rows.with_columns(pl.col("parent_row") + 1)], how="diagonal_relaxed")


def keep_accounted(forest: pl.DataFrame) -> pl.DataFrame:
    """tfprof's Account for scope and code trees: keep accounted nodes and their ancestors,
    renumbered in pre-order."""
    accounted = forest["accounted"]
    if accounted.all():
        return forest
    parent = forest["parent"].to_numpy().astype(np.int64)
    below = subtree_sums(parent, forest["accounted"].to_numpy().astype(np.int64).reshape(-1, 1))
    keep = below[:, 0] > 0
    kept = forest.filter(pl.Series(keep))
    new_pos = np.full(len(parent), -1, np.int64)
    new_pos[kept["pos"].to_numpy()] = np.arange(kept.height)
    old_parent = kept["parent"].to_numpy()
    return kept.with_columns(
        pl.Series("pos", np.arange(kept.height)),
        pl.Series("parent", np.where(old_parent >= 0, new_pos[np.maximum(old_parent, 0)], -1)),
    )


def warm_up() -> None:
    """Load the display pass's compiled kernels from numba's cache: numba's first call in a
    process costs ~0.3 s, and each kernel's first call a few milliseconds more."""
    parent = np.array([-1, 0], np.int64)
    accumulate_subtrees(parent, np.ones((1, 2), np.int64))
    tree_order(parent)
    is_start, start_of, _ = _starts(parent, np.zeros(2, np.bool_), True)
    none = np.zeros(2, np.bool_)
    shown, dparent = _visit(parent, is_start, start_of, none, none, ~none, True, False)
    _displayed_sums(shown, dparent, np.ones((2, 1), np.int64))

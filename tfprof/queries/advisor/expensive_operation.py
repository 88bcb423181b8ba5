"""ExpensiveOperationChecker (docs/TFPROF_BEHAVIOUR.md, 'ExpensiveOperationChecker'): where the time goes, by op type,
graph node and code.

tfprof runs three canned views and reads their top rows; so do we, through the same view
queries the scope, op and code commands use. One frame, sections in tfprof's report order:

* ``op``: the op view (max_depth 3, min_micros 1, order by micros), first 3 rows: the op type's
  self times and ``share``, its exec time in percent of the root's total (tfprof adds 1e-10 to
  the divisor).
* ``scope``: the scope view (max_depth 100, min_micros 100, order by micros), first 3 children
  of the root: the node's subtree totals, which the view ordered and filtered them by. tfprof
  prints their self times instead, and a name scope has none of its own: it reported the scope
  holding nearly all the time as "0us" (docs/COMPATIBILITY.md).
* ``code``: the code view (max_depth 100, min_micros 1, order by micros). From the root, go down
  while a node has exactly one child; below that node, walk at most 4 levels of the first 3
  children of each node that has at least 2, keeping those with total time >= 1 ms; totals.
  The start node itself is a row with depth -1 and rank 0 (not printed): when it has children
  but none reaches 1 ms, tfprof still adds a report, an empty one.

Columns: ``section``, ``rank`` (1-based within the section), ``depth`` (code: level below the
start node, -1 for the start node, else 0), ``name``, ``cpu_exec_micros``, ``accelerator_exec_micros``,
``exec_micros`` (self values in op, subtree totals in scope and code),
``share`` (op only). ``Evidence.missing`` has ``run_meta`` when the profile has no steps (the
op section is then skipped) and ``code_traces`` without code traces (no code section).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tfprof.profile import Profile
from tfprof.queries.advisor.base import CheckOptions, Evidence
from tfprof.queries.code import code
from tfprof.queries.indexes.code_trie import NoCodeTraces
from tfprof.queries.op import op_view
from tfprof.queries.options import Options
from tfprof.queries.scope import scope
from tfprof.queries.ticks import time_scale, whole_micros

TOP = 3  # rows per section (and children per code node)
# The canned views' options (expensive_operation_checker.h); the rest are tfprof's defaults.
OP_OPTIONS = Options(max_depth=3, min_micros=1, order_by="micros", select=("micros", "occurrence"), output="none")
SCOPE_OPTIONS = Options(max_depth=100, min_micros=100, order_by="micros", select=("micros",), output="none")
CODE_OPTIONS = Options(max_depth=100, min_micros=1, order_by="micros", select=("micros",), output="none")
CODE_MIN_MICROS = 1000  # code nodes below 1 ms are skipped
CODE_MAX_LEVEL = 3  # deepest level printed below the start node (0-based)
START, NOT_SHOWN = -1, -2  # code-section depth of the start node; of rows left out

TIMES = ("cpu_exec_micros", "accelerator_exec_micros", "exec_micros")
SCHEMA = {
    "section": pl.String,
    "rank": pl.Int64,
    "depth": pl.Int64,
    "name": pl.String,
    **{t: pl.Int64 for t in TIMES},
    "share": pl.Float64,
}


def top_op_types(prof: Profile) -> pl.DataFrame:
    """The op section: the first rows of the op view, with their share of all time."""
    view = op_view(prof, OP_OPTIONS)
    total = view.root["total_exec_micros"] + 1e-10
    return view.rows.head(TOP).select(
        pl.lit("op").alias("section"),
        (pl.int_range(pl.len()) + 1).alias("rank"),
        pl.lit(0).alias("depth"),
        "name",
        *TIMES,
        (100.0 * pl.col("exec_micros") / total).alias("share"),
    )


def top_graph_nodes(prof: Profile) -> pl.DataFrame:
    """The scope section: the root's first displayed children (level 1) and their totals."""
    rows = scope(prof, SCOPE_OPTIONS).filter(pl.col("level") == 1).head(TOP)
    return rows.select(
        pl.lit("scope").alias("section"),
        (pl.int_range(pl.len()) + 1).alias("rank"),
        pl.lit(0).alias("depth"),
        "name",
        *(pl.col("total_" + t).alias(t) for t in TIMES),
    )


def _display_parents(frame: pl.DataFrame) -> pl.DataFrame:
    """Display rows in pre-order (``name``, totals) with ``parent`` (row of the displayed
    parent, -1 for the root) and ``rank`` among siblings."""
    rows = frame.select("name", pl.col("parent_row").alias("parent"), *("total_" + t for t in TIMES))
    return rows.with_columns(pl.col("parent").cum_count().over("parent").cast(pl.Int64).alias("rank"))


def code_hotspots(prof: Profile) -> pl.DataFrame:
    """The code section (see the module doc), rows in display order."""
    frame, _, _ = code(prof, CODE_OPTIONS)
    rows = _display_parents(frame)
    parent = rows["parent"].to_numpy()
    children = np.bincount(parent[parent >= 0], minlength=rows.height)
    # Go down single-child chains from the root (a loop over depth, not rows).
    start = 0
    while children[start] == 1:
        start = int(np.flatnonzero(parent == start)[0])
    if children[start] == 0:
        return pl.DataFrame(schema=SCHEMA)  # tfprof: no report
    min_ticks = CODE_MIN_MICROS * time_scale(prof)  # the view's times are in the profile's ticks (queries/ticks.py)
    big = (rows["total_exec_micros"].to_numpy() >= min_ticks) & (rows["rank"].to_numpy() <= TOP)
    level = np.full(rows.height, NOT_SHOWN, np.int64)
    level[start] = START
    heads = np.array([start])
    for depth in range(CODE_MAX_LEVEL + 1):
        hit = np.isin(parent, heads) & big
        level[hit] = depth
        heads = np.flatnonzero(hit & (children > 1))
    return rows.with_columns(pl.Series("depth", level)).filter(pl.col("depth") != NOT_SHOWN).select(
        pl.lit("code").alias("section"),
        pl.int_range(pl.len()).alias("rank"),
        "depth",
        "name",
        *(pl.col("total_" + t).alias(t) for t in TIMES),
    )


def _has_code_traces(prof: Profile) -> bool:
    """tfprof's has_code_traces(): the profile's flag (from a ProfileProto or the op log)."""
    if prof.row_counts().get("info", 0) > 0:
        return bool(prof.frame("info")["has_trace"][0])
    return prof.row_counts().get("code_frames", 0) > 0


def expensive_operations(prof: Profile, options: CheckOptions) -> Evidence:
    """The check: op, scope and code sections (tfprof ignores the options)."""
    parts, missing = [], []
    if prof.row_counts().get("steps", 0) == 0:
        missing.append("run_meta")  # tfprof skips the op view, still runs the other two
    else:
        parts.append(top_op_types(prof))
    parts.append(top_graph_nodes(prof))
    code_rows = None
    if _has_code_traces(prof):
        try:
            code_rows = code_hotspots(prof)
        except NoCodeTraces:
            pass
    if code_rows is None:
        missing.append("code_traces")
    else:
        parts.append(code_rows)
    scale = time_scale(prof)  # ns ticks for a foreign trace: back to tfprof's whole µs
    parts = [whole_micros(p, scale).cast({c: t for c, t in SCHEMA.items() if c in p.columns}) for p in parts]
    rows = pl.concat([pl.DataFrame(schema=SCHEMA), *parts], how="diagonal")
    return Evidence(rows, tuple(missing))

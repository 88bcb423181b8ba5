"""The GPU work under each displayed node of a scope or graph view (``-select kernels``, ours).

A foreign trace's kernels, copies and memsets are charged to the op that launched them
(docs/FOREIGN.md, 'GPU events'): their time is that op's accelerator time. ``launched`` lists,
for each displayed row whose node launched any, that work by name: how often it ran and how
long, in the view's terms (one step with ``-step N``; with ``-step -1``, the total over the
capture divided by its steps, as the node's own times: ``tfprof.queries.indexes.means``). So a
row's kernel times add up to its own accelerator time (to the ns, less one ns per kernel name
for the division), and the report can show them beneath the op that spends them.
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.indexes.means import capture_steps

SCHEMA = {"row": pl.UInt32, "name": pl.String, "kind": pl.String, "runs": pl.Int64, "ns": pl.Int64}


def launched(prof: Profile, frame: pl.DataFrame, step: int) -> pl.DataFrame:
    """One row per (displayed row, GPU event name) the row's node launched: ``row`` (the row of
    ``frame``), ``name``, ``kind`` (``kernels.kind``), ``runs`` and ``ns``; per row, most time
    first. Empty for a profile without GPU events (tfprof's own, a CPU capture)."""
    if "node_id" not in frame.columns or not prof.row_counts().get("kernels", 0):
        return pl.DataFrame(schema=SCHEMA)
    work = prof.lazy("kernels").filter(pl.col("node_id").is_not_null())
    if step >= 0:
        work = work.filter(pl.col("step") == step)
    steps = capture_steps(prof) if step < 0 else 0
    total = pl.col("duration_ns").sum()
    per_name = work.group_by("node_id", pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String)).agg(
        pl.len().cast(pl.Int64).alias("runs"), (total // steps if steps else total).alias("ns"))
    rows = frame.lazy().select("node_id").with_row_index("row").filter(pl.col("node_id").is_not_null())
    return rows.join(per_name, on="node_id").sort(["row", "ns", "name"], descending=[False, True, False]).select(
        list(SCHEMA)).collect().cast(SCHEMA)

"""Profile-wide totals per step, as tfprof's root node reports them for an all-accounting view."""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.indexes.means import STEP_METRICS
from tfprof.queries.metrics import node_metrics


def totals(prof: Profile, step: int = -1, *, op_type: str | None = None) -> dict[str, int]:
    """Sum of every metric over all nodes (or the nodes having ``op_type``) for ``step``."""
    per_node = node_metrics(prof, step)
    if op_type is not None:
        having = prof.lazy("node_types").filter(pl.col("op_type") == op_type).select("node_id").unique()
        per_node = per_node.join(having, on="node_id", how="semi")
    row = per_node.select(
        pl.len().alias("nodes"), pl.col("params", "float_ops", *STEP_METRICS).sum()
    ).collect()
    return {k: int(v or 0) for k, v in row.row(0, named=True).items()}

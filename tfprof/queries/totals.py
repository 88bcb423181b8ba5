"""Profile-wide totals per step, as tfprof's root node reports them for an all-accounting view.

``node_step_metrics`` is the per-node value of every step-dependent metric for one ``step``
option value (spec 2.3.5): a step's own value, or for ``step=-1`` the node's mean over the steps
in which it has a record (integer division by that count, not by the number of steps — a tfprof
quirk we reproduce). ``totals`` sums them over all nodes.
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile

TIME = ("exec_micros", "accelerator_exec_micros", "cpu_exec_micros")
MEMORY = ("requested_bytes", "peak_bytes", "residual_bytes", "output_bytes")
STEP_METRICS = ("run_count", *TIME, *MEMORY)


def per_node_step(prof: Profile) -> pl.LazyFrame:
    """One row per (node_id, step) with run_count, the three times and the four byte metrics."""
    times = (
        prof.lazy("execs")
        .group_by("node_id", "step")
        .agg(
            pl.col("duration_micros").sum().alias("exec_micros"),
            pl.col("duration_micros").filter(pl.col("kind") == "accelerator").sum().alias("accelerator_exec_micros"),
            pl.col("duration_micros").filter(pl.col("kind") == "cpu").sum().alias("cpu_exec_micros"),
        )
    )
    memory = prof.lazy("memory").group_by("node_id", "step").agg(pl.col(*MEMORY).sum())
    return (
        prof.lazy("node_steps")
        .select("node_id", "step", "run_count")
        .join(times, on=["node_id", "step"], how="left")
        .join(memory, on=["node_id", "step"], how="left")
        .with_columns(pl.col(*TIME, *MEMORY).fill_null(0))
    )


def node_step_metrics(prof: Profile, step: int = -1) -> pl.LazyFrame:
    """Per node: the step metrics for option ``step`` (0 where the node has no record)."""
    rows = per_node_step(prof)
    if step >= 0:
        per_node = rows.filter(pl.col("step") == step).drop("step")
    else:
        per_node = rows.group_by("node_id").agg(
            (pl.col(m).sum() // pl.len()).alias(m) for m in STEP_METRICS
        ).with_columns(pl.lit(True).alias("_has_execs"))
    ran = prof.lazy("node_steps").select("node_id").unique().with_columns(pl.lit(True).alias("has_execs"))
    nodes = prof.lazy("nodes").select("node_id", "params", pl.col("float_ops").alias("static_float_ops"))
    out = (
        nodes.join(per_node, on="node_id", how="left")
        .join(ran, on="node_id", how="left")
        .with_columns(pl.col(*STEP_METRICS).fill_null(0), pl.col("has_execs").fill_null(False))
    )
    # spec 2.3.5: float_ops(step) is the static count without RunMetadata, else count x run_count.
    return out.with_columns(
        pl.when(pl.col("has_execs"))
        .then(pl.col("static_float_ops") * pl.col("run_count"))
        .otherwise(pl.col("static_float_ops"))
        .alias("float_ops")
    ).select("node_id", "params", "float_ops", *STEP_METRICS)


def totals(prof: Profile, step: int = -1, *, op_type: str | None = None) -> dict[str, int]:
    """Sum of every metric over all nodes (or the nodes having ``op_type``) for ``step``."""
    per_node = node_step_metrics(prof, step)
    if op_type is not None:
        having = prof.lazy("node_types").filter(pl.col("op_type") == op_type).select("node_id").unique()
        per_node = per_node.join(having, on="node_id", how="semi")
    row = per_node.select(
        pl.len().alias("nodes"), pl.col("params", "float_ops", *STEP_METRICS).sum()
    ).collect()
    return {k: int(v or 0) for k, v in row.row(0, named=True).items()}

"""Allocation instants of a foreign trace charged to ops, or to their step (docs/FOREIGN.md, 'memory').

An instant inside an op (innermost, on its thread) belongs to that op's execution. One outside every
op (PyTorch frees a step's tensors between ops; the optimizer allocates around them) belongs to
the step it falls in, through one synthetic node, ``OUTSIDE_OPS``, that holds one memory record per
step. So the ``allocations`` table has one row per instant and the ``memory`` records add up to
every byte the trace recorded.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from tfprof.schema import conform

OUTSIDE_OPS = "[memory outside ops]"
"""The name (and op type) of the node holding the allocations made outside every op."""

_ZEROS = ("output_bytes", "host_temp_bytes", "host_persistent_bytes", "accelerator_temp_bytes",
          "accelerator_persistent_bytes", "allocator_bytes_in_use")


def instants(ev: pl.DataFrame, op_parent: np.ndarray) -> pl.DataFrame:
    """The ``memory`` events of ``ev`` (``row``, ``event_id``, ``start_ns``, ``mem_bytes``) with
    ``owner``: the row of the op execution around each, -1 for none."""
    rows = np.flatnonzero((ev["role"] == "memory").to_numpy())
    return ev[rows].select("row", "event_id", "start_ns", "mem_bytes").with_columns(
        pl.Series("owner", op_parent[rows], dtype=pl.Int64))


def tables(mem: pl.DataFrame, us) -> dict[str, pa.Table]:
    """``allocations`` (one row per instant) and ``memory`` (one record per op execution that
    allocated or freed, and one per step for the instants outside ops) from ``mem``: the
    instants with their ``node_id``, ``step``, ``owner`` (-1: outside ops) and ``end_micros``
    (the end of the owner's execution; the last instant's time for a step's record). ``us``
    turns ns into tfprof's whole µs."""
    mem = mem.sort("event_id").with_columns(
        # one memory record per op execution, and one per step for the instants outside ops
        pl.when(pl.col("owner") >= 0).then(pl.col("owner")).otherwise(-1 - pl.col("step")).alias("_record"))
    allocations = mem.select("node_id", "step", alloc_micros=us(pl.col("start_ns")), alloc_bytes="mem_bytes")
    per_exec = mem.with_columns(pl.col("mem_bytes").cum_sum().over("_record").alias("_live")).group_by(
        "_record", "node_id", "step").agg(
        pl.col("end_micros").max(),
        pl.col("mem_bytes").filter(pl.col("mem_bytes") > 0).sum().alias("requested_bytes"),
        pl.col("_live").max().clip(0).alias("peak_bytes"),
        pl.col("mem_bytes").sum().clip(0).alias("residual_bytes"),
    ).sort("_record").with_columns(pl.int_range(pl.len()).over("node_id", "step").cast(pl.Int32).alias("seq"))
    memory = per_exec.select("node_id", "step", "seq", pl.col("end_micros").alias("memory_micros"),
                             "requested_bytes", "peak_bytes", "residual_bytes",
                             **{c: pl.lit(0, pl.Int64) for c in _ZEROS})
    return {"memory": conform("memory", memory.to_arrow()), "allocations": conform("allocations", allocations.to_arrow())}


def outside_steps(mem: pl.DataFrame, us) -> pl.DataFrame:
    """The ``node_steps`` rows of the ``OUTSIDE_OPS`` node (``mem``: its instants, with
    ``node_id`` and ``step``): no runs, and the span of its instants in each step."""
    return mem.group_by("node_id", "step").agg(
        pl.lit(0, pl.Int64).alias("run_count"), us(pl.col("start_ns")).min().alias("all_start_micros"),
        us(pl.col("start_ns")).max().alias("latest_end_micros"))

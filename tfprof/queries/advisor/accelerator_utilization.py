"""AcceleratorUtilizationChecker (docs/TFPROF_BEHAVIOUR.md, 'AcceleratorUtilizationChecker'): how busy each GPU was.

Per node placed on a GPU (canonical device containing ``gpu``) that has any step record, only
its record of its own highest step counts (tfprof_advisor: "TODO: use multiple steps", so the
steps of different nodes may differ — reproduced). Per device: the earliest non-zero start,
the latest end, and the sum of accelerator (stream:all) kernel time; utilization is kernel
time over that wall span. Devices whose span is not positive are left out.

The same query in SQL is ``accelerator_utilization.sql`` next to this file (tests check that
both give the same frame).

A foreign trace (Kineto, XSpace) has its own definition of a busy GPU, the one ``tfprof steps``,
the overview and GpuIdleChecker use (``tfprof.queries.breakdown``): the share of the profiled
steps' windows in which some kernel, copy or memset ran, overlaps counted once. Summing kernel
time instead, as tfprof does, gives more than 1 on a GPU running several streams at once.
There ``start_micros`` and ``end_micros`` are the first window's start and the last one's end,
``wall_micros`` the windows' total and ``accelerator_exec_micros`` the busy time in them.
"""

from __future__ import annotations

from importlib import resources

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.advisor.base import CheckOptions, Evidence
from tfprof.queries.advisor.trace import has_trace

# tfprof reports utilization >= 0.5 as plain "utilization", and below as "low utilization",
# in two branches ((0.2, 0.5) and <= 0.2) that print the same text; the severity keeps them apart.
OK_AT_LEAST = 0.5  # severity "ok" from here up
LOW_ABOVE = 0.2  # "low" in (0.2, 0.5); "very_low" at 0.2 and below


def utilization_frame(prof: Profile) -> pl.DataFrame:
    """Per GPU device, in name order: ``device``, ``start_micros``, ``end_micros``,
    ``wall_micros``, ``accelerator_exec_micros``, ``utilization``, ``severity``."""
    if has_trace(prof):
        return _busy_frame(prof)
    steps = prof.lazy("node_steps")
    last = steps.group_by("node_id").agg(pl.col("step").max())
    kernels = (
        prof.lazy("execs")
        .filter(pl.col("kind").cast(pl.String) == "accelerator")
        .group_by("node_id", "step")
        .agg(pl.col("duration_micros").sum().alias("accelerator_exec_micros"))
    )
    gpu_nodes = prof.lazy("nodes").select("node_id", pl.col("canonical_device").cast(pl.String).alias("device")).filter(
        pl.col("device").str.contains("gpu", literal=True)
    )
    per_node = (
        steps.join(last, on=["node_id", "step"])
        .join(gpu_nodes, on="node_id")
        .join(kernels, on=["node_id", "step"], how="left")
        .with_columns(pl.col("accelerator_exec_micros").fill_null(0))
    )
    per_device = (
        per_node.group_by("device")
        .agg(
            # tfprof: the first start seen, then the min with every non-zero start
            pl.col("all_start_micros").filter(pl.col("all_start_micros") != 0).min().fill_null(0).alias("start_micros"),
            pl.col("latest_end_micros").max().clip(lower_bound=0).alias("end_micros"),
            pl.col("accelerator_exec_micros").sum(),
        )
        .with_columns((pl.col("end_micros") - pl.col("start_micros")).alias("wall_micros"))
        .filter(pl.col("wall_micros") > 0)
        .with_columns((pl.col("accelerator_exec_micros").cast(pl.Float64) / pl.col("wall_micros")).alias("utilization"))
        .with_columns(_severity)
        .sort("device")  # tfprof keeps devices in a std::map: byte order
    )
    return per_device.select(*COLUMNS).collect()


COLUMNS = ("device", "start_micros", "end_micros", "wall_micros", "accelerator_exec_micros", "utilization", "severity")
_severity = (pl.when(pl.col("utilization") >= OK_AT_LEAST).then(pl.lit("ok"))
             .when(pl.col("utilization") > LOW_ABOVE).then(pl.lit("low"))
             .otherwise(pl.lit("very_low")).alias("severity"))


def _busy_frame(prof: Profile) -> pl.DataFrame:
    """A foreign trace's rows (module docstring): ``tfprof steps``' busy time over its windows."""
    from tfprof.queries.breakdown import breakdown

    rows = breakdown(prof).filter(pl.col("device").is_not_null())
    busy = pl.col("window_ns") - pl.col("idle_ns")
    micros = lambda e: (e / 1000).round(0).cast(pl.Int64)  # noqa: E731 - the µs columns tfprof's rows have
    label = pl.when(pl.col("device").str.contains(r"^\d+$")).then(pl.lit("/device:gpu:") + pl.col("device")) \
        .otherwise(pl.col("device"))
    return (rows.group_by("device").agg(
        pl.col("window_start_ns").min().alias("_start"), (pl.col("window_start_ns") + pl.col("window_ns")).max().alias("_end"),
        pl.col("window_ns").sum().alias("_wall"), busy.sum().alias("_busy"))
        .filter(pl.col("_wall") > 0)
        .with_columns(label.alias("device"), micros(pl.col("_start")).alias("start_micros"),
                      micros(pl.col("_end")).alias("end_micros"), micros(pl.col("_wall")).alias("wall_micros"),
                      micros(pl.col("_busy")).alias("accelerator_exec_micros"),
                      (pl.col("_busy") / pl.col("_wall")).alias("utilization"))
        .with_columns(_severity).sort("device").select(*COLUMNS))


def utilization_sql() -> str:
    """The SQL form of ``utilization_frame`` (same columns, same rows)."""
    return (resources.files(__package__) / "accelerator_utilization.sql").read_text()


def utilization(prof: Profile, options: CheckOptions) -> Evidence:
    """The check: one row per GPU with a positive wall span (tfprof ignores the options)."""
    return Evidence(utilization_frame(prof))

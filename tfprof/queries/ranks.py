"""A distributed job seen across its ranks (``tfprof ranks``, ``tfprof.ranks``): each rank's
steps side by side, the stragglers, the communication each rank waits in, and the ops whose
time differs between ranks.

Each rank's profile is read once into small frames (``rank_facts``); everything across ranks
is a query over those frames concatenated with a ``rank`` column, so a job of a thousand ranks
costs a thousand reads and one query.

Per rank and step (``rank_steps``): the step's window and its split into compute /
communication / memcpy / idle per accelerator, as ``tfprof steps`` defines them
(``tfprof.queries.breakdown``), and ``collective_ns``: the time a collective ran in the window —
the communication kernels' union on a GPU rank, the union of the collective ops on the CPU
(``gloo:all_reduce``, ``c10d::allreduce_``, ``nccl:…``, XLA's ``all-reduce`` …) where the rank
has no accelerator.

**Stragglers.** In a synchronous job every rank leaves a collective when the last one has
joined it, so the ranks that wait least in collectives are those the others wait for. For each
step, a rank's ``late_ns`` is the median ``collective_ns`` of the step's ranks less its own:
how much longer than the typical rank it worked before joining. A rank is a straggler when its
median ``late_ns`` over the steps exceeds ``threshold`` (a share) of the median step time. A job
that records no collective compares step times instead (``late_ns``: a rank's step time less
the step's median).

**Ops across ranks** (``op_spread``): per op (node name) and rank, its self time on the CPU and
the time of the accelerator work it launched, summed over the profiled steps; an op a rank
never ran counts 0 there. Sorted by spread (largest less smallest rank), with the coefficient of
variation (standard deviation over mean, over all ranks) and the ranks at each end.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.advisor.trace import cut_at_windows, has_trace, union
from tfprof.queries.breakdown import breakdown

# a collective, by name: NCCL/RCCL kernels and ops, gloo's, c10d's, PyTorch's record of them,
# XLA's collective HLO ops
COLLECTIVE = (r"(?i)nccl|rccl|gloo:|c10d::|record_param_comms|all[-_]?reduce|all[-_]?gather|reduce[-_]scatter"
              r"|all[-_]to[-_]all|collective-permute")

STEP_SCHEMA = {
    "rank": pl.Int64, "step": pl.Int64, "device": pl.String, "window_ns": pl.Int64, "compute_ns": pl.Int64,
    "communication_ns": pl.Int64, "memcpy_ns": pl.Int64, "idle_ns": pl.Int64, "utilization": pl.Float64,
    "collective_ns": pl.Int64,
}
OP_SCHEMA = {"rank": pl.Int64, "name": pl.String, "cpu_ns": pl.Int64, "accelerator_ns": pl.Int64}


@dataclass(frozen=True)
class RankFacts:
    """What the cross-rank queries read of one rank's profile: ``steps`` (``STEP_SCHEMA`` less
    ``rank``) and ``ops`` (``OP_SCHEMA`` less ``rank``)."""

    steps: pl.DataFrame
    ops: pl.DataFrame


def rank_facts(prof: Profile) -> RankFacts:
    """One rank's steps and op times (module docstring)."""
    rows = breakdown(prof)
    cpu = _cpu_collectives(prof, rows)
    steps = (rows.join(cpu, on="step", how="left")
             .with_columns(pl.when(pl.col("device").is_not_null()).then(pl.col("communication_total_ns"))
                           .otherwise(pl.col("_cpu_ns").fill_null(0)).alias("collective_ns"))
             .select([c for c in STEP_SCHEMA if c != "rank"]))
    names = prof.lazy("nodes").select("node_id", pl.col("name").cast(pl.String))
    ops = (prof.lazy("execs").select("node_id", pl.col("kind").cast(pl.String), "duration_ns")
           .join(names, on="node_id")
           .group_by("name")
           .agg(pl.col("duration_ns").filter(pl.col("kind") == "cpu").sum().alias("cpu_ns"),
                pl.col("duration_ns").filter(pl.col("kind") == "accelerator").sum().alias("accelerator_ns"))
           .collect())
    if has_trace(prof):  # a collective the trace records beside the ops (gloo's work on its own threads)
        ops = pl.concat([ops, prof.lazy("trace_events")
                         .filter(pl.col("node_id").is_null() & (pl.col("phase").cast(pl.String) == "X")
                                 & pl.col("name").cast(pl.String).str.contains(COLLECTIVE))
                         .group_by(pl.col("name").cast(pl.String))
                         .agg(pl.col("duration_ns").sum().alias("cpu_ns"), pl.lit(0, pl.Int64).alias("accelerator_ns"))
                         .collect()], how="vertical_relaxed")
    return RankFacts(steps.cast({c: STEP_SCHEMA[c] for c in steps.columns}),
                     ops.cast({c: OP_SCHEMA[c] for c in ops.columns}))


def _cpu_collectives(prof: Profile, rows: pl.DataFrame) -> pl.DataFrame:
    """Per step, the length of the union of the collective CPU ops inside its window (``_cpu_ns``)."""
    empty = pl.DataFrame(schema={"step": pl.Int64, "_cpu_ns": pl.Int64})
    if not has_trace(prof) or rows.height == 0:
        return empty
    ops = (prof.lazy("trace_events")
           .filter((pl.col("phase").cast(pl.String) == "X") & pl.col("name").cast(pl.String).str.contains(COLLECTIVE))
           .select("event_id", pl.col("name").cast(pl.String), "start_ns",
                   (pl.col("start_ns") + pl.col("duration_ns")).alias("end_ns"), pl.lit("cpu").alias("device"))
           .collect())
    if ops.height == 0:
        return empty
    windows = (rows.select("step", "window_start_ns", "window_ns").unique("step").sort("window_start_ns", "step")
               .with_columns((pl.col("window_start_ns") + pl.col("window_ns")).alias("window_end_ns")))
    pieces = cut_at_windows(union(ops, ["device"]), windows)
    return pieces.group_by("step").agg((pl.col("end_ns") - pl.col("start_ns")).sum().cast(pl.Int64).alias("_cpu_ns"))


def job_frames(facts: dict[int, RankFacts]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every rank's steps and ops as two frames with a ``rank`` column."""
    steps = pl.concat([f.steps.with_columns(pl.lit(r, pl.Int64).alias("rank")) for r, f in facts.items()],
                      how="vertical_relaxed") if facts else pl.DataFrame(schema=STEP_SCHEMA)
    ops = pl.concat([f.ops.with_columns(pl.lit(r, pl.Int64).alias("rank")) for r, f in facts.items()],
                    how="vertical_relaxed") if facts else pl.DataFrame(schema=OP_SCHEMA)
    return steps.select(list(STEP_SCHEMA)).cast(STEP_SCHEMA), ops.select(list(OP_SCHEMA)).cast(OP_SCHEMA)


def per_rank_step(steps: pl.DataFrame) -> pl.DataFrame:
    """One row per (rank, step): the window, the parts and ``collective_ns`` averaged over the
    rank's accelerators (exact where it has one), ``late_ns`` (module docstring), sorted by step
    then rank."""
    parts = ["compute_ns", "communication_ns", "memcpy_ns", "idle_ns", "collective_ns"]
    per = (steps.group_by("rank", "step")
           .agg(pl.col("window_ns").max(), pl.len().alias("devices"),
                *(pl.col(c).mean().round(0).cast(pl.Int64) for c in parts), pl.col("utilization").mean()))
    waits = per["collective_ns"].fill_null(0).sum() > 0
    basis = "collective_ns" if waits else "window_ns"
    median = pl.col(basis).median().over("step")
    late = (median - pl.col(basis)) if waits else (pl.col(basis) - median)
    return per.with_columns(late.round(0).cast(pl.Int64).alias("late_ns")).sort("step", "rank")


def rank_summary(per: pl.DataFrame, threshold: float = 0.05) -> pl.DataFrame:
    """One row per rank: its steps, median step time and parts, median ``late_ns``, its share of
    the job's median step (``late_share``) and ``straggler`` (``late_share`` over ``threshold``);
    sorted by ``late_ns``, the latest first."""
    step_median = per["window_ns"].median() or 0
    summary = per.group_by("rank").agg(
        pl.len().alias("steps"),
        *(pl.col(c).median().round(0).cast(pl.Int64) for c in
          ("window_ns", "compute_ns", "communication_ns", "memcpy_ns", "idle_ns", "collective_ns", "late_ns")))
    share = (pl.col("late_ns") / step_median) if step_median else pl.lit(0.0)
    return (summary.with_columns(share.alias("late_share"))
            .with_columns((pl.col("late_share") > threshold).alias("straggler"))
            .sort(pl.col("late_ns"), pl.col("rank"), descending=[True, False], nulls_last=True))


def op_spread(ops: pl.DataFrame, ranks: list[int]) -> pl.DataFrame:
    """Per op and metric (``cpu``: its self time; ``accelerator``: the GPU work it launched), its
    time across the job's ``ranks`` (module docstring), the widest spread first."""
    long = (ops.unpivot(["cpu_ns", "accelerator_ns"], index=["rank", "name"], variable_name="metric", value_name="ns")
            .with_columns(pl.col("metric").str.strip_suffix("_ns")).filter(pl.col("ns") > 0))
    every = pl.DataFrame({"rank": ranks}, schema={"rank": pl.Int64})
    dense = (long.select("name", "metric").unique().join(every, how="cross")
             .join(long, on=["name", "metric", "rank"], how="left").with_columns(pl.col("ns").fill_null(0)))
    ns = pl.col("ns")
    return (dense.group_by("name", "metric").agg(
        (ns > 0).sum().alias("present"),
        ns.min().alias("min_ns"), pl.col("rank").sort_by(ns, pl.col("rank")).first().alias("min_rank"),
        ns.max().alias("max_ns"), pl.col("rank").sort_by(ns, pl.col("rank"), descending=[True, False]).first().alias("max_rank"),
        ns.mean().alias("mean_ns"), ns.std(ddof=0).alias("_std"), ns.sum().alias("total_ns"))
        .with_columns((pl.col("_std") / pl.col("mean_ns")).alias("cv"), (pl.col("max_ns") - pl.col("min_ns")).alias("spread_ns"),
                      pl.col("name").str.contains(COLLECTIVE).alias("collective"))
        .select("name", "metric", "collective", "present", "min_ns", "min_rank", "max_ns", "max_rank", "mean_ns", "cv",
                "spread_ns", "total_ns")
        .sort(pl.col("spread_ns"), pl.col("name"), pl.col("metric"), descending=[True, False, False]))


FINDING_SCHEMA = {"check": pl.String, "rank": pl.Int64, "name": pl.String, "metric": pl.String, "value_ns": pl.Int64,
                  "share": pl.Float64}
IMBALANCE_FLOOR_NS = 100_000
"""The least spread per profiled step (100 µs) an op's time must have to be an ``imbalance``
finding, however short the steps: below it a difference between ranks is timer and scheduling
noise (an op of 18 µs on one rank and 13 µs on another is no imbalance)."""
IMBALANCE_FLOOR_SHARE = 0.01
"""The least spread an ``imbalance`` finding must have as a share of the median step, per
profiled step (1%): a difference smaller than that against the step is not worth a finding."""


def job_findings(per: pl.DataFrame, summary: pl.DataFrame, spread: pl.DataFrame, *, imbalance: float = 0.25,
                 wait_share: float = 0.2, top: int = 5) -> pl.DataFrame:
    """The job's findings, one row each: ``straggler`` (a straggler rank; ``value_ns`` its median
    ``late_ns``, ``share`` of the median step), ``imbalance`` (one of the ``top`` ops of the widest
    spread whose coefficient of variation reaches ``imbalance``, collectives aside: they wait for
    the others; ``value_ns`` the spread, ``share`` the cv; ``rank`` the rank with the most,
    ``metric`` the time that differs), ``communication_wait`` (the ranks spend a median ``share``
    of ``wait_share`` or more of each step in collectives; ``rank``: the one that waits most).

    An imbalance must also stand above the noise: its spread (summed over the profiled steps, as
    the op times are) must exceed, per step, both ``IMBALANCE_FLOOR_NS`` (100 µs) and
    ``IMBALANCE_FLOOR_SHARE`` (1%) of the median step."""
    step_median = per["window_ns"].median() or 0
    found = [summary.filter("straggler").select(
        pl.lit("straggler").alias("check"), "rank", pl.lit(None, pl.String).alias("name"),
        pl.lit(None, pl.String).alias("metric"), pl.col("late_ns").alias("value_ns"), pl.col("late_share").alias("share"))]
    steps = per["step"].n_unique()
    floor = steps * max(IMBALANCE_FLOOR_NS, IMBALANCE_FLOOR_SHARE * step_median)  # less is noise
    found.append(spread.filter(~pl.col("collective") & (pl.col("cv") >= imbalance) & (pl.col("spread_ns") > floor))
                 .head(top).select(pl.lit("imbalance").alias("check"), pl.col("max_rank").alias("rank"), "name",
                                   "metric", pl.col("spread_ns").alias("value_ns"), pl.col("cv").alias("share")))
    waits = per.filter(pl.col("window_ns") > 0).with_columns((pl.col("collective_ns") / pl.col("window_ns")).alias("s"))
    median_share = waits["s"].median() if waits.height else None
    if median_share is not None and step_median and median_share >= wait_share:
        most = summary.sort("collective_ns", "rank", descending=[True, False], nulls_last=True).row(0, named=True)
        found.append(pl.DataFrame({"check": ["communication_wait"], "rank": [most["rank"]], "name": [None], "metric": [None],
                                   "value_ns": [most["collective_ns"]], "share": [median_share]}, schema=FINDING_SCHEMA))
    return pl.concat([f.cast(FINDING_SCHEMA) for f in found], how="vertical")

"""Memory over time, per allocator: the bytes in use after each allocation event, each step's
peak, and what the ops had allocated when it came (``tfprof memory``, the UI's Memory page).

The events are the ``allocations`` table's. Where the source records what the allocator held
after each event (Kineto's ``Total Allocated``, XSpace's ``bytes_allocated``), that is the
curve: ``exact``. Elsewhere (a RunMetadata's or a ProfileProto's records) the curve is the
running sum of the events' bytes from the capture's first event: memory allocated before the
capture is not in it (``exact`` false). Events of one allocator at the same µs are one point
(their bytes summed, the largest recorded level kept). An event without an allocator (a
ProfileProto) counts on its node's device.

A profile of tfprof's own also has its node executions' memory records, per device
(``tfprof.schema.memory_levels.node_events``): a device whose records sample the GPU allocators'
bytes in use takes those samples as its levels (real tfprof's timeline and its peak), in place of
the allocation events of its nodes; a device with neither samples nor allocation events (a CPU)
takes the per-node estimate. A foreign profile's records are made of its events, so only its
events count. Levels that cannot be true (below 0 where recorded,
beyond 1 PiB, sums int64 cannot hold) are marked per step, never shown as if true
(``tfprof.schema.memory_levels``).

An op's bytes *at the peak* are what its events of that step on that allocator allocated, net of
what they freed, up to the peak's time: a trace records sizes, not which allocation a free
returns, so this is what each op added to the level the peak reached.
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.ticks import time_scale
from tfprof.schema import memory_levels


def _events(prof: Profile) -> pl.DataFrame:
    """The allocation events with their allocator (the node's device where none is recorded),
    the recorded level (null where none) and the node's name; read once per profile."""
    return prof.memo("memory_events", lambda: _read_events(prof))


def _read_events(prof: Profile) -> pl.DataFrame:
    alloc = prof.lazy("allocations")
    names = alloc.collect_schema().names()  # a store written before allocators were kept has neither column
    alloc = alloc.with_columns(*(pl.lit(None, kind).alias(c) for c, kind in (
        ("allocator", pl.String), ("bytes_in_use", pl.Int64), ("bytes_reserved", pl.Int64)) if c not in names))
    nodes = prof.lazy("nodes").select("node_id", pl.col("name").cast(pl.String),
                                      pl.col("canonical_device").cast(pl.String).alias("_device"))
    events = (alloc.join(nodes, on="node_id", how="left")
              .select(pl.coalesce(pl.col("allocator").cast(pl.String), "_device", pl.lit("")).alias("allocator"),
                      "step", pl.col("alloc_micros").alias("time_micros"), pl.col("alloc_bytes").alias("bytes"),
                      "bytes_in_use", "bytes_reserved", "node_id", "name", pl.lit("events").alias("source"),
                      pl.col("_device").fill_null(""))
              .collect())
    if time_scale(prof) != 1 or not prof.row_counts().get("memory", 0):
        return events.drop("_device")  # a foreign profile: its memory records are made of these events
    records = _node_records(prof, nodes)
    made = memory_levels.node_events(records)
    sampled = made.filter(pl.col("source") == "recorded")["allocator"].unique().to_list()
    events = events.filter(~pl.col("_device").is_in(sampled)).drop("_device")
    # the per-node estimate only where no allocation event is (its devices' own or their allocators')
    covered = set(events["allocator"].unique()) | set(
        records.filter(pl.col("node_id").is_in(events["node_id"].unique()))["allocator"].unique())
    made = made.filter((pl.col("source") == "recorded") | ~pl.col("allocator").is_in(list(covered)))
    return pl.concat([events, made.with_columns(pl.lit(None, pl.Int64).alias("bytes_reserved"))
                      .select(events.columns).cast(events.schema)])


def _node_records(prof: Profile, nodes: pl.LazyFrame) -> pl.DataFrame:
    """The memory records of ``prof``'s node executions with their device and start (a node's
    first execution in a step starts at its ``all_start_micros``; a later one's start is unknown)."""
    starts = prof.lazy("node_steps").select("node_id", "step", pl.lit(0, pl.Int32).alias("seq"),
                                            pl.col("all_start_micros").alias("start_micros"))
    return (prof.lazy("memory").join(nodes, on="node_id", how="left")
            .join(starts, on=["node_id", "step", "seq"], how="left")
            .select(pl.col("_device").fill_null("").alias("allocator"), "step", "node_id", "name", "start_micros",
                    "memory_micros", "peak_bytes", "residual_bytes", "allocator_bytes_in_use")
            .collect())


def memory_points(prof: Profile) -> pl.DataFrame:
    """One row per (allocator, step, µs) in time order: ``bytes`` (the events' sum), ``in_use``
    (the allocator's level after them; null beyond 1 PiB), ``events`` and ``exact`` (module
    docstring), and what cannot be true there (``tfprof.schema.memory_levels.points``); made
    once per profile (the steps, a curve and the ops at a peak all start from it)."""
    return prof.memo("memory_points", lambda: memory_levels.points(_events(prof)))


def memory_steps(prof: Profile) -> pl.DataFrame:
    """Per allocator and step: ``events``; the step's first and last event (µs); the level
    before the first (``start_bytes``), at the peak (``peak_bytes``, the start included, first
    reached ``peak_micros`` after the step's first event) and after the last (``end_bytes``);
    the bytes ``allocated`` and ``freed``; ``exact`` (module docstring); ``relative`` (a running
    sum below 0: memory from before the capture freed in it); ``damage``: what cannot be true
    (levels below 0, or beyond 1 PiB, whose numbers are null), null where nothing is wrong
    (``tfprof.schema.memory_levels``). Sorted by allocator, then step."""
    return prof.memo("memory_steps", lambda: memory_levels.steps(memory_points(prof)))


def memory_curve(prof: Profile, step: int, allocator: str) -> pl.DataFrame:
    """The points of one step on one allocator: ``time_micros`` (since the step's first event),
    ``bytes``, ``in_use``, ``reserved`` (null where not recorded)."""
    points = memory_points(prof).filter((pl.col("step") == step) & (pl.col("allocator") == allocator))
    return points.select((pl.col("time_micros") - pl.col("time_micros").min()).alias("time_micros"), "bytes", "in_use",
                         "reserved")


def at_peak(prof: Profile, step: int, allocator: str, top: int = 10) -> pl.DataFrame:
    """The ops with the most bytes allocated (net of frees) on ``allocator`` in ``step`` up to
    that step's peak: ``node_id``, ``name``, ``bytes``, ``events``; largest first, ``top`` rows;
    none where the step's levels are beyond 1 PiB (its peak is unknown)."""
    steps = memory_steps(prof).filter((pl.col("step") == step) & (pl.col("allocator") == allocator))
    if steps.height == 0 or steps["peak_micros"][0] is None:
        return pl.DataFrame(schema={"node_id": pl.Int64, "name": pl.String, "bytes": pl.Int64, "events": pl.UInt32})
    peak_at = steps["start_micros"][0] + steps["peak_micros"][0]
    ev = _events(prof).filter((pl.col("step") == step) & (pl.col("allocator") == allocator)
                              & (pl.col("time_micros") <= peak_at))
    return (ev.group_by("node_id", "name").agg(pl.col("bytes").sum(), pl.len().alias("events"))
            .filter(pl.col("bytes") > 0).sort(["bytes", "name"], descending=[True, False]).head(top))

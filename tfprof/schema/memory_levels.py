"""Memory levels over time per allocator, from allocation events, and what in them cannot be
true (``tfprof memory``, the UI's Memory page, and the ``validation`` table's memory checks).

An allocator's level is what it records after each event where the source records it (Kineto's
``Total Allocated``, XSpace's ``bytes_allocated``: ``exact``), else the running sum of the events'
bytes from the capture's first event. Events of one allocator at the same µs are one point.

What cannot be true is marked per (allocator, step) in ``damage`` (null where nothing is wrong):

* ``below 0``: a recorded level below 0, or a level before an event (the recorded level less the
  event's bytes) below 0: a free of more than the allocator held;
* ``beyond 1 PiB``: a level, the level before an event, a point's bytes or a step's allocated
  or freed bytes beyond ±1 PiB, which no device holds. Sums are also worked out in floating
  point, so one that int64 cannot hold (it would wrap) lands here, and its number is null
  rather than the wrapped one.

A running sum below 0 is not damage: memory allocated before the capture was freed in it, so
the levels are relative to the capture's start (``relative``).

tfprof's own profiles (a RunMetadata, a ProfileProto) seldom hold allocation events, but every
node execution has a memory record (``node_events`` makes events of them, per device):

* ``recorded``: on a device whose records carry ``allocator_bytes_in_use`` (the GPU allocators'
  bytes in use when the op ended), those samples at ``memory_micros`` are its levels, as real
  tfprof's timeline draws them ("peak memory" is their largest); an event's bytes are the change
  from the sample before. A record of 0 is left out: its op used no GPU allocator (the timeline
  draws it as a drop to 0, which the allocator never made);
* ``per-node`` (a device with neither samples nor allocation events, as a CPU's): an execution
  takes its ``peak_bytes`` when it starts and gives back all but its ``residual_bytes`` when it
  ends; what is left is held to the end of the step (the records do not say when it is freed),
  and each step starts from 0 (a step is one run). An estimate: ``exact`` is false.

Where the source records the allocator's reserved (cached) bytes (Kineto's ``Total Reserved``),
each step has its largest (``reserved_bytes``) beside the allocated peak.
"""

from __future__ import annotations

import polars as pl

POINT = ("allocator", "step", "time_micros")
MAX_BYTES = 1 << 50  # a pebibyte, as the validation's memory checks
BELOW_ZERO, BEYOND = "below 0", "beyond 1 PiB"
SOURCES = ("recorded", "events", "per-node")
"""Where a level comes from (``source``): the allocator's own record, a running sum of allocation
events, or the per-node estimate (module docstring)."""
VALUES = ("start_bytes", "peak_bytes", "end_bytes", "allocated", "freed")
"""The byte columns of ``steps``: null where their floating-point sum is beyond ``MAX_BYTES``."""


def points(events: pl.DataFrame) -> pl.DataFrame:
    """One row per (allocator, step, µs) of ``events`` (``allocator``, ``step``,
    ``time_micros``, ``bytes``, ``bytes_in_use``: null where none is recorded; optional
    ``bytes_reserved`` and ``source``: ``events`` where absent), in time order: ``bytes`` (the
    events' sum), ``in_use`` (the level after them; null beyond ``MAX_BYTES``), ``reserved`` (the
    largest reserved bytes recorded there, else null), ``events``, ``exact``, ``source``, and
    ``_absurd``/``_negative`` (this point's part of ``damage``)."""
    names = events.columns
    events = events.with_columns(
        *(() if "bytes_reserved" in names else (pl.lit(None, pl.Int64).alias("bytes_reserved"),)),
        *(() if "source" in names else (pl.lit("events").alias("source"),)))
    grouped = (events.lazy().group_by(POINT).agg(
        pl.col("bytes").sum(), pl.col("bytes").cast(pl.Float64).sum().alias("_fbytes"),
        pl.col("bytes_in_use").max(), pl.col("bytes_reserved").max().alias("reserved"),
        pl.col("source").first(), pl.len().alias("events")).sort("allocator", "time_micros", "step"))
    # a per-node estimate starts from 0 in each step; a running sum of events runs over the capture
    run = pl.when(pl.col("source") == "per-node").then(pl.col("step")).otherwise(-1)
    level = pl.when("exact").then(pl.col("bytes_in_use").cast(pl.Float64)).otherwise(
        pl.col("_fbytes").cum_sum().over("allocator", run))
    return (grouped.with_columns(pl.col("bytes_in_use").is_not_null().all().over("allocator").alias("exact"))
            .with_columns(pl.when("exact").then(pl.col("bytes_in_use"))
                          .otherwise(pl.col("bytes").cum_sum().over("allocator", run)).alias("in_use"),
                          level.alias("_level"))
            .with_columns(
                ((pl.col("_level").abs() > MAX_BYTES) | (pl.col("_fbytes").abs() > MAX_BYTES)
                 | ((pl.col("_level") - pl.col("_fbytes")).abs() > MAX_BYTES)).alias("_absurd"),
                (pl.col("exact") & ((pl.col("_level") < 0) | (pl.col("_level") - pl.col("_fbytes") < 0)))
                .alias("_negative"))
            .with_columns(pl.when("_absurd").then(None).otherwise(pl.col("in_use")).alias("in_use"))
            .select(*POINT, "bytes", "in_use", "reserved", "events", "exact", "source", "_absurd", "_negative")
            .collect())


def steps(points: pl.DataFrame) -> pl.DataFrame:
    """Per allocator and step of ``points``: ``events``; the step's first and last event (µs);
    the level before the first (``start_bytes``), at the peak (``peak_bytes``: the highest
    level, the start included, first reached ``peak_micros`` after the step's first event; 0
    when it is the start) and after the last (``end_bytes``); the bytes ``allocated`` and
    ``freed``; ``exact``; ``relative`` (a running sum that goes below 0 somewhere on its
    allocator); ``damage`` (module docstring); ``source`` (``SOURCES``); ``reserved_bytes``
    (the most the allocator had reserved in the step, where recorded; else null). Sorted by
    allocator, then step."""
    start = (pl.col("in_use") - pl.col("bytes")).first()
    top = pl.col("in_use").max()
    rows = points.with_columns(
        (pl.col("in_use") < 0).any().over("allocator").alias("_below")).group_by("allocator", "step").agg(
        pl.col("events").sum(),
        pl.col("time_micros").min().alias("start_micros"),
        pl.col("time_micros").max().alias("end_micros"),
        start.alias("start_bytes"),
        pl.max_horizontal(start, top).alias("peak_bytes"),
        pl.when(start > top).then(0).otherwise(
            pl.col("time_micros").filter(pl.col("in_use") == top).first() - pl.col("time_micros").min())
        .alias("peak_micros"),
        pl.col("in_use").last().alias("end_bytes"),
        pl.col("bytes").filter(pl.col("bytes") > 0).sum().alias("allocated"),
        (-pl.col("bytes").filter(pl.col("bytes") < 0).sum()).alias("freed"),
        pl.col("bytes").cast(pl.Float64).filter(pl.col("bytes") > 0).sum().alias("_fallocated"),
        pl.col("bytes").cast(pl.Float64).filter(pl.col("bytes") < 0).sum().alias("_ffreed"),
        pl.col("exact").first(),
        (~pl.col("exact").first() & pl.col("_below").first()).alias("relative"),
        pl.col("_absurd").any(), pl.col("_negative").any(),
        pl.col("source").first(), pl.col("reserved").max().alias("reserved_bytes"),
    )
    absurd = pl.col("_absurd") | (pl.col("_fallocated") > MAX_BYTES) | (-pl.col("_ffreed") > MAX_BYTES)
    damage = pl.concat_str(pl.when(absurd).then(pl.lit(BEYOND)), pl.when("_negative").then(pl.lit(BELOW_ZERO)),
                           separator=", ", ignore_nulls=True)
    return (rows.with_columns(pl.when(absurd | pl.col("_negative")).then(damage).alias("damage"),
                              absurd.alias("_absurd"))
            .with_columns(*(pl.when("_absurd").then(None).otherwise(pl.col(c)).alias(c) for c in VALUES),
                          pl.when("_absurd").then(None).otherwise(pl.col("peak_micros")).alias("peak_micros"))
            .drop("_fallocated", "_ffreed", "_absurd", "_negative").sort("allocator", "step"))


def findings(rows: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """The ``validation`` checks ``steps``' ``rows`` fail: (code, the rows that fail it)."""
    return [("memory_level_beyond", rows.filter(pl.col("damage").str.contains(BEYOND, literal=True))),
            ("negative_memory_level", rows.filter(pl.col("damage").str.contains(BELOW_ZERO, literal=True))),
            ("relative_memory_level", rows.filter(pl.col("relative")).unique("allocator", keep="first"))]


def node_events(records: pl.DataFrame) -> pl.DataFrame:
    """Events (as ``points`` takes them, with ``node_id`` and ``name``) made of node executions'
    memory records (module docstring). ``records``: ``allocator`` (the node's device), ``step``,
    ``node_id``, ``name``, ``start_micros`` (the execution's start; null where unknown: then its
    end), ``memory_micros`` (its end), ``peak_bytes``, ``residual_bytes``,
    ``allocator_bytes_in_use``. A device whose records have neither samples nor bytes has none."""
    records = records.filter(pl.col("memory_micros") > 0)
    sampled = (pl.col("allocator_bytes_in_use") > 0).any().over("allocator")
    # samples: one per device and µs (the largest, as later records overwrite earlier ones there)
    samples = (records.filter(sampled & (pl.col("allocator_bytes_in_use") > 0)).sort("allocator", "memory_micros", "allocator_bytes_in_use", "node_id")
               .group_by("allocator", "memory_micros", maintain_order=True).last()
               .with_columns((pl.col("allocator_bytes_in_use")
                              - pl.col("allocator_bytes_in_use").shift(1, fill_value=0).over("allocator"))
                             .alias("bytes"))
               .select("allocator", "step", pl.col("memory_micros").alias("time_micros"), "bytes",
                       pl.col("allocator_bytes_in_use").alias("bytes_in_use"), "node_id", "name",
                       pl.lit("recorded").alias("source")))
    held = records.filter(~sampled & ((pl.col("peak_bytes") != 0) | (pl.col("residual_bytes") != 0)))
    start = pl.min_horizontal(pl.coalesce("start_micros", "memory_micros"), "memory_micros")
    take = held.select("allocator", "step", start.alias("time_micros"), pl.col("peak_bytes").alias("bytes"),
                       "node_id", "name")
    give = held.select("allocator", "step", pl.col("memory_micros").alias("time_micros"),
                       (pl.col("residual_bytes") - pl.col("peak_bytes")).alias("bytes"), "node_id", "name")
    estimate = pl.concat([take, give]).filter(pl.col("bytes") != 0).with_columns(
        pl.lit(None, pl.Int64).alias("bytes_in_use"), pl.lit("per-node").alias("source")).select(samples.columns)
    return pl.concat([samples, estimate.cast(samples.schema)])

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
"""

from __future__ import annotations

import polars as pl

POINT = ("allocator", "step", "time_micros")
MAX_BYTES = 1 << 50  # a pebibyte, as the validation's memory checks
BELOW_ZERO, BEYOND = "below 0", "beyond 1 PiB"
VALUES = ("start_bytes", "peak_bytes", "end_bytes", "allocated", "freed")
"""The byte columns of ``steps``: null where their floating-point sum is beyond ``MAX_BYTES``."""


def points(events: pl.DataFrame) -> pl.DataFrame:
    """One row per (allocator, step, µs) of ``events`` (``allocator``, ``step``,
    ``time_micros``, ``bytes``, ``bytes_in_use``: null where none is recorded), in time order:
    ``bytes`` (the events' sum), ``in_use`` (the level after them; null beyond ``MAX_BYTES``),
    ``events``, ``exact``, and ``_absurd``/``_negative`` (this point's part of ``damage``)."""
    grouped = (events.lazy().group_by(POINT).agg(
        pl.col("bytes").sum(), pl.col("bytes").cast(pl.Float64).sum().alias("_fbytes"),
        pl.col("bytes_in_use").max(), pl.len().alias("events")).sort("allocator", "time_micros", "step"))
    level = pl.when("exact").then(pl.col("bytes_in_use").cast(pl.Float64)).otherwise(
        pl.col("_fbytes").cum_sum().over("allocator"))
    return (grouped.with_columns(pl.col("bytes_in_use").is_not_null().all().over("allocator").alias("exact"))
            .with_columns(pl.when("exact").then(pl.col("bytes_in_use"))
                          .otherwise(pl.col("bytes").cum_sum().over("allocator")).alias("in_use"),
                          level.alias("_level"))
            .with_columns(
                ((pl.col("_level").abs() > MAX_BYTES) | (pl.col("_fbytes").abs() > MAX_BYTES)
                 | ((pl.col("_level") - pl.col("_fbytes")).abs() > MAX_BYTES)).alias("_absurd"),
                (pl.col("exact") & ((pl.col("_level") < 0) | (pl.col("_level") - pl.col("_fbytes") < 0)))
                .alias("_negative"))
            .with_columns(pl.when("_absurd").then(None).otherwise(pl.col("in_use")).alias("in_use"))
            .select(*POINT, "bytes", "in_use", "events", "exact", "_absurd", "_negative").collect())


def steps(points: pl.DataFrame) -> pl.DataFrame:
    """Per allocator and step of ``points``: ``events``; the step's first and last event (µs);
    the level before the first (``start_bytes``), at the peak (``peak_bytes``: the highest
    level, the start included, first reached ``peak_micros`` after the step's first event; 0
    when it is the start) and after the last (``end_bytes``); the bytes ``allocated`` and
    ``freed``; ``exact``; ``relative`` (a running sum that goes below 0 somewhere on its
    allocator); ``damage`` (module docstring). Sorted by allocator, then step."""
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

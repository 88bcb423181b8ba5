"""The unit of the time metrics: whole microseconds for tfprof's own profiles, nanoseconds for
foreign ones, so that no time is rounded before it is summed.

tfprof's records are whole µs. A Kineto trace keeps fractional µs (ns), an XSpace ps; rounding
each execution to µs before summing loses up to half a µs per execution, which on a trace of
many short ops is a fifth of the total. So where a profile's ``execs`` carry exact durations
(``duration_ns``), the per-node time metrics are summed in ns (``time_scale`` 1000 ticks per
µs) and the engines add those up as they add µs; what leaves the core is turned back into µs
here: exact (a float) for tables, whole µs for protos, and formatted from the ns for text.
A spec's time thresholds, given in µs, are scaled to the ticks once (``scaled_spec``).

Which columns are times is the metric registry's word (``tfprof.schema.metrics``): every metric
of kind ``time``, tfprof's and any registered one, whose computed values are in the ticks of
the time columns they are computed from.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import polars as pl

from tfprof.schema.metrics import metric_list

if TYPE_CHECKING:
    from tfprof.profile import Profile

NS = 1000  # ticks per µs when the metrics are in ns


def time_scale(prof: Profile) -> int:
    """Ticks per µs of ``prof``'s time metrics: ``NS`` where its execs hold exact durations
    (``execs.duration_ns``: Kineto and XSpace), else 1 (whole µs, tfprof's own)."""
    return prof.memo("time_scale", lambda: _scale(prof))


def _scale(prof: Profile) -> int:
    if not prof.row_counts().get("execs", 0):
        return 1
    exact = prof.columns("execs", ["duration_ns"]).column(0)
    return NS if exact.null_count < len(exact) else 1


def time_metrics() -> tuple[str, ...]:
    """The self columns of the metrics of kind ``time`` registered now (tfprof's first)."""
    return tuple(m.column for m in metric_list() if m.kind == "time")


def is_time(column: str) -> bool:
    """Whether frame column ``column`` is a time metric (self, total or a step sample of one)."""
    return column.split("@")[0].removeprefix("total_") in time_metrics()


def scaled_spec(spec, scale: int):
    """``spec`` (a ``TreeSpec``) with its time thresholds (µs) in ticks of ``scale``; a spec already
    scaled stays."""
    if scale == spec.time_scale:
        return spec
    per_us = scale // spec.time_scale
    thresholds = tuple((c, m * per_us if is_time(c) else m) for c, m in spec.thresholds)
    return replace(spec, thresholds=thresholds, time_scale=scale)


def in_micros(frame: pl.DataFrame, scale: int) -> pl.DataFrame:
    """``frame`` with its time columns in µs: as they are for ``scale`` 1, else exact (Float64)."""
    if scale == 1:
        return frame
    return frame.with_columns(pl.col(c).cast(pl.Float64) / scale for c in frame.columns if is_time(c))


def whole_micros(frame: pl.DataFrame, scale: int) -> pl.DataFrame:
    """``frame`` with its time columns in whole µs (rounded half to even), for protos, whose
    fields are whole µs."""
    if scale == 1:
        return frame
    return frame.with_columns(
        (pl.col(c).cast(pl.Float64) / scale).round(0, mode="half_to_even").cast(pl.Int64)
        for c in frame.columns if is_time(c))


def dict_in_micros(values: dict, scale: int, *, whole: bool = False) -> dict:
    """A row dict (e.g. a view's root totals) with its time values in µs."""
    if scale == 1:
        return values
    out = {}
    for k, v in values.items():
        if is_time(k) and v is not None:
            v = round(v / scale) if whole else v / scale
        out[k] = v
    return out

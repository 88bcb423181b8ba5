"""tfprof's number formats
(docs/TFPROF_BEHAVIOUR.md, 'Number formats'): a count, a time in microseconds, a size in bytes.

The select-field registry (``fields``) names a metric's format by its kind; ``FORMATS`` maps
the kind to the formatter. ``columns.format_column`` formats whole columns the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def fmt_number(n: int | float) -> str:
    """FormatNumber: 930580 -> ``930.58k``; negative numbers are printed whole."""
    if n < 1000:
        return "%d" % n
    if n < 1000000:
        return "%.2fk" % (n / 1e3)
    if n < 1000000000:
        return "%.2fm" % (n / 1e6)
    return "%.2fb" % (n / 1e9)


def fmt_time(us: int | float) -> str:
    """FormatTime: 999 -> ``999us``, 1000 -> ``1.00ms``, 3610000 -> ``3.61sec``. A float is an
    exact time (a foreign profile's, to the ns): formatted by ``fmt_time_ns``, never truncated."""
    if isinstance(us, float):
        return fmt_time_ns(round(us * 1000))
    if us < 1000:
        return "%dus" % us
    if us < 1000000:
        return "%.2fms" % (us / 1e3)
    return "%.2fsec" % (us / 1e6)


def fmt_time_ns(ns: int) -> str:
    """``fmt_time`` of an exact time in ns (a foreign profile's, ``tfprof.queries.ticks``): the
    whole µs are rounded from the ns (halves to even), the ms and sec digits printed from them."""
    us = round(ns / 1000)
    if us < 1000:
        return "%dus" % us
    if us < 1000000:
        return "%.2fms" % (ns / 1e6)
    return "%.2fsec" % (ns / 1e9)


def fmt_memory(b: int | float) -> str:
    """FormatMemory: decimal units, no GB (120 GB prints ``120356.38MB``)."""
    if b < 1000:
        return "%dB" % b
    if b < 1000000:
        return "%.2fKB" % (b / 1e3)
    return "%.2fMB" % (b / 1e6)


def fmt_shape(dims: Sequence[int]) -> str:
    """FormatShapes: dims joined by ``x``."""
    return "x".join(str(d) for d in dims)


RATIO_SCALE = 100  # a ratio's cells print two decimals: the writers carry it in hundredths


def fmt_ratio(value: float) -> str:
    """A ratio metric's value (ours; ``tfprof.schema.metrics``), two decimals: ``12.3456`` -> ``12.35``."""
    return "%.2f" % value


def printed_ints(values, kind: str):
    """The integers the writers key a column of ``kind`` by (``values``: a polars Series or
    expression; null: 0): the value itself, a ratio in hundredths (``from_printed`` undoes it)."""
    import polars as pl

    if kind == "ratio":
        values = (values.cast(pl.Float64) * RATIO_SCALE).round(0)
    return values.cast(pl.Int64).fill_null(0)


def from_printed(values, kind: str):
    """The values ``printed_ints`` keyed, again: a ratio's hundredths as a float."""
    return values / RATIO_SCALE if kind == "ratio" else values


FORMATS: dict[str, Callable[[float], str]] = {"number": fmt_number, "time": fmt_time, "memory": fmt_memory,
                                              "time_ns": fmt_time_ns, "ratio": fmt_ratio}


def aligned(rows: list[tuple[str, ...]], right: tuple[int, ...] = ()) -> str:
    """``rows`` as text columns two spaces apart, each padded to its widest cell (the columns
    numbered in ``right`` aligned right), one line a row, trailing spaces cut."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
    return "".join("  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                   .rstrip() + "\n" for r in rows)

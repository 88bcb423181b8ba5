"""The lines ``-select kernels`` prints beneath a scope or graph view's row (ours; docs/FOREIGN.md,
'GPU events'): one per GPU event name its node launched, most time first, indented one level
below the row: ``[compute] volta_sgemm_128x64_nn (1.23ms, 24 runs)``. The kind is the
``kernels.kind`` (``compute``, ``communication``, ``memcpy_htod`` …); the time is in the view's
terms (``tfprof.queries.launched``), formatted as tfprof formats times.

>>> import polars as pl
>>> frame = pl.DataFrame({"level": [0, 1]})
>>> work = pl.DataFrame({"row": [1], "name": ["k"], "kind": ["compute"], "runs": [2], "ns": [1_500_000]},
...                     schema_overrides={"row": pl.UInt32})
>>> launched_texts(frame, work).to_list()
['', '    [compute] k (1.50ms, 2 runs)']
"""

from __future__ import annotations

import polars as pl

from tfprof.views.lines import INDENT
from tfprof.views.units import fmt_time_ns


def launched_texts(frame: pl.DataFrame, work: pl.DataFrame) -> pl.Series:
    """Per row of ``frame``, the lines to print under it (empty: none); ``work`` is ``launched``'s."""
    if work.height == 0:
        return pl.Series("launched", [""] * frame.height, pl.String)
    indent = (frame["level"].gather(work["row"].cast(pl.Int64)) + 1) * INDENT
    times = [fmt_time_ns(ns) for ns in work["ns"].to_list()]
    runs = work["runs"]
    line = pl.DataFrame({"row": work["row"], "indent": indent, "time": times}).select(
        "row",
        (pl.lit(" ").repeat_by(pl.col("indent")).list.join("") + "[" + work["kind"] + "] " + work["name"] + " ("
         + pl.col("time") + ", " + runs.cast(pl.String) + pl.when(runs == 1).then(pl.lit(" run)"))
         .otherwise(pl.lit(" runs)"))).alias("line"),
    )
    joined = line.group_by("row", maintain_order=True).agg(pl.col("line").str.join("\n"))
    rows = pl.DataFrame({"row": pl.int_range(frame.height, eager=True).cast(pl.UInt32)})
    return rows.join(joined, on="row", how="left")["line"].fill_null("").alias("launched")


def join_after(*texts: pl.Series | None) -> pl.Series | None:
    """Several per-row texts under a line (tensor values, launched work) as one, in order: the
    non-empty ones joined by a newline (one final newline of each dropped, as the writer drops it)."""
    present = [t for t in texts if t is not None]
    if len(present) < 2:
        return present[0] if present else None
    parts = pl.DataFrame({str(i): t.fill_null("").str.strip_suffix("\n") for i, t in enumerate(present)})
    return parts.select(pl.concat_list(parts.columns).list.eval(pl.element().filter(pl.element() != ""))
                        .list.join("\n").alias("after")).to_series()

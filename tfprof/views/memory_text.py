"""``tfprof memory``'s text: per allocator and step the memory levels as tfprof prints bytes,
then the ops at one step's peak (``tfprof.api.memory``)."""

from __future__ import annotations

import polars as pl

from tfprof.views.units import aligned, fmt_memory, fmt_time


def _size(b: int) -> str:
    return ("-" + fmt_memory(-b)) if b < 0 else fmt_memory(b)


def render_memory(rows: pl.DataFrame, row: dict, ops: pl.DataFrame) -> str:
    """The steps table of ``rows`` (``tfprof.api.memory.memory``), then ``ops`` at the peak of
    ``row``'s step on its allocator."""
    table = [("allocator", "step", "events", "start", "peak", "peak at", "end", "allocated", "freed")]
    for r in rows.iter_rows(named=True):
        table.append((r["allocator"] + ("" if r["exact"] else " *"), str(r["step"]), f"{r['events']:,}",
                      _size(r["start_bytes"]), _size(r["peak_bytes"]), "+" + fmt_time(r["peak_micros"]),
                      _size(r["end_bytes"]), _size(r["allocated"]), _size(r["freed"])))
    out = ["memory in use per allocator and step (peak at: time after the step's first allocation event)\n",
           aligned(table)]
    if not rows["exact"].all():
        out.append("* the trace does not record this allocator's level: a running sum of its events from the "
                   "capture's first one (memory allocated before the capture is not counted)\n")
    out.append(f"\nops with the most bytes allocated at the peak of step {row['step']} on {row['allocator']} "
               f"({_size(row['peak_bytes'])}, net of what they freed by then):\n")
    if ops.height:
        out.append(aligned([(_size(r["bytes"]), f"{r['events']} event{'s' if r['events'] != 1 else ''}", r["name"])
                             for r in ops.iter_rows(named=True)]))
    else:
        out.append("none: every op had freed as much as it allocated\n")
    return "".join(out)

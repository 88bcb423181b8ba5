"""``tfprof memory``'s text: per allocator and step the memory levels as tfprof prints bytes,
then the ops at one step's peak (``tfprof.api.memory``)."""

from __future__ import annotations

import polars as pl

from tfprof.schema.memory_levels import BEYOND
from tfprof.views.units import aligned, fmt_memory, fmt_time


def _size(b: int | None) -> str:
    if b is None:  # beyond 1 PiB: a sum that wrapped, or a level no device holds
        return "?"
    return ("-" + fmt_memory(-b)) if b < 0 else fmt_memory(b)


def _mark(r: dict) -> str:
    estimate = " ~" if r.get("source") == "per-node" else " *"
    return ("" if r["exact"] else estimate) + (" !" if r.get("damage") else "")


def render_memory(rows: pl.DataFrame, row: dict, ops: pl.DataFrame) -> str:
    """The steps table of ``rows`` (``tfprof.api.memory.memory``), then ``ops`` at the peak of
    ``row``'s step on its allocator."""
    # (a CPU allocator's reserved bytes are 0 in PyTorch's traces: the column only where some are not)
    reserved = "reserved_bytes" in rows.columns and bool((rows["reserved_bytes"].fill_null(0) > 0).any())
    table = [("allocator", "step", "events", "start", "peak", "peak at", "end", "allocated", "freed")
             + (("reserved",) if reserved else ())]
    for r in rows.iter_rows(named=True):
        table.append((r["allocator"] + _mark(r), str(r["step"]), f"{r['events']:,}",
                      _size(r["start_bytes"]), _size(r["peak_bytes"]),
                      "?" if r["peak_micros"] is None else "+" + fmt_time(r["peak_micros"]),
                      _size(r["end_bytes"]), _size(r["allocated"]), _size(r["freed"]))
                     + ((("-" if r["reserved_bytes"] is None else _size(r["reserved_bytes"])),) if reserved else ()))
    out = ["memory in use per allocator and step (peak at: time after the step's first allocation event)\n",
           aligned(table)]
    estimated = rows["source"] == "per-node" if "source" in rows.columns else pl.Series([False] * rows.height)
    if (~rows["exact"] & ~estimated).any():
        out.append("* the trace does not record this allocator's level: a running sum of its events from the "
                   "capture's first one (memory allocated before the capture is not counted)\n")
    if estimated.any():
        out.append("~ no allocator level or allocation events on this device: an estimate from its ops' memory "
                   "records (each holds its peak bytes while it runs, then its residual bytes to the step's end)\n")
    if reserved:
        out.append("reserved: the most the allocator had reserved (cached) in the step, as the trace records it\n")
    if "relative" in rows.columns and rows["relative"].any():
        out.append("  it goes below 0 where the capture freed memory allocated before it: those levels are "
                   "relative to the capture's start\n")
    if "damage" in rows.columns and rows["damage"].is_not_null().any():
        damaged = rows.filter(pl.col("damage").is_not_null())
        reasons = damaged["damage"].str.split(", ").explode().unique(maintain_order=True).to_list()
        unknown = "; ? where beyond it, or beyond int64" if BEYOND in reasons else ""
        out.append(f"! damaged: levels or bytes no allocator can have ({', '.join(reasons)}{unknown}): not memory "
                   "in use; see `tfprof check`\n")
    out.append(f"\nops with the most bytes allocated at the peak of step {row['step']} on {row['allocator']}{_mark(row)} "
               f"({_size(row['peak_bytes'])}, net of what they freed by then):\n")
    if ops.height:
        out.append(aligned([(_size(r["bytes"]), f"{r['events']} event{'s' if r['events'] != 1 else ''}", r["name"])
                             for r in ops.iter_rows(named=True)]))
    elif row.get("damage") and row["peak_micros"] is None:
        out.append("unknown: the step's levels are damaged (above)\n")
    elif row["peak_micros"] == 0 and row["peak_bytes"] == row["start_bytes"]:
        out.append("none: the peak is the level the step started at\n")
    else:
        out.append("none: every op had freed as much as it allocated\n")
    return "".join(out)

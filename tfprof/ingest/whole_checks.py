"""The ``validation`` checks that need the whole profile's records, gathered batch by batch
(``tfprof.ingest.validate.Validator`` calls them): records beyond the capture's span, and
allocator levels that cannot be true.

* ``time_beyond_capture``: a node whose records on one device add up to more than the capture
  lasts (its earliest start to its latest end, over every record) ran longer than the capture
  did: times in the wrong unit (an XSpace's picoseconds, a trace's ns written as µs). A node's
  records come in one batch, and the span only grows, so only the nodes whose total over every
  device exceeds the span so far are kept (one ``bincount`` a batch), and totalled per device.
* ``negative_memory_level``, ``memory_level_beyond``, ``relative_memory_level``: the levels
  ``tfprof memory`` shows, worked out as it does (``tfprof.schema.memory_levels``) from the
  allocation events, each on its allocator (the one recorded, else its node's device).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tfprof.schema import memory_levels

INT64_MAX = 2**63 - 1


class WholeChecks:
    """What the batches hold that these checks need; ``report`` adds the findings."""

    def __init__(self) -> None:
        self.first, self.last = INT64_MAX, -INT64_MAX  # the capture's span: earliest start, latest end (µs)
        self._long: list[pa.Table] = []  # per node and device, totals that may exceed the span
        self._allocations: list[pa.Table] = []  # (allocator, step, time_micros, bytes, bytes_in_use)

    def batch(self, tables: dict[str, pa.Table], ids: np.ndarray) -> None:
        """Take what a batch of (clamped) ``tables`` holds; ``ids``: its nodes' ids, sorted."""
        if "execs" in tables and tables["execs"].num_rows:
            self._execs(tables["execs"])
        if "allocations" in tables and tables["allocations"].num_rows:
            self._allocations.append(_allocation_events(tables["allocations"], tables.get("nodes"), ids))

    def _execs(self, t: pa.Table) -> None:
        start, dur = t.column("start_micros").to_numpy(), t.column("duration_micros").to_numpy()
        self.first = min(self.first, int(start.min()))
        self.last = max(self.last, int((start + dur).max()))
        ids = t.column("node_id").to_numpy()
        base = int(ids.min())
        per_node = np.bincount(ids - base, dur.astype(np.float64))
        long = np.flatnonzero(per_node > self.last - self.first) + base  # (the span only grows)
        if len(long):
            sub = t.filter(pc.is_in(t.column("node_id"), pa.array(long)))
            self._long.append(sub.select(["node_id", "step", "device", "duration_micros"]).group_by(
                ["node_id", "device"]).aggregate([("duration_micros", "sum"), ("step", "min")]))

    def report(self, found, name) -> None:
        """Add the findings to ``found`` (``validate.Findings``); ``name(node_id)``: a node's name."""
        if self._long:
            self._beyond_capture(found, name)
        if self._allocations:
            events = pl.from_arrow(pa.concat_tables(self._allocations, promote_options="permissive"))
            _memory_levels(found, memory_levels.steps(memory_levels.points(events)))

    def _beyond_capture(self, found, name) -> None:
        span = self.last - self.first
        over = (pl.from_arrow(pa.concat_tables(self._long)).group_by("node_id", "device")
                .agg(pl.col("duration_micros_sum").sum().alias("total"), pl.col("step_min").min().alias("step"))
                .filter(pl.col("total") > span).sort("total", "node_id", descending=[True, False]))
        found.add("time_beyond_capture", over.height, [
            (name(r["node_id"]), None, f"{r['total']:,} us on {r['device']}, but the capture lasts {span:,} us "
             f"({r['total'] / max(span, 1):,.1f} times as long): times in the wrong unit?")
            for r in over.head(found.room("time_beyond_capture")).iter_rows(named=True)])


def _memory_levels(found, rows: pl.DataFrame) -> None:
    for code, bad in memory_levels.findings(rows):
        shown = bad.head(found.room(code)).iter_rows(named=True)
        if code == "relative_memory_level":
            described = [(None, None, f"allocator `{r['allocator']}`: its running sum goes below 0 (from step "
                          f"{r['step']})") for r in shown]
        else:
            described = [(None, r["step"], f"allocator `{r['allocator']}`: levels {r['damage']} (start "
                          f"{_bytes(r['start_bytes'])}, peak {_bytes(r['peak_bytes'])}, end {_bytes(r['end_bytes'])})")
                         for r in shown]
        found.add(code, bad.height, described)


def _bytes(value: int | None) -> str:
    return "unknown (beyond 1 PiB)" if value is None else f"{value:,} bytes"


def _allocation_events(t: pa.Table, nodes: pa.Table | None, ids: np.ndarray) -> pa.Table:
    """The allocation events of ``t``, each on its allocator: the one recorded, else its node's
    device (``nodes``, whose ids are ``ids``), as ``tfprof memory`` places them."""
    names = t.schema.names
    node_ids = t.column("node_id").to_numpy()
    device = pa.nulls(t.num_rows, pa.string())
    if nodes is not None and nodes.num_rows and len(ids):
        at = np.clip(np.searchsorted(ids, node_ids), 0, len(ids) - 1)
        device = pc.if_else(pa.array(ids[at] == node_ids),
                            nodes.column("canonical_device").cast(pa.string()).take(pa.array(at)), None)
    allocator = pc.coalesce(t.column("allocator").cast(pa.string()), device) if "allocator" in names else device
    return pa.table({
        "allocator": pc.fill_null(allocator, ""), "step": t.column("step"), "time_micros": t.column("alloc_micros"),
        "bytes": t.column("alloc_bytes"),
        "bytes_in_use": t.column("bytes_in_use") if "bytes_in_use" in names else pa.nulls(t.num_rows, pa.int64())})

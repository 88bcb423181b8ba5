"""The graph timeline's memory tracks (docs/TFPROF_BEHAVIOUR.md, 'Graph timeline'): per GPU, the allocator's bytes in
use at
each drawn sample, the largest per-node allocations at that sample, and the device's peak.

``memory_counters`` returns the counter events (``memory`` and ``top_allocations`` rows of
``tfprof.queries.timeline``'s event frame, numbered from 0) and the peaks; ``graph_events``
places them after the time and flow events.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from tfprof.profile import Profile

# tfprof_timeline.cc: memory samples closer than this to the last one drawn are skipped, and at
# most this many allocations are named per sample.
MIN_SAMPLE_GAP_MICROS = 100
MAX_TOP_ALLOCATIONS = 10


@njit(cache=True)
def _thin(group: np.ndarray, ts: np.ndarray, gap: int) -> np.ndarray:  # pragma: no cover - numba
    """Samples tfprof draws (rows sorted by group, ts): those at least ``gap`` after the last
    drawn one of their group, the first compared with time 0."""
    keep = np.zeros(ts.shape[0], np.bool_)
    last = 0
    for i in range(ts.shape[0]):
        if i == 0 or group[i] != group[i - 1]:
            last = 0
        if ts[i] - last < gap:
            continue
        keep[i] = True
        last = ts[i]
    return keep


@njit(cache=True)
def _top(seg_offsets, seg_start, seg_until, seg_value, sample_group, sample_ts, budget, limit):  # pragma: no cover - numba
    """tfprof's EmitCounter walk for each sample: the nodes' allocation values at the sample,
    largest first (equal values by name), each named while the bytes left cover it, at most
    ``limit`` names (a value that does not fit is passed over; tfprof ends only that value's
    group, and equal values do not fit either).

    Segments (a node's value from ``seg_start`` until ``seg_until``) come grouped by device
    (``seg_offsets``) and sorted by value (descending) then name; a segment counts for a sample
    at ``ts`` when seg_start < ts <= seg_until. Returns the picked segments per sample (-1 for
    none) in naming order, and the bytes left per sample.
    """
    n_samples = budget.shape[0]
    picked = np.full((n_samples, limit), -1, np.int64)
    rest = budget.copy()
    for k in range(n_samples):
        g = sample_group[k]
        ts = sample_ts[k]
        left = budget[k]
        count = 0
        for j in range(seg_offsets[g], seg_offsets[g + 1]):
            if count >= limit:
                break
            if seg_start[j] < ts <= seg_until[j] and seg_value[j] <= left:
                picked[k, count] = j
                count += 1
                left -= seg_value[j]
        rest[k] = left
    return picked, rest



def memory_counters(prof: Profile, step: int, shown: pl.DataFrame, first_pid: int):
    """tfprof's MemoryTracker per GPU device (device-name order; devices naming `cpu` are
    skipped): allocator samples (later nodes overwrite equal times), thinned, each with the
    largest per-node cumulative allocations just before it. Returns (counter events, peaks,
    memory devices with their first pid)."""
    nodes = prof.lazy("nodes").select("node_id", pl.col("canonical_device").cast(pl.String).alias("device"))
    tracked = shown.join(nodes.collect(), on="node_id")
    mem_devices = (
        tracked.select("device").unique().filter(~pl.col("device").str.contains("cpu", literal=True)).sort("device")
        .with_row_index("k").select("device", (pl.col("k").cast(pl.Int64) * 2 + first_pid).alias("pid"))
    )
    tracked = tracked.join(mem_devices, on="device").with_columns(
        pl.col("name").rank("dense").cast(pl.Int64).alias("name_rank")  # byte order, as std::map
    )
    samples = (
        prof.lazy("memory").filter((pl.col("step") == step) & (pl.col("memory_micros") > 0))
        .select("node_id", "seq", "memory_micros", "allocator_bytes_in_use").collect()
        .join(tracked, on="node_id")
        .sort("order", "seq")
        .group_by("device", "memory_micros", maintain_order=True).agg(pl.col("allocator_bytes_in_use").last(), pl.col("pid").first())
        .sort("device", "memory_micros")
    )
    peaks = (
        samples.group_by("device").agg(pl.col("allocator_bytes_in_use").max().clip(lower_bound=0).alias("peak_bytes"))
        .join(mem_devices, on="device", how="right").select("device", pl.col("peak_bytes").fill_null(0))
        .filter(pl.col("device").str.contains("gpu", literal=True)).sort("device")
    )
    keep = _thin(samples["pid"].to_numpy(), samples["memory_micros"].to_numpy(), MIN_SAMPLE_GAP_MICROS)
    drawn = samples.filter(pl.Series(keep)).with_row_index("k").with_columns(pl.col("k").cast(pl.Int64))

    # Per node: cumulative allocations of the step over time, with the largest accelerator
    # persistent bytes of any step at time 0 (TFGraphNode::accelerator_persistent_bytes).
    # (tfprof starts that max at 0, so steps without persistent bytes need not be read)
    persistent = (
        prof.lazy("memory").filter(pl.col("accelerator_persistent_bytes") != 0)
        .group_by("node_id", "step").agg(pl.col("accelerator_persistent_bytes").sum())
        .group_by("node_id").agg(pl.col("accelerator_persistent_bytes").max().clip(lower_bound=0).alias("alloc_bytes"))
        .with_columns(pl.lit(0, pl.Int64).alias("alloc_micros"))
        .collect()
    )
    allocs = prof.lazy("allocations").filter(pl.col("step") == step).select("node_id", "alloc_micros", "alloc_bytes").collect()
    # A node's curve holds `value` from `alloc_micros` until its next change (`until`).
    curves = (
        pl.concat([allocs, tracked.select("node_id").join(persistent, on="node_id", how="left")
                   .with_columns(pl.col("alloc_bytes").fill_null(0), pl.col("alloc_micros").fill_null(0))
                   .select(allocs.columns)])
        .join(tracked.select("node_id", "name_rank", "name", "device"), on="node_id")
        .group_by("node_id", "name_rank", "name", "device", "alloc_micros").agg(pl.col("alloc_bytes").sum())
        .sort("node_id", "alloc_micros")
        .with_columns(
            pl.col("alloc_bytes").cum_sum().over("node_id").alias("value"),
            pl.col("alloc_micros").shift(-1).over("node_id").fill_null(np.iinfo(np.int64).max).alias("until"),
        )
        .filter(pl.col("value") > 0)
    )
    # A sample at ts sees the value of the last change strictly before ts: segment
    # [alloc_micros, until) counts for the samples with alloc_micros < ts <= until.
    segments = curves.join(mem_devices.with_row_index("g").select("device", pl.col("g").cast(pl.Int64)), on="device").sort(
        "g", "value", "name_rank", descending=[False, True, False]
    )
    seg_offsets = np.searchsorted(segments["g"].to_numpy(), np.arange(mem_devices.height + 1), side="left")
    group_of = dict(zip(mem_devices["device"].to_list(), range(mem_devices.height)))
    ints = lambda series: series.cast(pl.Int64).to_numpy().astype(np.int64)  # noqa: E731  (typed even when empty)
    picked, rest = _top(
        seg_offsets.astype(np.int64), ints(segments["alloc_micros"]), ints(segments["until"]), ints(segments["value"]),
        ints(drawn["device"].replace_strict(group_of, return_dtype=pl.Int64)), ints(drawn["memory_micros"]),
        ints(drawn["allocator_bytes_in_use"]), MAX_TOP_ALLOCATIONS,
    )
    chosen = picked.ravel()
    top = (
        segments[chosen[chosen >= 0]]
        .with_columns(pl.Series("k", np.repeat(np.arange(drawn.height), MAX_TOP_ALLOCATIONS)[chosen >= 0]))
        .group_by("k", maintain_order=True)
        .agg(pl.col("value").alias("top_bytes"), pl.col("name").alias("top_names"))
    )
    drawn = drawn.with_columns(pl.Series("rest_bytes", rest)).join(top, on="k", how="left", maintain_order="left")
    counters = drawn.select(
        pl.concat_list(pl.col("k") * 2, pl.col("k") * 2 + 1).alias("seq"),
        pl.lit(["memory", "top_allocations"]).alias("kind"),
        pl.concat_list("pid", pl.col("pid") + 1).alias("pid"),
        pl.lit(0, pl.Int64).alias("tid"),
        pl.col("memory_micros").alias("ts"),
        pl.col("allocator_bytes_in_use").alias("bytes_in_use"),
        pl.col("top_bytes").fill_null(pl.lit([], pl.List(pl.Int64))),
        pl.col("top_names").fill_null(pl.lit([], pl.List(pl.String))),
        "rest_bytes",
    ).explode("seq", "kind", "pid")
    return counters, peaks, mem_devices

"""Allocation instants of a foreign trace charged to ops, or to their step (docs/FOREIGN.md, 'memory').

An instant inside an op (innermost, on its thread) belongs to that op's execution. One outside every
op (PyTorch frees a step's tensors between ops; the optimizer allocates around them) belongs to
the step it falls in, through one synthetic node, ``OUTSIDE_OPS``, that holds one memory record per
step. So the ``allocations`` table has one row per instant and the ``memory`` records add up to
every byte the trace recorded.

Each instant names its allocator (``allocator``: XSpace's ``allocator_name``, Kineto's device,
``cpu`` or ``cuda:0``; empty when the trace names none) and what that allocator held after it (``in_use``). As tfprof does with a
RunMetadata's per-allocator records, an execution's bytes are worked out per allocator (the
``allocator_memory`` table) and summed: its peak is the sum of each allocator's peak, not the peak
of all its allocations mixed; its ``allocator_bytes_in_use`` is the most an accelerator allocator
(``ACCELERATOR_ALLOCATOR``) held after one of its instants.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from tfprof.schema.conform import conform

OUTSIDE_OPS = "[memory outside ops]"
"""The name (and op type) of the node holding the allocations made outside every op."""

_ZEROS = ("output_bytes", "host_temp_bytes", "host_persistent_bytes", "accelerator_temp_bytes",
          "accelerator_persistent_bytes")

ACCELERATOR_ALLOCATOR = r"GPU|^(?:cuda|hip|xpu|mps|mtia|xla|hpu):"
"""An allocator of accelerator memory: tfprof's rule for a RunMetadata's allocators (the name holds
``GPU``: ``GPU_0_bfc``, not ``bfc_cpu_allocator_for_gpu``), and PyTorch's devices other than the CPU."""

TORCH_DEVICES = {1: "cuda", 6: "hip", 9: "xla", 12: "xpu", 13: "mps", 15: "hpu", 19: "mtia"}
"""PyTorch's ``c10::DeviceType`` numbers (Kineto's ``Device Type`` arg; 0 is the CPU) of accelerators."""


def kineto_allocator(device_type: pl.Expr, device_id: pl.Expr) -> pl.Expr:
    """The allocator of a Kineto ``[memory]`` instant from its ``Device Type`` and ``Device Id``
    args (as text): ``cpu``, or its device as PyTorch writes one (``cuda:0``; ``device_type_N:ID``
    for a type not in ``TORCH_DEVICES``); null without a ``Device Type``."""
    kind = device_type.cast(pl.Int64, strict=False)
    index = device_id.fill_null("0")
    named = kind.replace_strict(TORCH_DEVICES, default=None, return_dtype=pl.String)
    return pl.when(kind == 0).then(pl.lit("cpu")).when(kind.is_not_null()).then(
        pl.coalesce(named, pl.lit("device_type_") + kind.cast(pl.String)) + ":" + index)


def scattered(found: pl.DataFrame, rows: np.ndarray, height: int) -> list[pl.Series]:
    """Each column of ``found`` (a value per row of ``rows``) as a column of ``height`` rows, null
    but on ``rows``."""
    return [pl.Series(name, [], found[name].dtype).extend_constant(None, height).scatter(rows, found[name])
            for name in found.columns]


def instants(ev: pl.DataFrame, op_parent: np.ndarray) -> pl.DataFrame:
    """The ``memory`` events of ``ev`` (``row``, ``event_id``, ``start_ns``, ``mem_bytes``,
    ``allocator``, ``in_use``, ``reserved``: null where the reader gives none) with ``owner``: the
    row of the op execution around each, -1 for none."""
    rows = np.flatnonzero((ev["role"] == "memory").to_numpy())
    reserved = pl.col("reserved") if "reserved" in ev.columns else pl.lit(None, pl.Int64).alias("reserved")
    return ev.select("row", "event_id", "start_ns", "mem_bytes", "allocator", "in_use", reserved)[rows].with_columns(
        pl.Series("owner", op_parent[rows], dtype=pl.Int64))


def tables(mem: pl.DataFrame, us) -> dict[str, pa.Table]:
    """``allocations`` (one row per instant), ``allocator_memory`` (per op execution that
    allocated or freed, and per step for the instants outside ops, one record per allocator) and
    ``memory`` (those summed over the allocators) from ``mem``: the instants with their
    ``node_id``, ``step``, ``owner`` (-1: outside ops), ``allocator``, ``in_use`` and
    ``end_micros`` (the end of the owner's execution; the last instant's time for a step's
    record). ``us`` turns ns into tfprof's whole µs."""
    mem = mem.sort("event_id").with_columns(
        # one memory record per op execution, and one per step for the instants outside ops
        pl.when(pl.col("owner") >= 0).then(pl.col("owner")).otherwise(-1 - pl.col("step")).alias("_record"),
        pl.col("allocator").fill_null(""))
    allocations = mem.select("node_id", "step", alloc_micros=us(pl.col("start_ns")), alloc_bytes="mem_bytes",
                             allocator=pl.col("allocator").replace("", None), bytes_in_use="in_use",
                             bytes_reserved="reserved")
    record = ["_record", "node_id", "step"]
    per_allocator = _per_allocator(mem)
    accelerator = pl.col("allocator").str.contains(ACCELERATOR_ALLOCATOR)
    per_exec = per_allocator.group_by(record).agg(
        pl.col("end_micros").max(),
        *(_saturated_sum(column, name) for column, name in (("total_bytes", "requested_bytes"),
                                                            ("peak_bytes", "peak_bytes"),
                                                            ("live_bytes", "residual_bytes"))),
        pl.col("allocator_bytes_in_use").filter(accelerator).max().fill_null(0),
    ).sort("_record").with_columns(pl.int_range(pl.len()).over("node_id", "step").cast(pl.Int32).alias("seq"))
    memory = per_exec.select("node_id", "step", "seq", pl.col("end_micros").alias("memory_micros"),
                             "requested_bytes", "peak_bytes", "residual_bytes",
                             **{c: pl.lit(0, pl.Int64) for c in _ZEROS}, allocator_bytes_in_use="allocator_bytes_in_use")
    by_allocator = per_allocator.join(per_exec.select("_record", "seq"), on="_record").sort("_record", "allocator").select(
        "node_id", "step", "seq", "allocator",
        "total_bytes", "peak_bytes", "live_bytes", pl.col("allocator_bytes_in_use").fill_null(0))
    return {"memory": conform("memory", memory.to_arrow()), "allocations": conform("allocations", allocations.to_arrow()),
            "allocator_memory": conform("allocator_memory", by_allocator.to_arrow())}


def _saturated_sum(column: str, name: str) -> pl.Expr:
    """The sum of ``column`` as ``name``: int64's largest where it would be beyond ``SATURATED``."""
    return (pl.when(pl.col(column).cast(pl.Float64).sum() > SATURATED).then(pl.lit(np.iinfo(np.int64).max))
            .otherwise(pl.col(column).sum()).alias(name))


def _per_allocator(mem: pl.DataFrame) -> pl.DataFrame:
    """One row per (record, allocator) of ``mem`` (instants in event order): ``_record``,
    ``node_id``, ``step``, ``allocator``, ``end_micros`` (the latest), ``total_bytes`` (allocated),
    ``peak_bytes`` (the highest running sum, at least 0), ``live_bytes`` (the net, at least 0) and
    ``allocator_bytes_in_use`` (the last instant's ``in_use``). A segmented running sum in numpy:
    one stable sort by (record, allocator), a cumulative sum less each group's start."""
    if mem.height == 0:
        return mem.select("_record", "node_id", "step", "allocator", "end_micros",
                          *(pl.lit(0, pl.Int64).alias(c) for c in ("total_bytes", "peak_bytes", "live_bytes")),
                          pl.col("in_use").alias("allocator_bytes_in_use"))
    record = mem["_record"].to_numpy()
    code = mem["allocator"].cast(pl.Categorical).to_physical().to_numpy()
    order = np.lexsort((code, record))  # stable: each group's instants stay in event order
    record, code = record[order], code[order]
    starts = np.flatnonzero(np.r_[True, (record[1:] != record[:-1]) | (code[1:] != code[:-1])])
    size = np.diff(np.r_[starts, len(order)])
    amount = mem["mem_bytes"].fill_null(0).to_numpy()[order]
    running = np.cumsum(amount)
    live = running - np.repeat(running[starts] - amount[starts], size)
    # the same in floating point: where a sum is beyond what int64 holds it wrapped above, and
    # is given as int64's largest instead (the validation counts it as 0 and reports it)
    f_amount = amount.astype(np.float64)
    f_running = np.cumsum(f_amount)
    f_live = f_running - np.repeat(f_running[starts] - f_amount[starts], size)
    first, last = order[starts], order[starts + size - 1]
    return mem[first].select("_record", "node_id", "step", "allocator").with_columns(
        pl.Series("end_micros", np.maximum.reduceat(mem["end_micros"].to_numpy()[order], starts)),
        pl.Series("total_bytes", _saturated(np.add.reduceat(np.maximum(amount, 0), starts),
                                            np.add.reduceat(np.maximum(f_amount, 0), starts))),
        pl.Series("peak_bytes", _saturated(np.maximum(np.maximum.reduceat(live, starts), 0),
                                           np.maximum.reduceat(np.abs(f_live), starts))),
        pl.Series("live_bytes", _saturated(np.maximum(np.add.reduceat(amount, starts), 0),
                                           np.abs(np.add.reduceat(f_amount, starts)))),
        mem["in_use"].gather(last).alias("allocator_bytes_in_use"),
    )


def _saturated(exact: np.ndarray, approx: np.ndarray) -> np.ndarray:
    """``exact`` (int64 sums, which may have wrapped) with int64's largest where ``approx`` (the
    same sums in floating point, or a bound of them) is beyond ``SATURATED``."""
    return np.where(approx > SATURATED, np.iinfo(np.int64).max, exact)


SATURATED = 2.0**62
"""A sum beyond this may be wrong in int64 (a float's rounding is far below the margin to 2**63)."""


def outside_steps(mem: pl.DataFrame, us) -> pl.DataFrame:
    """The ``node_steps`` rows of the ``OUTSIDE_OPS`` node (``mem``: its instants, with
    ``node_id`` and ``step``): no runs, and the span of its instants in each step."""
    return mem.group_by("node_id", "step").agg(
        pl.lit(0, pl.Int64).alias("run_count"), us(pl.col("start_ns")).min().alias("all_start_micros"),
        us(pl.col("start_ns")).max().alias("latest_end_micros"))

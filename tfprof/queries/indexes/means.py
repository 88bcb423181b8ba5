"""Per-node step numbers (docs/TFPROF_BEHAVIOUR.md, 'Steps and averaging' and 'Single-node views') from whole columns,
in numpy.

A node's value for a step is what it recorded in that step; for ``step=-1`` it is the node's
sum over the steps in which it has a record, integer-divided by the number of those steps (not
by the number of steps in the profile: a tfprof quirk we reproduce).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfprof.queries.arrays import in_id_order, rows_of
from tfprof.queries.ticks import time_scale

if TYPE_CHECKING:
    from tfprof.profile import Profile

TIME = ("exec_micros", "accelerator_exec_micros", "cpu_exec_micros")
MEMORY = ("requested_bytes", "peak_bytes", "residual_bytes", "output_bytes")
STEP_METRICS = ("run_count", *TIME, *MEMORY)


def step_numbers(prof: Profile, step: int = -1) -> pa.Table:
    """Per node, in node-id order: ``node_id``, ``params``, ``float_ops``, ``STEP_METRICS`` and
    ``macs`` for option ``step`` (0 where the node has no record for it).

    ``float_ops`` is the static count for a node that never ran, else the count times the
    step's ``run_count`` (docs/TFPROF_BEHAVIOUR.md, 'Steps and averaging'); where the reader
    counted them per execution (``node_steps.float_ops``: Kineto, each execution's own shapes),
    their sum over the step's executions (for step -1 averaged as ``run_count`` is). A foreign
    profile's times are in ns and its step -1 times per step of the capture (``capture_steps``).
    """
    nodes, ids, numbers = _per_step(prof, ("float_ops", *STEP_METRICS, "macs"), [step])
    return pa.table({
        "node_id": ids,
        "params": nodes.column("params"),
        **{c: numbers[c][0] for c in ("float_ops", *STEP_METRICS, "macs")},
    })


def step_samples(prof: Profile, columns: tuple[str, ...], steps: list[int]) -> dict[tuple[str, int], np.ndarray]:
    """Per (column, step) of ``columns`` (node-frame names: ``STEP_METRICS``, ``parameters``,
    ``float_ops``, ``macs``) and ``steps``: each node's value, in node-id order, equal to
    ``step_numbers(prof, step)``'s column; from one pass over each table for all the steps."""
    if not steps:
        return {}
    _, _, numbers = _per_step(prof, columns, steps)
    index = {int(s): i for i, s in enumerate(np.unique(np.asarray(steps, np.int64)))}
    return {(c, s): numbers[c][index[s]] for c in columns for s in steps}


def _per_step(prof: Profile, columns: tuple[str, ...], steps: list[int]) -> tuple[pa.Table, np.ndarray, dict]:
    """The nodes table (``params``, ``float_ops``) and ids in node-id order, and per column of
    ``columns`` a (step, node) grid of values, one row per distinct step of ``steps`` in
    ascending order. Step -1, alone, is every record: the means over the steps a node ran in."""
    nodes, ids = in_id_order(prof.columns("nodes", ["node_id", "params", "float_ops"]))
    n, wanted = len(ids), np.unique(np.asarray(steps, np.int64))
    k, every_step = len(wanted), bool(wanted[0] < 0)
    if every_step and k > 1:
        raise ValueError("step -1 (every record) cannot be read beside other steps")
    by_step = [] if every_step else ["step"]

    def cells(table: pa.Table, row: np.ndarray | None = None) -> np.ndarray:
        """Per record: its step's index * n + its node's row; -1 for neither."""
        row = rows_of(ids, table.column("node_id").to_numpy()) if row is None else row
        if every_step:
            return row
        step = table.column("step").to_numpy()
        at = np.minimum(np.searchsorted(wanted, step), k - 1)
        return np.where((row >= 0) & (wanted[at] == step), at * n + row, -1)

    def grid(flat: np.ndarray) -> np.ndarray:
        return flat.reshape(k, n)

    def records_of(name: str, wanted_columns: list[str]) -> pa.Table:
        """Table ``name``'s columns; of one step, its records only (the others have no cell)."""
        table = prof.columns(name, [*wanted_columns, *by_step])
        return table if k > 1 or every_step else table.filter(pc.equal(table.column("step"), wanted[0]))

    per_run = "float_ops" in columns  # a reader's float_ops per execution, where it has them
    node_steps = prof.columns("node_steps", ["node_id", "run_count", *(["float_ops"] if per_run else []), *by_step])
    ran = np.zeros(n, np.bool_)  # a record in any step, whatever the steps asked for
    every = rows_of(ids, node_steps.column("node_id").to_numpy())
    ran[every[every >= 0]] = True
    at = cells(node_steps, every)
    records = grid(np.bincount(at[at >= 0], minlength=k * n))
    sums = {"run_count": grid(sum_at(at, node_steps.column("run_count").to_numpy(), k * n))}
    counted = None  # per (step, node): whether its float_ops were counted per execution
    if per_run and node_steps.column("float_ops").null_count < node_steps.num_rows:
        flops = node_steps.column("float_ops")
        has = ~flops.is_null().to_numpy(zero_copy_only=False)
        sums["_flops_per_run"] = grid(sum_at(at, flops.fill_null(0).to_numpy(), k * n, has))
        counted = grid(sum_at(at, has.astype(np.int64), k * n)) > 0
    del node_steps, every
    wants = set(columns) | ({"run_count"} if {"float_ops", "macs"} & set(columns) else set())
    if wants & set(TIME):
        exact = time_scale(prof) != 1  # durations in ns (tfprof.queries.ticks)
        execs = records_of("execs", ["node_id", "kind", "duration_micros", *(["duration_ns"] if exact else [])])
        at, duration = cells(execs), durations(execs, exact)
        kind = positions(execs.column("kind"), ["accelerator", "cpu"])
        for name, where in zip(TIME, (None, kind == 0, kind == 1)):
            if name in wants:
                sums[name] = grid(sum_at(at, duration, k * n, where))
        del execs, duration, kind
    if wants & set(MEMORY):
        memory = records_of("memory", ["node_id", *MEMORY])
        at = cells(memory)
        for name in MEMORY:
            if name in wants:
                sums[name] = grid(sum_at(at, memory.column(name).to_numpy(), k * n))
        del memory
    if records.max(initial=0) <= 1:  # one record per node and step, the usual case: no division
        numbers = {m: np.where(records > 0, v, 0) for m, v in sums.items() if m in wants}
    else:
        numbers = {m: np.where(records > 0, v // np.maximum(records, 1), 0) for m, v in sums.items() if m in wants}
    steps_in_capture = capture_steps(prof) if every_step else 0
    if steps_in_capture:  # a foreign profile's time per step of the capture (``capture_steps``)
        for name in TIME:
            if name in wants:
                numbers[name] = sums[name] // steps_in_capture
    # a negative count (TensorFlow's op log has -1 for some ops on empty tensors) counts as 0:
    # the clamp rule of tfprof.ingest.validate, which reports it
    static = {
        "float_ops": np.maximum(nodes.column("float_ops").to_numpy(), 0),
        "macs": _static_macs(prof, ids) if "macs" in wants else None,
    }
    for name in ("float_ops", "macs"):  # the static count times the run count where the node ran
        if name in wants:
            numbers[name] = np.where(ran, static[name] * numbers["run_count"], static[name])
    if counted is not None and "float_ops" in wants:  # summed over the executions, each its own shapes
        per_run_flops = sums["_flops_per_run"] // np.maximum(records, 1)
        numbers["float_ops"] = np.where(counted, per_run_flops, numbers["float_ops"])
    numbers["parameters"] = np.broadcast_to(nodes.column("params").to_numpy(), (k, n))
    return nodes, ids, numbers


def capture_steps(prof: Profile) -> int:
    """For a foreign profile (time in ns, ``tfprof.queries.ticks``) of more than one step, the
    number of its steps, else 0. Such a profile's step -1 time is each node's total over the
    capture divided by that number — the time it takes per step, counting the steps it did not
    run in — where tfprof divides by the steps a node has a record in: on a trace whose input
    pipeline runs in the first step only, tfprof's mean ranks that work as if it ran every step.
    Run counts and memory keep tfprof's mean."""
    if time_scale(prof) == 1:
        return 0
    steps = prof.row_counts().get("steps", 0)
    return steps if steps > 1 else 0


def durations(execs: pa.Table, exact: bool) -> np.ndarray:
    """Each record's duration: whole µs, or with ``exact`` ns (``duration_ns``, else the µs)."""
    micros = execs.column("duration_micros").to_numpy()
    if not exact:
        return micros
    ns = execs.column("duration_ns")
    return np.where(ns.is_null().to_numpy(zero_copy_only=False), micros * 1000,
                    ns.fill_null(0).to_numpy())


def _static_macs(prof: Profile, ids: np.ndarray) -> np.ndarray:
    """Per node of ``ids``, its ``node_flops.macs`` (0 without a row: no rule, or a store
    written before the table existed)."""
    flops = prof.columns("node_flops", ["node_id", "macs"])
    macs = np.zeros(len(ids), np.int64)
    row = rows_of(ids, flops.column("node_id").to_numpy())
    macs[row[row >= 0]] = flops.column("macs").to_numpy()[row >= 0]
    return macs


def step_means(prof: Profile) -> dict[str, pa.Table]:
    """The index of per-node means over all steps (``step_numbers`` for step -1, the default
    of every view), so that a freshly opened store need not aggregate every exec record."""
    return {"metrics": step_numbers(prof, -1)}


def positions(column: pa.ChunkedArray, values: list[str]) -> np.ndarray:
    """Per row, the position of its value in ``values``; -1 for any other value. A dictionary
    column is looked up once per dictionary entry, not once per row."""
    want = pa.array(values)
    parts = [np.zeros(0, np.int32)]
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            at = pc.index_in(chunk.dictionary, value_set=want).fill_null(-1).to_numpy()
            parts.append(at[chunk.indices.to_numpy(zero_copy_only=False)])
        else:
            parts.append(pc.index_in(chunk, value_set=want).fill_null(-1).to_numpy(zero_copy_only=False))
    return np.concatenate(parts)


def sum_at(row: np.ndarray, values: np.ndarray, n: int, where: np.ndarray | None = None) -> np.ndarray:
    """Per node row, the sum of ``values`` over the records at ``row`` (-1: no node), only
    those ``where`` is true if given."""
    out = np.zeros(n, np.int64)
    keep = row >= 0 if where is None else (row >= 0) & where
    if keep.all():  # the usual case: every record is of a node (no copies)
        np.add.at(out, row, values)
    else:
        np.add.at(out, row[keep], values[keep])
    return out

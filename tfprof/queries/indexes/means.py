"""Per-node step numbers (spec 2.3.5 and 3.1) from whole columns, in numpy.

A node's value for a step is what it recorded in that step; for ``step=-1`` it is the node's
sum over the steps in which it has a record, integer-divided by the number of those steps (not
by the number of steps in the profile: a tfprof quirk we reproduce).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfprof.queries.arrays import rows_of

if TYPE_CHECKING:
    from tfprof.profile import Profile

TIME = ("exec_micros", "accelerator_exec_micros", "cpu_exec_micros")
MEMORY = ("requested_bytes", "peak_bytes", "residual_bytes", "output_bytes")
STEP_METRICS = ("run_count", *TIME, *MEMORY)


def step_numbers(prof: Profile, step: int = -1) -> pa.Table:
    """Per node, in node-id order: ``node_id``, ``params``, ``float_ops`` and ``STEP_METRICS``
    for option ``step`` (0 where the node has no record for it).

    ``float_ops`` is the static count for a node that never ran, else the count times the
    step's ``run_count`` (spec 2.3.5).
    """
    nodes = prof.columns("nodes", ["node_id", "params", "float_ops"])
    ids = nodes.column("node_id").to_numpy()
    if len(ids) > 1 and (np.diff(ids) <= 0).any():  # stores keep nodes in id order
        nodes = nodes.take(np.argsort(ids, kind="stable"))
        ids = nodes.column("node_id").to_numpy()
    n = len(ids)
    ran = np.zeros(n, np.bool_)  # a record in any step, whatever the option
    row = rows_of(ids, prof.columns("node_steps", ["node_id"]).column("node_id").to_numpy())
    ran[row[row >= 0]] = True
    steps = _read(prof, "node_steps", ["node_id", "run_count"], step)
    row = rows_of(ids, steps.column("node_id").to_numpy())
    records = np.bincount(row[row >= 0], minlength=n)
    sums = {"run_count": _sum(row, steps.column("run_count").to_numpy(), n)}
    del steps
    execs = _read(prof, "execs", ["node_id", "kind", "duration_micros"], step)
    row = rows_of(ids, execs.column("node_id").to_numpy())
    duration = execs.column("duration_micros").to_numpy()
    sums["exec_micros"] = _sum(row, duration, n)
    for name, kind in (("accelerator_exec_micros", "accelerator"), ("cpu_exec_micros", "cpu")):
        sums[name] = _sum(np.where(_equals(execs.column("kind"), kind), row, -1), duration, n)
    del execs, duration
    memory = _read(prof, "memory", ["node_id", *MEMORY], step)
    row = rows_of(ids, memory.column("node_id").to_numpy())
    for name in MEMORY:
        sums[name] = _sum(row, memory.column(name).to_numpy(), n)
    del memory, row
    per_step = np.maximum(records, 1)
    numbers = {m: np.where(records > 0, sums[m] // per_step, 0) for m in STEP_METRICS}
    static = nodes.column("float_ops").to_numpy()
    return pa.table({
        "node_id": ids,
        "params": nodes.column("params"),
        "float_ops": np.where(ran, static * numbers["run_count"], static),
        **numbers,
    })


def step_means(prof: Profile) -> dict[str, pa.Table]:
    """The index of per-node means over all steps (``step_numbers`` for step -1, the default
    of every view), so that a freshly opened store need not aggregate every exec record."""
    return {"metrics": step_numbers(prof, -1)}


def _read(prof: Profile, name: str, columns: list[str], step: int) -> pa.Table:
    """``columns`` of table ``name``, only the rows of ``step`` when it is >= 0."""
    if step < 0:
        return prof.columns(name, columns)
    table = prof.columns(name, [*columns, "step"])
    return table.filter(pc.equal(table.column("step"), step))


def _equals(column: pa.ChunkedArray, value: str) -> np.ndarray:
    return pc.equal(column, value).to_numpy(zero_copy_only=False).astype(np.bool_, copy=False)


def _sum(row: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per node row, the sum of ``values`` over the records at ``row`` (-1: not counted)."""
    out = np.zeros(n, np.int64)
    keep = row >= 0
    np.add.at(out, row[keep], values[keep])
    return out

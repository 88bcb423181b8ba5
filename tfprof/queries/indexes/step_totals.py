"""Every step's totals over all nodes, from one pass over each table, whatever the number of
steps: what ``step_numbers(prof, s)`` summed over its nodes gives for each step ``s``, without a
query per step (a store of a 400-step trace read its tables 1,700 times for the overview's
per-step lines).

A node's value in a step is worked out per (step, node) cell as ``means._per_step`` does (its
records' sum integer-divided by their number, float ops from the run count or counted per
execution); only the cells that hold a record exist here, so the memory is that of the records,
not of a (step x node) grid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tfprof.queries.arrays import in_id_order, rows_of
from tfprof.queries.indexes.means import MEMORY, TIME, durations, positions, sum_at
from tfprof.queries.ticks import time_scale

if TYPE_CHECKING:
    from tfprof.profile import Profile

TOTALS = ("run_count", *TIME, *MEMORY, "float_ops")


def step_totals(prof: Profile, steps: list[int]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The distinct ``steps`` in ascending order, and per metric of ``TOTALS`` an array of each
    one's total over every node (0 for a step without records)."""
    nodes, ids = in_id_order(prof.columns("nodes", ["node_id", "params", "float_ops"]))
    n, wanted = len(ids), np.unique(np.asarray(steps, np.int64))
    k = len(wanted)
    if not k:
        return wanted, {m: np.zeros(0, np.int64) for m in TOTALS}

    def cells(table) -> np.ndarray:
        """Per record: its step's index * n + its node's row; -1 for neither."""
        row = rows_of(ids, table.column("node_id").to_numpy())
        step = table.column("step").to_numpy()
        at = np.minimum(np.searchsorted(wanted, step), k - 1)
        return np.where((row >= 0) & (wanted[at] == step), at * n + row, -1)

    node_steps = prof.columns("node_steps", ["node_id", "step", "run_count", "float_ops"])
    execs = prof.columns("execs", ["node_id", "step", "kind", "duration_micros",
                                   *(["duration_ns"] if time_scale(prof) != 1 else [])])
    memory = prof.columns("memory", ["node_id", "step", *MEMORY])
    at = {"node_steps": cells(node_steps), "execs": cells(execs), "memory": cells(memory)}
    present = np.unique(np.concatenate([a[a >= 0] for a in at.values()]))
    m = len(present)
    pos = {name: np.where(a >= 0, np.searchsorted(present, a), -1) for name, a in at.items()}

    records = sum_at(pos["node_steps"], np.ones(node_steps.num_rows, np.int64), m)
    sums = {"run_count": sum_at(pos["node_steps"], node_steps.column("run_count").to_numpy(), m)}
    duration = durations(execs, time_scale(prof) != 1)
    kind = positions(execs.column("kind"), ["accelerator", "cpu"])
    for name, where in zip(TIME, (None, kind == 0, kind == 1)):
        sums[name] = sum_at(pos["execs"], duration, m, where)
    for name in MEMORY:
        sums[name] = sum_at(pos["memory"], memory.column(name).to_numpy(), m)
    numbers = {name: np.where(records > 0, v // np.maximum(records, 1), 0) for name, v in sums.items()}

    # float ops: the static count times the run count where the node ran (in any step), the
    # static count in every step where it never ran; summed per execution where counted so
    static = np.maximum(nodes.column("float_ops").to_numpy(), 0)
    ran = np.zeros(n, np.bool_)
    every = rows_of(ids, node_steps.column("node_id").to_numpy())
    ran[every[every >= 0]] = True
    row = present % n
    flops = np.where(ran[row], static[row] * numbers["run_count"], 0)
    if node_steps.column("float_ops").null_count < node_steps.num_rows:
        counted_flops = node_steps.column("float_ops")
        has = ~counted_flops.is_null().to_numpy(zero_copy_only=False)
        per_run = sum_at(pos["node_steps"], counted_flops.fill_null(0).to_numpy(), m, has)
        counted = sum_at(pos["node_steps"], has.astype(np.int64), m) > 0
        flops = np.where(counted, per_run // np.maximum(records, 1), flops)
    numbers["float_ops"] = flops

    step_of = present // n
    totals = {name: sum_at(step_of, numbers[name], k) for name in TOTALS}
    totals["float_ops"] = totals["float_ops"] + int(static[~ran].sum())
    return wanted, totals

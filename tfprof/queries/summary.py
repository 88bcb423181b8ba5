"""A short summary of a profile: sizes, model totals and per-step time and memory."""

from __future__ import annotations

import numpy as np
import polars as pl

from tfprof.profile import Profile
from tfprof.queries.indexes.step_totals import step_totals
from tfprof.queries.ticks import in_micros, time_scale
from tfprof.queries.totals import totals


def summary(prof: Profile) -> pl.DataFrame:
    """One row per step (and one ``mean`` row): exec time, accelerator/cpu time, requested bytes.
    The steps' totals come from one pass over the tables (``step_totals``), not a query each."""
    steps = prof.frame("steps")["step"].to_list()
    order, per_step = step_totals(prof, steps)
    at = np.searchsorted(order, np.asarray(steps, np.int64))
    columns = ("exec_micros", "accelerator_exec_micros", "cpu_exec_micros", "requested_bytes", "peak_bytes", "float_ops")
    mean = totals(prof, -1)
    frame = pl.DataFrame({
        "step": [*map(str, steps), "mean"],
        **{c: np.append(per_step[c][at], mean[c]) for c in columns},
    }, schema={"step": pl.String, **dict.fromkeys(columns, pl.Int64)})
    return in_micros(frame, time_scale(prof))  # exact µs (floats) for a foreign profile


def model_facts(prof: Profile) -> dict[str, int]:
    """Node, op type and step counts, trainable parameters and static float ops. A foreign
    trace (Kineto, XSpace) records no trainable variables, so their lines are left out there
    rather than shown as 0."""
    from tfprof.queries.advisor.trace import has_trace

    nodes = prof.lazy("nodes")
    facts = nodes.select(
        pl.len().alias("nodes"), pl.col("op").n_unique().alias("op_types"), pl.col("float_ops").sum()
    ).collect().row(0, named=True)
    out = {"nodes": facts["nodes"], "op types": facts["op_types"], "steps": prof.row_counts()["steps"]}
    if not has_trace(prof):
        trainable = totals(prof, -1, op_type="_trainable_variables")
        out |= {"trainable variables": trainable["nodes"], "trainable parameters": trainable["params"]}
    return out | {"float ops (static)": int(facts["float_ops"] or 0)}

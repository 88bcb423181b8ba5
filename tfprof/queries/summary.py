"""A short summary of a profile: sizes, model totals and per-step time and memory."""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.ticks import in_micros, time_scale
from tfprof.queries.totals import totals


def summary(prof: Profile) -> pl.DataFrame:
    """One row per step (and one ``mean`` row): exec time, accelerator/cpu time, requested bytes."""
    steps = prof.frame("steps")["step"].to_list()
    rows = []
    for label, step in [(str(s), s) for s in steps] + [("mean", -1)]:
        t = totals(prof, step)
        rows.append(
            {
                "step": label,
                "exec_micros": t["exec_micros"],
                "accelerator_exec_micros": t["accelerator_exec_micros"],
                "cpu_exec_micros": t["cpu_exec_micros"],
                "requested_bytes": t["requested_bytes"],
                "peak_bytes": t["peak_bytes"],
                "float_ops": t["float_ops"],
            }
        )
    return in_micros(pl.DataFrame(rows), time_scale(prof))  # exact µs (floats) for a foreign profile


def model_facts(prof: Profile) -> dict[str, int]:
    """Node, op type and step counts, trainable parameters and static float ops."""
    trainable = totals(prof, -1, op_type="_trainable_variables")
    nodes = prof.lazy("nodes")
    facts = nodes.select(
        pl.len().alias("nodes"), pl.col("op").n_unique().alias("op_types"), pl.col("float_ops").sum()
    ).collect().row(0, named=True)
    return {
        "nodes": facts["nodes"],
        "op types": facts["op_types"],
        "steps": prof.row_counts()["steps"],
        "trainable variables": trainable["nodes"],
        "trainable parameters": trainable["params"],
        "float ops (static)": int(facts["float_ops"] or 0),
    }

"""Several runs as one profile whose per-node numbers are aggregated over the runs, so that every
view (scope, graph, op, code), with every option, runs on it unchanged. A distributed job's run
counts as its ranks: each rank is aggregated as a run would be.

What aggregating a view means: a node is matched across runs by its name (the k-th node of a
name in one run with the k-th of that name in another); each of its self numbers for the
default ``step=-1`` (the per-step means tfprof's views print: time, memory, params, float_ops,
run count) is aggregated over the selected runs, ``sum``, ``mean`` (the sum integer-divided by
the number of runs, a run without the node counting 0) or ``max``. The view then does what it
always does with self numbers: subtree (or per-op, per-code-line) totals, thresholds, ordering
and display. So a scope line of a ``--aggregate sum`` view shows, per node path, the node's
time summed over the runs and its subtree's total of those sums.

The graph (nodes, inputs, op types, shapes, attrs, code traces) is the union of the runs':
each node's structure comes from the first run (in name order) that has it, and the profile's
``devices`` and ``info`` from the first run. Per-step records are not carried over: such a
profile has no steps, so ``step`` >= 0 and the timeline output do not apply to it.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from tfprof.catalog.layout import run_ranks
from tfprof.catalog.read import member_profiles, runs
from tfprof.errors import OptionError
from tfprof.output import PathLike, input_paths
from tfprof.profile import Profile
from tfprof.queries.indexes.means import STEP_METRICS, step_numbers
from tfprof.queries.ticks import is_time, time_scale
from tfprof.schema import TABLES

AGGREGATES = ("sum", "mean", "max")
# Tables describing the graph (keyed by node, no step): carried over for the union of nodes.
STRUCTURE = ("nodes", "node_inputs", "node_types", "output_shapes", "node_attrs", "code_frames")
NUMBERS = ("params", "float_ops", "macs", *STEP_METRICS)
_KEY = ["name", "_dup"]


def _keys(nodes: pa.Table) -> pl.DataFrame:
    """node_id -> (name, occurrence of that name in node-id order)."""
    frame = pl.from_arrow(nodes.select(["node_id", "name"])).sort("node_id")
    return frame.with_columns(pl.col("name").fill_null(""), pl.int_range(pl.len()).over("name").alias("_dup"))


def aggregate_profile(catalog: PathLike, names: list[str], how: str = "sum") -> Profile:
    """Runs ``names`` of ``catalog`` as one profile, each node's numbers aggregated with ``how``
    (``sum``, ``mean`` or ``max``; see the module docstring).

    >>> import tempfile, tfprof
    >>> from tfprof.catalog import add_run, aggregate_profile
    >>> cat = tempfile.mkdtemp() + "/cat"
    >>> for r in ("a", "b"): _ = add_run(cat, r, profile_path=tfprof.sample_path())
    >>> one = tfprof.view(tfprof.load(tfprof.sample_path()), "scope", max_depth=0)["total_exec_micros"][0]
    >>> both = tfprof.view(aggregate_profile(cat, ["a", "b"], "sum"), "scope", max_depth=0)["total_exec_micros"][0]
    >>> both == 2 * one
    True
    """
    if how not in AGGREGATES:
        raise OptionError(f"unknown --aggregate `{how}`; valid: {', '.join(AGGREGATES)}")
    if not names:
        raise OptionError("no runs to aggregate")
    ranks = {r["run"]: run_ranks(r) for r in runs(catalog).to_pylist()}
    members = [(run, rank) for run in names for rank in (ranks.get(run) or [None])]  # a job: each of its ranks
    union: pl.DataFrame | None = None  # name, _dup, node_id (the new id)
    parts: dict[str, list[pa.Table]] = {t: [] for t in STRUCTURE}
    numbers: list[pl.DataFrame] = []
    first: Profile | None = None
    scales: list[int] = []  # each run's ticks per µs (tfprof.queries.ticks)
    for prof in member_profiles(catalog, members):
        keys = _keys(prof.table("nodes"))
        if union is None:
            first, union = prof, keys.select(*_KEY, "node_id")
            new = keys.select("node_id", pl.col("node_id").alias("_new"))
            id_map = new
        else:
            known = keys.join(union.rename({"node_id": "_new"}), on=_KEY, how="left")
            start = (union["node_id"].max() or -1) + 1
            fresh = known.filter(pl.col("_new").is_null()).with_columns(
                (pl.int_range(pl.len()) + start).alias("_new"))
            union = pl.concat([union, fresh.select(*_KEY, pl.col("_new").alias("node_id"))])
            new = fresh.select("node_id", "_new")
            id_map = pl.concat([known.filter(pl.col("_new").is_not_null()), fresh]).select("node_id", "_new")
        if new.height:
            for table in STRUCTURE:
                parts[table].append(_remap(prof.table(table), new, id_map))
        metrics = pl.from_arrow(step_numbers(prof, -1)).join(keys, on="node_id").drop("node_id")
        numbers.append(metrics)
        scales.append(time_scale(prof))
        del prof
    assert union is not None and first is not None
    tables = {t: pa.concat_tables(parts[t]) if parts[t] else TABLES[t].schema.empty_table() for t in STRUCTURE}
    tables["devices"] = first.table("devices")
    tables["info"] = first.table("info")
    prof = Profile(tables, source=first.source)
    prof.inputs = input_paths(profile_path=catalog)
    # times in the finest unit of the runs: ns when any has exact times (a foreign profile's), else whole µs
    scale = max(scales)
    numbers = [m.with_columns(pl.col(c) * (scale // s) for c in m.columns if is_time(c)) if s != scale else m
               for m, s in zip(numbers, scales, strict=True)]
    means = _aggregate(pl.concat(numbers), union, how, len(members))
    prof.memo(("index", "step_means"), lambda: {"metrics": means})  # what every view reads for step -1
    prof.memo("time_scale", lambda: scale)
    return prof


def _remap(table: pa.Table, chosen: pl.DataFrame, id_map: pl.DataFrame) -> pa.Table:
    """The rows of ``table`` for the nodes in ``chosen`` (node_id -> _new), with node ids (and
    ``input_id`` through ``id_map``) rewritten to the union's ids."""
    frame = pl.from_arrow(table)
    schema = table.schema
    if not frame.height:
        return table
    frame = frame.join(chosen, on="node_id", how="inner", maintain_order="left")
    frame = frame.with_columns(pl.col("_new").alias("node_id")).drop("_new")
    if "input_id" in frame.columns:
        frame = frame.join(id_map.rename({"node_id": "input_id", "_new": "_in"}), on="input_id", how="left",
                           maintain_order="left").with_columns(pl.col("_in").alias("input_id")).drop("_in")
    return frame.select(schema.names).to_arrow().cast(schema)


def _aggregate(numbers: pl.DataFrame, union: pl.DataFrame, how: str, runs: int) -> pl.DataFrame:
    """Per node of ``union``: each of ``NUMBERS`` aggregated over the runs (absent: 0)."""
    if how == "max":
        agg = [pl.col(c).max() for c in NUMBERS]
    elif how == "mean":
        agg = [(pl.col(c).sum() // runs) for c in NUMBERS]
    else:
        agg = [pl.col(c).sum() for c in NUMBERS]
    per_node = numbers.group_by(_KEY).agg(agg)
    out = union.join(per_node, on=_KEY, how="left").sort("node_id")
    return out.select("node_id", *(pl.col(c).fill_null(0).cast(pl.Int64) for c in NUMBERS))

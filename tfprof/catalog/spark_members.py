"""Runs (or a job's ranks) aggregated per node on Spark, over the catalog's Parquet partitions:
the same numbers as ``tfprof.catalog.aggregate.aggregate_profile``, computed by two SQL files
(``step_means.sql``: each member's own numbers for step -1; ``aggregate_nodes.sql``: matched by
name across members and aggregated), whose results stay on Spark.

``spark_aggregate`` returns a ``Profile`` that holds none of that on the driver: its views run on
Spark (``tfprof.catalog.spark_views``, through ``Profile.executor``) and bring back the printed
rows, and then the details the report prints about those rows' nodes. What every member is read
for is checkpointed on Spark while the catalog's shared lock is held (each partition's CRC-32
checked first), so a later add or remove cannot change it under the view.
"""

from __future__ import annotations

import contextlib
import functools
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tfprof.catalog.aggregate import AGGREGATES
from tfprof.catalog.layout import locked, read_runs, require_catalog, run_ranks
from tfprof.catalog.read import partition_files, verify_partitions
from tfprof.catalog.spark_views import Members, SparkViews
from tfprof.catalog.storage import object_uri
from tfprof.catalog.trust import check_runs
from tfprof.errors import OptionError
from tfprof.output import PathLike, input_paths
from tfprof.profile import Profile
from tfprof.schema import TABLES

# the tables a view over members reads, and the columns it reads of each
READ = {
    "nodes": None,  # every column: a group view may group by any
    "node_steps": ["node_id", "run_count", "float_ops"],
    "execs": ["node_id", "kind", "duration_micros", "duration_ns"],
    "memory": ["node_id", "requested_bytes", "peak_bytes", "residual_bytes", "output_bytes"],
    "node_flops": ["node_id", "macs"],
    "steps": ["step"],
    "node_types": ["node_id", "op_type"],
    "node_inputs": ["node_id", "input_idx", "input_id", "output_slot"],
    "output_shapes": ["node_id", "slot", "dims"],
    "code_frames": ["node_id", "depth", "file", "lineno", "function"],
    "devices": None,
    "info": None,
}


def member_list(rows: list[dict], names: list[str]) -> list[tuple[str, int | None]]:
    """(run, rank) per member, in order: each run of ``names``, a job's run as each of its ranks."""
    by_name = {r["run"]: r for r in rows}
    for name in names:
        if name not in by_name:
            raise OptionError(f"no run `{name}` in the catalog")
    return [(name, rank) for name in names for rank in (run_ranks(by_name[name]) or [None])]


def spark_aggregate(catalog: PathLike, names: list[str], how: str = "sum", master: str | None = None) -> Profile:
    """Runs ``names`` of ``catalog`` aggregated per node with ``how`` (the module docstring), as a
    profile whose views (scope, graph, op, code) run on Spark.

    For example (pyspark installed): ``print(tfprof.api.run_view(spark_aggregate("runs/", ["a",
    "b"], "sum"), "op", {"max_depth": 10}).text)``.
    """
    from tfprof.catalog.spark import session, spark_errors
    if how not in AGGREGATES:
        raise OptionError(f"unknown --aggregate `{how}`; valid: {', '.join(AGGREGATES)}")
    if not names:
        raise OptionError("no runs to aggregate")
    spark = session(master)
    with spark_errors():
        members = _read(catalog, names, how, spark)
    tables = {name: TABLES[name].schema.empty_table() for name in TABLES}
    tables.update(members.small)
    prof = Profile(tables, source=members.source)
    prof.inputs = input_paths(profile_path=catalog)
    prof.memo("time_scale", lambda: members.ticks)
    prof.executor = SparkViews(members)
    return prof


def _read(catalog: PathLike, names: list[str], how: str, spark) -> Members:
    """``Members`` of runs ``names`` of ``catalog``: its partitions checked, then read on Spark
    holding the shared lock."""
    if uri := object_uri(catalog):
        return _staged(uri, names, how, spark)
    root = require_catalog(catalog)
    with locked(root, shared=True):
        rows = check_runs(root, read_runs(root))
        chosen = member_list(rows, names)
        files, listed = partition_files(root, names)
        verify_partitions(root, [e for t in READ for e in listed[t]])
        members = _members(spark, root, files, chosen, how, _format(rows, chosen))
    members.guard = functools.partial(_unchanged, root, names, _rows_of(rows, names))
    return members


@contextlib.contextmanager
def _unchanged(root: Path, names: list[str], rows: list[dict]) -> Iterator[None]:
    """The catalog's shared lock, held while Spark reads partitions after ``spark_aggregate``
    returned: they are still the ones checked then unless runs ``names`` (their ``rows``) were
    replaced or removed meanwhile, which this refuses."""
    with locked(root, shared=True):
        if _rows_of(check_runs(root, read_runs(root)), names) != rows:
            raise OptionError(f"a run of the view was replaced or removed from `{root}` while it ran: run it again")
        yield


def _rows_of(rows: list[dict], names: list[str]) -> list[dict]:
    return [r for r in rows if r["run"] in names]


def _format(rows: list[dict], chosen: list[tuple[str, int | None]]) -> str:
    """The first member's format (the profile's ``source``, as ``aggregate_profile`` gives it)."""
    return next(r["format"] for r in rows if r["run"] == chosen[0][0])


def _staged(uri: str, names: list[str], how: str, spark) -> Members:
    """``_members`` for a catalog in object storage: its partitions copied (each checked) into a
    local temporary catalog first, as ``tfprof sql --engine spark`` does (Spark reads ``s3a://``
    only with jars pyspark lacks)."""
    from tfprof.catalog.remote import download

    with tempfile.TemporaryDirectory(prefix="tfprof-spark-") as tmp:
        files, runs = download(uri, list(READ), Path(tmp), names)
        chosen = member_list(runs.to_pylist(), names)
        members = _members(spark, Path(tmp), files, chosen, how, _format(runs.to_pylist(), chosen))
        members.inputs = members.inputs.localCheckpoint()  # now: the copies go
        members.frames = members.frames.localCheckpoint()
        return members


def _members(spark, root: Path, files: dict[str, list[Path]], chosen: list[tuple[str, int | None]], how: str,
             source: str) -> Members:
    """Read each table of ``READ`` for the members ``chosen`` from partition ``files`` under ``root``,
    and compute what a view over them reads (``Members``), checkpointed on Spark."""
    from pyspark.sql import functions as F

    from tfprof.catalog.layout import with_run_column
    from tfprof.catalog.spark import SparkSql

    member_rows = [(run, None if rank is None else str(rank), i) for i, (run, rank) in enumerate(chosen)]
    keys = spark.createDataFrame(member_rows, "m_run string, m_rank string, member long")

    def table(name: str):
        if files[name]:
            df = spark.read.option("basePath", str(root / name)).parquet(*map(str, files[name]))
        else:
            df = spark.createDataFrame(with_run_column(name).empty_table())
        df = df.join(F.broadcast(keys), (df["run"] == keys["m_run"]) & df["rank"].eqNullSafe(keys["m_rank"]))
        columns = READ[name] or TABLES[name].schema.names
        return df.select("member", *columns)

    frames = {name: table(name) for name in READ}
    sql = SparkSql()
    means = sql.frame("step_means", **{f"_{t}": frames[t] for t in
                                       ("nodes", "node_steps", "execs", "memory", "node_flops", "steps")})
    nodes = sql.frame("aggregate_nodes", {"how": how, "members": len(chosen)}, _means=means,
                      _names=frames["nodes"].select("member", "node_id", "name")).localCheckpoint()
    first = nodes.select("id", F.col("first_member").alias("member"), F.col("first_node").alias("node_id"))
    statics = (first.join(frames["nodes"], ["member", "node_id"])
               .select("id", *(c for c in TABLES["nodes"].schema.names if c not in ("node_id", "name"))))
    types = first.join(frames["node_types"], ["member", "node_id"]).select("id", F.col("op_type").cast("string"))
    inputs = _union_inputs(frames, nodes, first)
    code = first.join(frames["code_frames"], ["member", "node_id"]).select("id", *READ["code_frames"][1:])
    ticks = nodes.agg(F.max("ticks")).first()[0] or 1  # (none: no node)
    small = {}
    for name in ("devices", "info"):
        rows = frames[name].filter(F.col("member") == 0).drop("member").toArrow()
        small[name] = rows.select(TABLES[name].schema.names).cast(TABLES[name].schema)
    return Members(spark=spark, nodes=nodes, statics=statics.localCheckpoint(), types=types.localCheckpoint(),
                   inputs=inputs, frames=code, ticks=int(ticks), count=len(chosen),
                   source=source, small=small)



def _union_inputs(frames: dict, nodes, first):
    """The union's ``node_inputs`` as ``aggregate_profile`` makes them, and each input's shape:
    per union node and input (``id``, ``input_idx``, ``input_id``, ``dims``), the inputs of the
    node's first member, each producer taken to its union node (null: no such node), and the
    producer's output shape at the recorded slot, from the producer's own first member."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    name = F.coalesce(F.col("name"), F.lit(""))
    keyed = frames["nodes"].select("member", "node_id", name.alias("name"), F.row_number().over(
        Window.partitionBy("member", name).orderBy("node_id")).alias("dup"))
    union_id = keyed.join(nodes.select("id", "name", "dup"), ["name", "dup"]).select(
        "member", F.col("node_id").alias("input_id"), F.col("id").alias("producer"))
    shapes = first.join(frames["output_shapes"], ["member", "node_id"]).select(
        F.col("id").alias("producer"), F.col("slot").alias("output_slot"), "dims")
    return (first.join(frames["node_inputs"], ["member", "node_id"])
            .join(union_id, ["member", "input_id"], "left")
            .join(shapes, ["producer", "output_slot"], "left")
            .select("id", "input_idx", F.col("producer").alias("input_id"), "dims"))

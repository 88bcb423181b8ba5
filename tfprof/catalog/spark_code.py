"""The code view's call-stack trie of a Spark aggregate, built on Spark: the ``code_trie`` index's
trie (``tfprof.queries.indexes.code_trie``) stated in SQL (``code_members.sql``, ``code_paths.sql``,
then ``code_level.sql`` once per depth), over each union node's frames in its first member.

A trie node is numbered by the member that creates it and its depth, so no step numbers rows
across the whole frame; siblings are ordered by their creators, which is the index's creation
order. ``tests/test_member_sql.py`` holds the SQL's trie equal to the index's on the traced
fixtures, and ``tests/test_spark.py`` the code views over runs equal to the local engine's.
"""

from __future__ import annotations

from dataclasses import dataclass

from tfprof.queries.indexes.code_trie import NoCodeTraces
from tfprof.queries.reference.sql import width


@dataclass
class Trie:
    """On Spark: ``nodes`` (``id``, ``name``: the label), ``keys`` (``id``, ``key``: pre-order keys),
    ``leaves`` (``id``: a union node, ``tid``: the trie node its path ends at); and the gradient
    groups no path was found for (``lost``)."""

    nodes: object
    keys: object
    leaves: object
    lost: int


def spark_trie(q, names, frames) -> Trie:
    """The trie of the union nodes ``names`` (``node_id``, ``name``) whose frames are ``frames``
    (``id``, ``depth``, ``file``, ``lineno``, ``function``), on Spark (``q``: a ``SparkSql``)."""
    from pyspark.sql import functions as F

    framed = _traces(frames).localCheckpoint()
    if framed.isEmpty():
        raise NoCodeTraces("No code trace information")
    nodes = names.select(F.col("node_id").alias("id"), F.coalesce(F.col("name"), F.lit("")).alias("name"))
    members = q.frame("code_members", _nodes=nodes, _traced=framed.select("id").distinct()).localCheckpoint()
    lost = members.filter(F.col("src").isNull()).agg(F.countDistinct("forward")).first()[0] or 0
    paths = q.frame("code_paths", _members=members, _frames=framed).localCheckpoint()
    levels = (paths.agg(F.max("depth")).first()[0] or 0) + 1
    above = q.spark.createDataFrame([], "ord long, node long")
    placed = []
    for depth in range(levels):  # one level a round: a node's number needs its parent's
        level = q.frame("code_level", {"depth": depth, "levels": levels}, _paths=paths, _above=above).localCheckpoint()
        placed.append(level.withColumn("depth", F.lit(depth)))
        above = level.select("ord", "node")
    placed = _union(placed).localCheckpoint()
    creator = F.floor(F.col("node") / levels).cast("long")
    trie = placed.filter(creator == F.col("ord")).select(F.col("node").alias("id"), "parent", creator.alias("sib"),
                                                         F.col("label").alias("name")).localCheckpoint()
    keys = q.frame("path_keys", {"width": width(trie.agg(F.max("sib")).first()[0] or 0)},
                   _tree=trie.select("id", "parent", "sib")).select("id", "key").localCheckpoint()
    last = paths.groupBy("ord").agg(F.max("depth").alias("depth"))
    leaves = (placed.join(last, ["ord", "depth"]).join(members.select("id", "ord"), "ord")
              .select("id", F.col("node").alias("tid")).localCheckpoint())
    return Trie(nodes=trie.select("id", "name"), keys=keys, leaves=leaves, lost=int(lost))


def _traces(frames):
    """``frames`` as (``id``, ``depth``, ``trace``): each frame's short form, worked out by the
    index's own function (``trace_strings``) once per distinct (file, line, function)."""
    from pyspark.sql import functions as F

    def on_batches(batches):
        import pyarrow as pa

        from tfprof.queries.indexes.code_trie import trace_strings

        for batch in batches:
            trace = trace_strings(batch.column("file"), batch.column("lineno"), batch.column("function"))
            yield pa.RecordBatch.from_arrays([*batch.columns, trace], [*batch.schema.names, "trace"])

    sites = frames.select(F.col("file").cast("string"), F.col("lineno").cast("int"),
                          F.col("function").cast("string")).distinct()
    traced = sites.mapInArrow(on_batches, "file string, lineno int, function string, trace string")
    return frames.join(traced, ["file", "lineno", "function"]).select("id", "depth", "trace")


def _union(frames: list):
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out

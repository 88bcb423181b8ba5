"""The scope, graph, group (``op``) and code views of a Spark aggregate (``tfprof.catalog.spark_members``),
run on Spark: the reference backend's steps, each a SQL file over frames that stay on Spark,
and only the printed rows brought back.

The steps are those of ``tfprof.queries.reference`` (``layouts.scope``, ``layouts.graph``, ``layouts.code``,
``display.show_tree``, ``groups.show_groups``) and read the same SQL files (the code view's trie:
``tfprof.catalog.spark_code``); what those do with polars on whole frames
is done here on Spark: joins as Spark joins, the regex and threshold flags by the same polars
expressions on each batch of rows (``mapInArrow``: so a regex means what it means locally),
long and wide forms as Spark's unpivot and pivot. Once ``display.sql`` has said which nodes
print, those rows come back and the rest (their order, the groups' list) runs locally, by the
reference backend's own functions. The details a report prints about a node (shape, device,
op types, input shapes) are fetched for the printed nodes only. ``tests/test_spark.py`` holds
every result equal to the local engine's on the same runs.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa

from tfprof.catalog.aggregate import NUMBERS
from tfprof.catalog.spark import SparkSql, spark_errors
from tfprof.errors import OptionError
from tfprof.profile import Profile
from tfprof.queries.engine import Displayed
from tfprof.queries.reference.display import display_params, flag_columns, in_display_order, root_totals
from tfprof.queries.reference.groups import group_sums, list_groups
from tfprof.queries.reference.layouts import added, counted, full_match
from tfprof.queries.reference.sql import Sql, wide, width
from tfprof.queries.spec import SCOPE_PARENT, TreeSpec
from tfprof.queries.ticks import scaled_spec
from tfprof.schema import TABLES
from tfprof.schema.metrics import computed, maxed, ratios

_SYNTHETIC = 1 << 62  # ids of the producers of printed nodes' inputs in a details profile


@dataclass
class Members:
    """What a view over members reads, on Spark: ``nodes`` (the aggregated numbers per union
    node: ``id``, ``name``, ``first_member``, ``first_node`` and ``NUMBERS``), ``statics`` (each
    union node's row of ``nodes`` in its first member: id, shape, device, the group columns),
    ``types`` (id, op_type) and ``inputs`` (id, input_idx, input_id: the producer's union node,
    dims: its output shape) and ``frames`` (id, depth, file, lineno, function: code frames; both read
    from the partitions only if a view asks, inside ``guard()``); the finest ticks per µs
    of the members' times, and the first member's devices and info."""

    spark: object
    nodes: object
    statics: object
    types: object
    inputs: object
    frames: object
    ticks: int
    count: int
    source: str
    guard: Callable[[], AbstractContextManager] = nullcontext
    small: dict[str, pa.Table] = field(default_factory=dict)


class SparkViews:
    """``Profile.executor`` of a Spark aggregate: ``self(spec)`` runs a scope, graph, group or code view."""

    def __init__(self, members: Members) -> None:
        self.m = members
        self._trie = None  # the code view's trie, once built (it depends on no option)

    def __call__(self, spec: TreeSpec) -> Displayed:
        if maxed() or ratios() or computed():
            raise OptionError("a view over runs on Spark counts tfprof's own metrics only; a plugin registered more: "
                              "run it with the local engine (drop --engine spark)")
        if spec.step >= 0 or spec.samples:
            raise OptionError("runs or ranks aggregated have no steps: drop -step and the @step columns")
        spec = scaled_spec(spec, self.m.ticks)
        run = {"scope": self._scope, "graph": self._graph, "groups": self._groups, "code": self._code}[spec.layout]
        with spark_errors():
            return run(spec)

    # ------------------------------------------------------------------ scope

    def _scope(self, spec: TreeSpec) -> Displayed:
        """``layouts.scope`` on Spark: the name-prefix tree, synthetic parents included."""
        from pyspark.sql import functions as F

        q = SparkSql()
        tree = q.frame("scope_tree", _names=self._names()).localCheckpoint()
        keys = q.frame("path_keys", {"width": width(tree.agg(F.max("sib")).first()[0] or 0)},
                       _tree=tree.select("id", "parent", "sib")).select("id", "key").localCheckpoint()
        parent_counts = pl.select(full_match(pl.lit(SCOPE_PARENT), spec.account)).item()
        frame = (tree.join(self._numbers(), "node_id", "left").join(self._accounted(spec), "node_id", "left")
                 .fillna(0, subset=list(counted()))
                 .withColumn("accounted", F.when(F.col("node_id").isNull(), F.lit(parent_counts))
                             .otherwise(F.coalesce(F.col("accounted"), F.lit(False))))
                 .drop("parent", "sib"))
        return self._show(q, frame, keys, spec, keep_accounted=True, defaults={"shape": [], "op_types": [SCOPE_PARENT]})

    def _graph(self, spec: TreeSpec) -> Displayed:
        """``layouts.graph`` on Spark: the accounting walk over the union's edges, round after
        round until no key changes, each round's frames checkpointed."""
        from pyspark.sql import functions as F

        q = SparkSql()
        names = self._names()
        with self.m.guard():  # the edges come from the partitions
            inputs = self.m.inputs.select(F.col("id").alias("node_id"), "input_idx", "input_id")
            edges = q.frame("graph_edges", _nodes=names, _inputs=inputs).localCheckpoint()
        w = width(self.m.nodes.count(), edges.agg(F.max("slot")).first()[0] or 0)
        keys = q.frame("graph_roots", {"width": w}, _nodes=names, _edges=edges).localCheckpoint()
        frontier = keys.select(F.col("id").alias("id"), F.col("key").alias("key"))  # (its own attribute ids)
        while not frontier.isEmpty():
            frontier = q.frame("graph_relax", {"width": w}, _keys=keys, _frontier=frontier, _edges=edges).localCheckpoint()
            # each node's key, lowered where this round lowered it (a round only returns lower keys: the
            # least per node). Not a join per round, which multiplies Spark's size estimates past what it
            # can count.
            keys = keys.unionByName(frontier).groupBy("id").agg(F.min("key").alias("key")).localCheckpoint()
        accounted = self._accounted(spec).filter("accounted").drop("accounted")
        frame = (self._numbers().join(names, "node_id").join(accounted, "node_id")
                 .join(keys.withColumnRenamed("id", "node_id"), "node_id")
                 .withColumn("id", F.col("node_id")).withColumn("accounted", F.lit(True)))
        return self._show(q, frame.drop("key"), frame.select("id", "key"), spec, keep_accounted=False, defaults={})

    def _names(self):
        from pyspark.sql import functions as F

        return self.m.nodes.select(F.col("id").alias("node_id"), "name")

    def _numbers(self):
        """Each union node's numbers (``node_id`` and the node frame's names)."""
        from pyspark.sql import functions as F

        return self.m.nodes.select(F.col("id").alias("node_id"), F.col("params").alias("parameters"),
                                   *(c for c in NUMBERS if c != "params"))

    def _show(self, q, frame, keys, spec: TreeSpec, *, keep_accounted: bool, defaults: dict) -> Displayed:
        """A scope or graph view's forest (``frame`` with ``id``, ``node_id``, ``name``, the counted
        columns and ``accounted``; its pre-order ``keys``) shown, and the printed nodes' details."""
        from tfprof.queries.metrics import attach_details, extras_for, node_frame
        from tfprof.queries.scope import with_root

        rows, root = _printed(q, frame, keys, spec, keep_accounted=keep_accounted, code_mode=False)
        details = self._details(rows["node_id"].drop_nulls(), _wants_shapes(spec))
        extras = (*extras_for(spec.options), *(("input_shapes",) if _wants_shapes(spec) else ()))
        rows = attach_details(rows.drop("id"), node_frame(details, -1, tuple(dict.fromkeys(extras))), defaults)
        return Displayed(with_root(rows, root, spec.root_op_type))

    # ------------------------------------------------------------------ code

    def _code(self, spec: TreeSpec) -> Displayed:
        """``layouts.code`` on Spark: the accounted nodes' numbers summed onto the trie node their
        path ends at (``groups.sql``), shown in code mode."""
        from pyspark.sql import functions as F

        from tfprof.catalog.spark_code import spark_trie
        from tfprof.queries.code import with_code_root

        q = SparkSql()
        if self._trie is None:
            with self.m.guard():  # the frames come from the partitions
                self._trie = spark_trie(q, self._names(), self.m.frames)
        trie = self._trie
        accounted = self._accounted(spec).filter("accounted").select(F.col("node_id").alias("id"))
        members = trie.leaves.join(accounted, "id", "left_semi").select("id", F.col("tid").alias("grp"))
        columns = [*added(), "definitions"]
        values = _long(self._numbers().withColumnRenamed("node_id", "id").withColumn("definitions", F.lit(1)), columns)
        sums = (q.frame("groups", _members=members, _values=values).groupBy("grp").pivot("metric", columns)
                .agg(F.first("value")).withColumnRenamed("grp", "id"))
        frame = (trie.nodes.join(sums, "id", "left")
                 .select("id", "name", *(F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c) for c in columns))
                 .withColumn("accounted", (F.col("definitions") > 0) | F.lit(spec.account is None)))
        rows, root = _printed(q, frame, trie.keys, spec, keep_accounted=True, code_mode=True)
        rows = rows.rename({"id": "tid"})
        printed = members.filter(F.col("grp").isin(rows["tid"].to_list()))
        if (sets := self._sets(printed, spec)) is not None:
            rows = rows.join(sets.rename({"grp": "tid"}), on="tid", how="left", maintain_order="left")
        return Displayed(with_code_root(rows, root), {}, self._picked(printed, spec, "tid"), trie.lost)

    def _sets(self, printed, spec: TreeSpec) -> pl.DataFrame | None:
        """The device and op-type sets of each group (``grp``) of the ``printed`` members (Spark:
        ``id``, ``grp``), where the report prints them; else None."""
        from tfprof.queries.op import member_sets

        sets = member_sets(spec.options)
        if not sets:
            return None
        pairs = pl.from_arrow(printed.join(self.m.statics.select("id", "canonical_device"), "id")
                              .join(self.m.types, "id", "left").select("grp", "canonical_device", "op_type")
                              .distinct().toArrow())
        pairs = pairs.select("grp", pl.col("canonical_device").alias("device"),
                             pl.when(pl.col("op_type").is_not_null()).then(pl.concat_list("op_type"))
                             .otherwise(pl.lit([], pl.List(pl.String))).alias("op_types"))
        return pairs.group_by("grp").agg(*sets)

    def _picked(self, printed, spec: TreeSpec, key: str) -> pl.DataFrame:
        """The ``printed`` members (Spark: ``id``, ``grp``) as the report prints them (their input
        shapes) or the proto holds them, each with its group as ``key``; none otherwise."""
        from pyspark.sql import functions as F

        from tfprof.queries.metrics import node_frame
        from tfprof.queries.op import picked_members

        picked = pl.DataFrame(schema={"node_id": pl.Int64, key: pl.String if key == "op" else pl.Int64})
        if _wants_shapes(spec):
            picked = pl.from_arrow(printed.select(F.col("id").alias("node_id"), F.col("grp").alias(key)).toArrow())
        nodes = node_frame(self._details(picked["node_id"], True), -1, ("op_types", "input_shapes"))
        return picked_members(nodes.join(picked, on="node_id", maintain_order="left"), spec)

    def _accounted(self, spec: TreeSpec):
        """Per union node (``node_id``) that counts, ``accounted`` true: any of its op types
        fully matches any account regex. The distinct op types are few: they are matched here."""
        from pyspark.sql import functions as F

        if spec.account is None:
            return self.m.nodes.select(F.col("id").alias("node_id"), F.lit(True).alias("accounted"))
        kinds = pl.DataFrame({"op_type": [r[0] for r in self.m.types.select("op_type").distinct().collect()]},
                             schema={"op_type": pl.String})
        hits = kinds.filter(full_match("op_type", spec.account))["op_type"].to_list()
        return (self.m.types.filter(F.col("op_type").isin(hits)).select(F.col("id").alias("node_id")).distinct()
                .withColumn("accounted", F.lit(True)))

    # ------------------------------------------------------------------ groups

    def _groups(self, spec: TreeSpec) -> Displayed:
        from pyspark.sql import functions as F

        q = SparkSql()
        members = self.m.statics.select("id", F.col(spec.group_key).cast("string").alias("grp"))
        if spec.account is not None:
            members = members.join(self._accounted(spec).withColumnRenamed("node_id", "id"), "id", "left_semi")
        values = _long(self._numbers().withColumnRenamed("node_id", "id").withColumn("definitions", F.lit(1)),
                       list(group_sums()))
        sums = pl.from_arrow(q.frame("groups", _members=members, _values=values).toArrow())
        local = Sql()
        try:
            rows, root = list_groups(local, wide(sums, list(group_sums()), "value", key="grp"), spec)
        finally:
            local.close()
        rows = rows.with_columns(pl.lit(True).alias("accounted"))
        printed = members.filter(F.col("grp").isin(rows["name"].to_list()))
        if (sets := self._sets(printed, spec)) is not None:
            rows = rows.join(sets.rename({"grp": "name"}), on="name", how="left", maintain_order="left")
        return Displayed(rows, dict(root), self._picked(printed, spec, "op"))

    # ------------------------------------------------------------------ details

    def _details(self, ids: pl.Series, shapes: bool) -> Profile:
        """A profile of the union nodes ``ids`` only: their rows of ``nodes``, op types, input
        shapes (with ``shapes``) and aggregated numbers, for what a report prints about them."""
        from pyspark.sql import functions as F

        if ids.is_empty():
            return Profile({})
        spark = self.m.spark
        wanted = F.broadcast(spark.createDataFrame(pa.table({"id": pa.array(ids.to_list(), pa.int64())})))
        nodes = self.m.nodes.join(wanted, "id", "left_semi")
        statics = pl.from_arrow(nodes.select("id", "name").join(self.m.statics, "id").toArrow())
        numbers = pl.from_arrow(nodes.select(F.col("id").alias("node_id"), *NUMBERS).toArrow())
        types = pl.from_arrow(self.m.types.join(wanted, "id", "left_semi").toArrow())
        inputs = pl.DataFrame(schema={"id": pl.Int64, "input_idx": pl.Int32, "dims": pl.List(pl.Int64)})
        if shapes:  # read from the partitions now, the catalog's lock held again (``Members.guard``)
            with self.m.guard():
                inputs = pl.from_arrow(self.m.inputs.join(wanted, "id", "left_semi").toArrow())
        inputs = inputs.with_row_index("_producer")
        producer = (pl.col("_producer").cast(pl.Int64) + _SYNTHETIC).alias("input_id")
        tables = {
            "nodes": statics.rename({"id": "node_id"}),
            "node_types": types.rename({"id": "node_id"}),
            "node_inputs": inputs.select(pl.col("id").alias("node_id"), "input_idx", pl.lit("").alias("input_name"),
                                         producer, pl.lit(0).alias("output_slot")),
            "output_shapes": inputs.filter(pl.col("dims").is_not_null()).select(
                producer.alias("node_id"), pl.lit(0).alias("slot"), "dims"),
        }
        prof = Profile({name: _as_table(name, frame) for name, frame in tables.items()})
        means = numbers.sort("node_id").select("node_id", *(pl.col(c).fill_null(0).cast(pl.Int64) for c in NUMBERS))
        prof.memo(("index", "step_means"), lambda: {"metrics": means})
        prof.memo("time_scale", lambda: self.m.ticks)
        return prof


def _wants_shapes(spec: TreeSpec) -> bool:
    """Whether a view prints its nodes' input shapes or writes them (the proto output)."""
    return "input_shapes" in spec.options.select or spec.options.output.kind == "proto"


def _as_table(name: str, frame: pl.DataFrame) -> pa.Table:
    schema = TABLES[name].schema
    return frame.select(schema.names).to_arrow().cast(schema)


def _long(df, columns: list[str]):
    """``df``'s ``columns`` in long form (``id``, ``metric``, ``value``), on Spark."""
    from pyspark.sql import functions as F

    return df.select("id", *(F.col(c).cast("long").alias(c) for c in columns)).unpivot("id", columns, "metric", "value")


def _totals(q, closure, frame, counted):
    """``tfprof.queries.reference.display``'s subtree totals on Spark: per node ``id``, the
    ``total_*`` of ``subtree_totals.sql`` over the nodes of its subtree in ``counted``."""
    from pyspark.sql import functions as F

    columns = [*added(), "definition_count"]
    values = _long(frame.withColumn("definition_count", F.lit(1)), columns)
    sums = q.frame("subtree_totals", _closure=closure.select("anc", "id"), _values=values, _counted=counted)
    wide = sums.groupBy("id").pivot("metric", columns).agg(F.first("total"))
    return wide.select("id", *(F.coalesce(F.col(c), F.lit(0)).cast("long").alias("total_" + c) for c in columns))


def _printed(q, frame, keys, spec: TreeSpec, *, keep_accounted: bool, code_mode: bool) -> tuple[pl.DataFrame, dict]:
    """``display.show_tree`` on Spark over a forest (``frame`` with ``id``, ``name``, the counted
    columns and ``accounted``; its pre-order ``keys``): the printed rows, brought back and put in
    display order here, and the root's totals."""
    closure = q.frame("closure", _keys=keys).localCheckpoint()
    if keep_accounted:
        kept = q.frame("account", _closure=closure, _accounted=frame.select("id", "accounted")).localCheckpoint()
        frame, keys = frame.join(kept, "id", "left_semi"), keys.join(kept, "id", "left_semi")
        closure = (closure.join(kept, "id", "left_semi")
                   .join(kept.withColumnRenamed("id", "anc"), "anc", "left_semi").localCheckpoint())
    frame = frame.localCheckpoint()
    root = _root(frame)
    frame = frame.join(_totals(q, closure, frame, frame.select("id")), "id", "left").localCheckpoint()
    shown = q.frame("display", display_params(spec, code_mode), _forest=_flags(frame, spec),
                    _closure=closure).localCheckpoint()
    rows = frame.join(shown, "id")
    if spec.displayed_only:
        rows = rows.drop(*(c for c in rows.columns if c.startswith("total_"))).join(
            _totals(q, closure, rows, shown.select("id")), "id", "left")
    rows = pl.from_arrow(rows.toArrow())
    if spec.displayed_only:
        root = root_totals(rows, extra_count=1)  # tfprof's root counts itself here
    local = Sql()
    try:
        rows = in_display_order(local, rows, pl.from_arrow(keys.join(shown, "id", "left_semi").toArrow()), spec)
    finally:
        local.close()
    return rows, root


def _root(frame) -> dict[str, int]:
    """The root's totals over the forest ``frame`` (on Spark): sums, and the node count."""
    from pyspark.sql import functions as F

    row = frame.agg(*(F.sum(c).cast("long").alias(c) for c in added()), F.count("*").alias("_n")).first()
    root = {"total_" + c: int(row[c] or 0) for c in counted()}
    root["total_definition_count"] = int(row["_n"])
    return root


def _flags(frame, spec: TreeSpec):
    """``display.sql``'s ``_forest`` on Spark: the flags of ``flag_columns(spec)``, worked out by
    polars on each batch of ``frame``'s rows."""

    def on_batches(batches):
        import polars as pl
        import pyarrow as pa

        from tfprof.queries.reference.display import flag_columns

        exprs = flag_columns(spec)
        for batch in batches:
            out = pl.from_arrow(pa.Table.from_batches([batch])).select("id", *exprs).to_arrow()
            yield from out.cast(pa.schema([("id", pa.int64()), ("start_hit", pa.bool_()), ("trim_hit", pa.bool_()),
                                           ("passes", pa.bool_())])).to_batches()

    flag_columns(spec)  # a bad regex fails here, on the driver, not in a task
    return frame.mapInArrow(on_batches, "id long, start_hit boolean, trim_hit boolean, passes boolean")

"""The reference backend's tree layouts: each turns a profile into a forest of rows with
pre-order keys (``path_keys.sql``), self values and an ``accounted`` flag.

* ``scope``: the name-prefix tree (``scope_tree.sql``), synthetic parents included.
* ``graph``: the accounting walk as a fixed point (``graph_edges.sql``, ``graph_roots.sql``,
  then ``graph_relax.sql`` round after round until no key changes); the forest is the reached
  accounted nodes, each under its nearest accounted ancestor on the walk, which is what their
  keys already say (a key's prefixes are its ancestors').
* ``code``: the call-stack trie of the ``code_trie`` index (its shape only: which trie node a
  member's stack ends at), with the accounted members' values summed per trie node
  (``groups.sql``).

Every forest frame has ``id``, ``name``, the self columns of ``counted()``, ``accounted`` and
a ``keys`` frame (``id``, ``key``).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.indexes.code_trie import static_trie
from tfprof.queries.options import full_match_any
from tfprof.queries.reference.sql import Sql, long, wide, width
from tfprof.queries.spec import SCOPE_PARENT, TreeSpec
from tfprof.schema.metrics import maxed, summed


def counted() -> tuple[str, ...]:
    """The self columns a forest carries and the display pass totals: the additive metrics now
    registered, and runs (summed), then the largest-of ones (``maxed``)."""
    return (*summed(), "run_count", *maxed())


def added() -> tuple[str, ...]:
    """The ``counted`` columns whose totals add up (the others' are the subtree's largest)."""
    return (*summed(), "run_count")


@dataclass(frozen=True)
class Forest:
    """A layout's rows (``frame``), their pre-order ``keys``, and whether tfprof's Account
    still has to drop the rows with nothing accounted below them (``keep_accounted``)."""

    frame: pl.DataFrame
    keys: pl.DataFrame
    keep_accounted: bool


def full_match(col: str | pl.Expr, regexes: tuple[str, ...] | None) -> pl.Expr:
    """True where ``col`` fully matches any of ``regexes``; None (tfprof's [".*"]) matches all."""
    if regexes is None:
        return pl.lit(True)
    rx = full_match_any(regexes)
    expr = pl.col(col) if isinstance(col, str) else col
    return pl.lit(False) if rx is None else expr.cast(pl.String).fill_null("").str.contains(rx)


def accounted_nodes(prof: Profile, spec: TreeSpec) -> pl.DataFrame:
    """Per graph node (``node_id``), whether it counts: any of its op types fully matches any
    account regex (every node when ``spec.account`` is None)."""
    ids = prof.lazy("nodes").select("node_id")
    if spec.account is None:
        return ids.with_columns(pl.lit(True).alias("accounted")).collect()
    hits = (
        prof.lazy("node_types")
        .filter(full_match("op_type", spec.account))
        .select("node_id")
        .unique()
        .with_columns(pl.lit(True).alias("accounted"))
    )
    return ids.join(hits, on="node_id", how="left").with_columns(pl.col("accounted").fill_null(False)).collect()


def _keys(sql: Sql, tree: pl.DataFrame) -> pl.DataFrame:
    w = width(tree["sib"].max() or 0)
    return sql.run("path_keys", {"width": w}, _tree=tree.select("id", "parent", "sib")).select("id", "key")


def scope(sql: Sql, prof: Profile, spec: TreeSpec, nodes: pl.DataFrame) -> Forest:
    """The scope tree: graph nodes and synthetic parents, siblings in name order."""
    names = nodes.select("node_id", pl.col("name").fill_null(""))
    tree = sql.run("scope_tree", _names=names)
    acc = accounted_nodes(prof, spec)
    parent_counts = pl.select(full_match(pl.lit(SCOPE_PARENT), spec.account)).item()
    frame = (
        tree.join(nodes.select("node_id", *counted()), on="node_id", how="left")
        .join(acc, on="node_id", how="left")
        .with_columns(
            *(pl.col(c).fill_null(0) for c in counted()),
            pl.when(pl.col("node_id").is_null()).then(pl.lit(parent_counts))
            .otherwise(pl.col("accounted").fill_null(False)).alias("accounted"),
        )
    )
    return Forest(frame.drop("parent", "sib"), _keys(sql, tree), keep_accounted=True)


def graph(sql: Sql, prof: Profile, spec: TreeSpec, nodes: pl.DataFrame) -> Forest:
    """The graph view's forest: reached accounted nodes, keyed by the walk's paths."""
    names = nodes.select("node_id", pl.col("name").fill_null(""))
    inputs = prof.lazy("node_inputs").select("node_id", "input_idx", "input_id").collect()
    edges = sql.run("graph_edges", _nodes=names, _inputs=inputs)
    w = width(names.height, edges["slot"].max() or 0)
    keys = frontier = sql.run("graph_roots", {"width": w}, _nodes=names, _edges=edges)
    while frontier.height:  # one round per relaxation, until no key changes
        frontier = sql.run("graph_relax", {"width": w}, _keys=keys, _frontier=frontier, _edges=edges)
        keys = pl.concat([keys.join(frontier, on="id", how="anti"), frontier])
    acc = accounted_nodes(prof, spec).filter("accounted")
    frame = (
        nodes.select("node_id", "name", *counted())
        .join(acc, on="node_id")
        .join(keys.rename({"id": "node_id"}), on="node_id")
        .with_columns(pl.col("node_id").alias("id"))
    )
    return Forest(frame.drop("key"), frame.select("id", "key"), keep_accounted=False)


def code(sql: Sql, prof: Profile, spec: TreeSpec, nodes: pl.DataFrame) -> Forest:
    """The call-stack trie with the accounted members' values summed onto their trie nodes."""
    index = prof.index("code_trie", static_trie)
    labels = index["labels"]["trace"]
    trie = index["trie"].with_row_index("id").select(
        pl.col("id").cast(pl.Int64),
        pl.when(pl.col("parent") >= 0).then(pl.col("parent")).cast(pl.Int64).alias("parent"),
        pl.col("id").cast(pl.Int64).alias("sib"),  # rows are in pre-order: siblings in creation order
        labels.gather(index["trie"]["label"]).alias("name"),
    )
    acc = accounted_nodes(prof, spec).filter("accounted")
    members = (
        index["leaves"].select(pl.col("member").alias("id"), pl.col("tid").cast(pl.Int64).alias("grp"))
        .join(acc.select(pl.col("node_id").alias("id")), on="id")
        .join(nodes.select(pl.col("node_id").alias("id")), on="id")
    )
    values = long(nodes.with_columns(pl.lit(1).alias("definitions")), [*added(), "definitions"], "node_id")
    sums = wide(sql.run("groups", _members=members, _values=values).rename({"grp": "id"}),
                [*added(), "definitions"], "value")
    if maxed():  # a line holds its largest member's
        largest = (members.join(nodes.select(pl.col("node_id").alias("id"), *maxed()), on="id")
                   .group_by("grp").agg(*(pl.col(c).max() for c in maxed())).rename({"grp": "id"}))
        sums = sums.join(largest, on="id", how="left")
    frame = trie.join(sums, on="id", how="left").with_columns(
        *(pl.col(c).fill_null(0) for c in (*counted(), "definitions")),
    ).with_columns(((pl.col("definitions") > 0) | pl.lit(spec.account is None)).alias("accounted"))
    return Forest(frame.drop("parent", "sib"), _keys(sql, trie), keep_accounted=True)


LAYOUTS = {"scope": scope, "graph": graph, "code": code}

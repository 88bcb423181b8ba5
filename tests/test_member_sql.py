"""The SQL statement of runs aggregated per node (``step_means.sql``, ``aggregate_nodes.sql``),
which ``--engine spark`` runs over a catalog's partitions (tfprof.catalog.spark_members), run
here on DuckDB over the profiles' own tables: each member's numbers equal ``step_numbers`` (the
numpy statement every view reads) on every fixture, tfprof's own and foreign (ns, steps of a
capture, float ops per execution); the aggregate equals ``aggregate_profile``'s (polars) for
sum, mean and max, across formats of different time resolution; and both files mean the same
taken to Spark SQL and back by sqlglot."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from conftest import member_catalog

import tfprof
from tfprof.catalog import aggregate_profile
from tfprof.queries.indexes.means import step_numbers
from tfprof.queries.reference.sql import Sql, sql_text
from tfprof.queries.ticks import time_scale

FIXTURES = Path(__file__).parent / "fixtures"
PROFILES = sorted(FIXTURES.glob("*/profile.pb")) + sorted(
    p for p in (FIXTURES / "foreign").iterdir() if p.name.endswith((".pb", ".json", ".gz")))
COLUMNS = {"nodes": ["node_id", "params", "float_ops"], "node_steps": ["node_id", "run_count", "float_ops"],
           "execs": ["node_id", "kind", "duration_micros", "duration_ns"],
           "memory": ["node_id", "requested_bytes", "peak_bytes", "residual_bytes", "output_bytes"],
           "node_flops": ["node_id", "macs"], "steps": ["step"]}


def _frames(profiles: list, names: bool = False) -> dict[str, pl.DataFrame]:
    """The members' tables, each row with its member's position."""
    cols = {**COLUMNS, "nodes": [*COLUMNS["nodes"], "name"]} if names else COLUMNS
    return {f"_{t}": pl.concat([pl.from_arrow(p.columns(t, c)).with_columns(pl.lit(i, pl.Int64).alias("member"))
                                for i, p in enumerate(profiles)]) for t, c in cols.items()}


def _means(sql: Sql, profiles: list) -> pl.DataFrame:
    frames = _frames(profiles, names=True)
    names = frames["_nodes"].select("member", "node_id", "name")
    frames["_nodes"] = frames["_nodes"].drop("name")
    return sql.run("step_means", **frames), names


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_step_means_sql_is_step_numbers(path):
    prof = tfprof.load(path)
    got, _ = _means(Sql(), [prof])
    want = pl.from_arrow(step_numbers(prof, -1))
    got = got.sort("node_id").select(want.columns).cast(want.schema)
    assert got.height == prof.row_counts()["nodes"] > 0
    assert got.equals(want), [c for c in want.columns if not got[c].equals(want[c])]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Path:
    return member_catalog(tmp_path_factory.mktemp("members") / "cat")


@pytest.mark.parametrize("how", ["sum", "mean", "max"])
@pytest.mark.parametrize("names", [["n-1", "n-2", "n-3"], ["k-1", "n-1"], ["job"]], ids=["own", "mixed-ticks", "ranks"])
def test_aggregate_nodes_sql_is_the_aggregate(catalog, names, how):
    from tfprof.catalog.read import run_profile, runs
    from tfprof.catalog.spark_members import member_list

    members = member_list(runs(catalog).to_pylist(), names)
    sql = Sql()
    means, node_names = _means(sql, [run_profile(catalog, run, rank) for run, rank in members])
    got = sql.run("aggregate_nodes", {"how": how, "members": len(members)}, _means=means, _names=node_names)
    local = aggregate_profile(catalog, names, how)
    want = local.index("step_means", None)["metrics"]
    assert got["ticks"].unique().to_list() == [time_scale(local)]
    # the union's ids follow the same order: the first member's nodes, then each later member's new ones
    got = got.sort("id").rename({"id": "node_id"}).select(want.columns).cast(want.schema)
    assert got.height == want.height > 0
    assert got.equals(want), [c for c in want.columns if not got[c].equals(want[c])]
    assert got["exec_micros"].sum() > 0


@pytest.mark.parametrize("name", ["step_means", "aggregate_nodes"])
def test_the_member_sql_means_the_same_in_spark_sql(catalog, name):
    sqlglot = pytest.importorskip("sqlglot", reason="needs sqlglot: pip install -e '.[dev]'")
    from sqlglot import ErrorLevel

    from tfprof.catalog.read import run_profile

    [spark] = sqlglot.transpile(sql_text(name), read="duckdb", write="spark", unsupported_level=ErrorLevel.RAISE)
    [back] = sqlglot.transpile(spark, read="spark", write="duckdb", unsupported_level=ErrorLevel.RAISE)
    profiles = [run_profile(catalog, r) for r in ("n-1", "k-1", "n-2")]
    means, names = _means(Sql(), profiles)
    frames = _frames(profiles)
    outs = []
    for text in (sql_text(name), back):
        sql = Sql(text=lambda _, t=text: t)
        if name == "step_means":
            out = sql.run(name, **frames)
        else:
            out = sql.run(name, {"how": "mean", "members": 3}, _means=means, _names=names)
        outs.append(out.sort(out.columns[:2]))
    assert outs[0].equals(outs[1]) and outs[0].height > 0


def test_spark_errors_are_one_line():
    """A Spark failure (a Java exception through py4j: pages of stack) is one line naming its cause."""
    from tfprof.catalog.spark import spark_errors
    from tfprof.errors import QueryError

    Java = type("Py4JJavaError", (Exception,), {"__module__": "py4j.protocol"})
    text = ("An error occurred while calling o852.localCheckpoint.\n: org.apache.spark.SparkException: "
            "[RECURSION_ROW_LIMIT_EXCEEDED] Recursion row limit 1000000 reached.\n\tat org.apache.x(X.scala:1)\n" * 3)
    with pytest.raises(QueryError) as raised, spark_errors():
        raise Java(text)
    message = str(raised.value)
    assert "\n" not in message and "RECURSION_ROW_LIMIT_EXCEEDED" in message and message.startswith("Spark: ")
    with pytest.raises(KeyError), spark_errors():  # ours pass through
        raise KeyError("x")


def _sql_trie(sql: Sql, nodes: pl.DataFrame, frames: pl.DataFrame):
    """The code view's trie by the three code SQL files, level by level as the Spark views build
    it: its nodes in pre-order (``parent`` as a position, ``name``), each member's leaf position,
    and the gradient groups left unplaced."""
    from tfprof.queries.reference.sql import width

    members = sql.run("code_members", _nodes=nodes, _traced=frames.select("id").unique())
    lost = members.filter(pl.col("src").is_null())["forward"].n_unique()
    paths = sql.run("code_paths", _members=members, _frames=frames)
    levels = int(paths["depth"].max()) + 1
    above, parts = pl.DataFrame(schema={"ord": pl.Int64, "node": pl.Int64}), []
    for depth in range(levels):
        level = sql.run("code_level", {"depth": depth, "levels": levels}, _paths=paths, _above=above)
        parts.append(level.with_columns(pl.lit(depth, pl.Int64).alias("depth")))
        above = level.select("ord", "node")
    placed = pl.concat(parts)
    trie = placed.filter(pl.col("node") // levels == pl.col("ord")).select(
        pl.col("node").alias("id"), "parent", (pl.col("node") // levels).alias("sib"), "label")
    keys = sql.run("path_keys", {"width": width(trie["sib"].max())}, _tree=trie.select("id", "parent", "sib"))
    pos = keys.sort("key").with_row_index("pos").select("id", pl.col("pos").cast(pl.Int64))
    trie = (trie.join(pos, on="id").join(pos.rename({"id": "parent", "pos": "up"}), on="parent", how="left")
            .sort("pos").select(pl.col("up").fill_null(-1).alias("parent"), "label"))
    leaves = (placed.join(paths.group_by("ord").agg(pl.col("depth").max()), on=["ord", "depth"])
              .join(members.select("id", "ord"), on="ord").join(pos.rename({"id": "node"}), on="node")
              .select(pl.col("id").alias("member"), pl.col("pos").alias("tid")).sort("member"))
    return trie, leaves, lost


def _renamed(prof, renames: dict[str, str]):
    """``prof``'s nodes and code frames, with some nodes renamed."""
    from tfprof.profile import Profile

    nodes = pl.from_arrow(prof.table("nodes").select(["node_id", "name"])).with_columns(
        pl.col("name").cast(pl.String).replace(renames))
    return Profile({"nodes": nodes.to_arrow(), "code_frames": prof.table("code_frames")})


TRACED = [FIXTURES / "cnn/profile.pb", FIXTURES / "rnn/profile.pb", FIXTURES / "foreign/torch_cnn.pt.trace.json",
          FIXTURES / "foreign/torch_transformer.pt.trace.json.gz"]


@pytest.mark.parametrize("case", [*(str(p) for p in TRACED), "renamed", "round trip"],
                         ids=lambda c: c if c in ("renamed", "round trip") else Path(c).parent.name + "/" + Path(c).name)
def test_code_trie_sql_is_the_code_trie_index(case):
    """The code view's trie as SQL builds it (runs on Spark) is the ``code_trie`` index's: the same
    nodes in pre-order with the same labels and parents, the same leaf per member, the same count
    of unplaced gradient groups. ``renamed``: forward nodes renamed away (their gradients lose
    their path) and a name holding ``_grad/`` before ``gradients/`` (tfprof then takes the rest);
    ``round trip``: the SQL as Spark reads it, back in DuckDB's dialect."""
    import pyarrow as pa

    from tfprof.queries.indexes.code_trie import static_trie, trace_strings

    prof = tfprof.load(FIXTURES / "cnn/profile.pb" if case in ("renamed", "round trip") else case)
    if case == "renamed":
        names = pl.from_arrow(prof.table("nodes")["name"]).cast(pl.String)
        wanted = {m.group(1) for n in names if (m := re.search("gradients/(.+?)_grad/", n))}
        forward = sorted(set(names) & wanted)[:3]
        odd = next(n for n in names if "gradients/" in n)
        prof = _renamed(prof, {**{n: n + "_gone" for n in forward}, odd: "x_grad/" + odd})
    want = static_trie(prof)
    frames = prof.table("code_frames")
    text = [frames[c].combine_chunks().cast(pa.string()) if pa.types.is_dictionary(frames[c].type) else frames[c]
            for c in ("file", "lineno", "function")]
    frames = pl.DataFrame({"id": frames["node_id"], "depth": frames["depth"], "trace": trace_strings(*text)})
    nodes = pl.from_arrow(prof.table("nodes").select(["node_id", "name"])).select(
        pl.col("node_id").alias("id"), pl.col("name").cast(pl.String))
    sql = Sql()
    if case == "round trip":  # each code SQL file taken DuckDB -> Spark -> DuckDB by sqlglot
        sqlglot = pytest.importorskip("sqlglot", reason="needs sqlglot: pip install -e '.[dev]'")
        trip = {n: sqlglot.transpile(sqlglot.transpile(sql_text(n), read="duckdb", write="spark")[0],
                                     read="spark", write="duckdb")[0] for n in ("code_members", "code_paths", "code_level")}
        sql = Sql(text=lambda n: trip.get(n) or sql_text(n))
    trie, leaves, lost = _sql_trie(sql, nodes, frames)
    labels = pl.from_arrow(want["labels"]["trace"]).gather(pl.from_arrow(want["trie"]["label"]))
    assert trie["parent"].to_list() == want["trie"]["parent"].to_pylist() and trie.height > 40
    assert trie["label"].to_list() == labels.to_list()
    assert leaves.equals(pl.from_arrow(want["leaves"]).sort("member").cast(leaves.schema))
    assert lost == want["unmatched"]["gradient_groups"][0].as_py()
    assert lost >= 4 if case == "renamed" else lost == 0  # three renamed away, and the rest of the odd name

"""The SQL statement of runs aggregated per node (``step_means.sql``, ``aggregate_nodes.sql``),
which ``--engine spark`` runs over a catalog's partitions (tfprof.catalog.spark_members), run
here on DuckDB over the profiles' own tables: each member's numbers equal ``step_numbers`` (the
numpy statement every view reads) on every fixture, tfprof's own and foreign (ns, steps of a
capture, float ops per execution); the aggregate equals ``aggregate_profile``'s (polars) for
sum, mean and max, across formats of different time resolution; and both files mean the same
taken to Spark SQL and back by sqlglot."""

from __future__ import annotations

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

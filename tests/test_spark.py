"""--engine spark (tfprof.catalog.spark): the golden cases run through a catalog with the reference
backend's SQL on Spark print byte for byte what the local engine prints, and SQL over a catalog
gives the same rows on Spark as on DuckDB. Marked `spark`: CI runs them in a venv with pyspark
(`.ci/run`, `pytest -m spark`), and Java from Debian's default-jre-headless."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfprof.api import run_view
from tfprof.catalog import add_run, run_profile, sql

pyspark = pytest.importorskip("pyspark", reason="needs pyspark: pip install 'tfprof[spark]'")
pytestmark = pytest.mark.spark

from tfprof.catalog.spark import SparkSql, on_spark, spark_sql  # noqa: E402

GOLDEN = Path(__file__).parent / "golden"
FIXTURES = Path(__file__).parent / "fixtures"
GOLDEN_FIXTURES = sorted(p.parent.name for p in GOLDEN.glob("*/cases.json"))
# every fifth scope and graph case, every eighth op and code case of each fixture: the tier near seven minutes
STRIDE = {"scope": 5, "graph": 5, "op": 8, "code": 8}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("spark") / "cat"
    for name in GOLDEN_FIXTURES:
        tags = ["host=h1", "worker=3"] if name == "cnn" else []  # partition levels: values and NULLs
        add_run(root, name, tags=tags, profile_path=FIXTURES / name / "profile.pb")
    return root


def _cases():
    for name in GOLDEN_FIXTURES:
        for cmd, stride in STRIDE.items():
            cases = [c for c in json.loads((GOLDEN / name / "cases.json").read_text())
                     if c["cmd"] == cmd and (GOLDEN / name / f"{c['id']}.txt").read_text()]
            for case in cases[::stride]:
                yield pytest.param(name, case, id=f"{name}-{case['id']}")


@pytest.mark.parametrize("fixture,case", list(_cases()))
def test_golden_case_on_spark_is_the_local_report(catalog, fixture, case):
    options = {k: v for k, v in case["options"].items() if k != "output"}
    prof = run_profile(catalog, fixture)
    local = run_view(prof, case["cmd"], options).text
    before = SparkSql._count
    with on_spark():
        on = run_view(run_profile(catalog, fixture), case["cmd"], options).text
    assert SparkSql._count > before  # the SQL did run on Spark
    assert on == local


@pytest.mark.parametrize("query", [
    "select run, count(*) as n, sum(duration_micros) as us from execs group by run order by run",
    "select n.run, n.name, e.duration_micros from execs e join nodes n on n.run = e.run and n.node_id = e.node_id "
    "order by e.duration_micros desc, n.run, n.name limit 7",
    "select run, format, nodes from runs order by run",
    "select run, host, worker, count(*) as n from execs group by run, host, worker order by run",
    "select * from nodes where host = 'h1' order by node_id limit 5",
])
def test_sql_over_the_catalog_on_spark_equals_duckdb(catalog, query):
    assert spark_sql(catalog, query).to_pylist() == sql(catalog, query).to_pylist()

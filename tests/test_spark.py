"""--engine spark (tfprof.catalog.spark): the golden cases run through a catalog with the reference
backend's SQL on Spark print byte for byte what the local engine prints, and SQL over a catalog
gives the same rows on Spark as on DuckDB. Marked `spark`: CI runs them in a venv with pyspark
(`.ci/run`, `pytest -m spark`), and Java from Debian's default-jre-headless."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tfprof.api import run_view
from tfprof.catalog import add_run, run_profile, sql
from tfprof.errors import OptionError

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


# ---------------------------------------------------------------- runs aggregated on Spark

@pytest.fixture(scope="module")
def members(tmp_path_factory) -> Path:
    from conftest import member_catalog

    return member_catalog(tmp_path_factory.mktemp("members") / "cat")


def _member_cases():
    """Golden options of each view (every sixth to twelfth), beside options that reach every
    step: account regexes, thresholds, start/trim/show/hide, displayed-only, the printed sets."""
    for cmd, stride in (("scope", 6), ("op", 6), ("graph", 12), ("code", 8)):
        cases = [c for c in json.loads((GOLDEN / "cnn" / "cases.json").read_text()) if c["cmd"] == cmd]
        for case in cases[::stride]:
            yield pytest.param(cmd, {k: v for k, v in case["options"].items() if k != "output"}, id=f"{cmd}-{case['id']}")
    yield pytest.param("scope", {"max_depth": 5, "account_type_regexes": ["Conv.*", "MatMul"], "min_micros": 2,
                                 "select": ["micros", "params", "op_types", "device", "input_shapes"]}, id="scope-account")
    yield pytest.param("scope", {"max_depth": 6, "start_name_regexes": [".*conv.*"], "trim_name_regexes": [".*grad.*"],
                                 "hide_name_regexes": [".*Relu.*"], "account_displayed_op_only": True,
                                 "order_by": "micros"}, id="scope-walk")
    yield pytest.param("graph", {"max_depth": 6, "account_type_regexes": ["Conv.*", "MatMul", "Add.*"],
                                 "select": ["micros", "input_shapes"], "order_by": "micros"}, id="graph-account")
    yield pytest.param("op", {"max_depth": 12, "select": ["micros", "device", "op_types", "input_shapes", "occurrence"],
                              "order_by": "occurrence"}, id="op-sets")
    yield pytest.param("code", {"max_depth": 8, "account_type_regexes": ["Conv.*", "MatMul", "Add.*"], "min_micros": 1,
                                "select": ["micros", "device", "op_types", "input_shapes", "occurrence"],
                                "order_by": "micros", "trim_name_regexes": [".*gradient.*"]}, id="code-account-sets")


@pytest.mark.parametrize("names,how", [(["n-1", "n-2", "n-3"], "sum"), (["n-1", "k-1"], "mean"), (["job"], "max")],
                         ids=["own-sum", "mixed-mean", "ranks-max"])
@pytest.mark.parametrize("cmd,options", list(_member_cases()))
def test_runs_aggregated_on_spark_are_the_local_aggregate(members, names, how, cmd, options):
    """A view over runs (or ranks) aggregated on Spark prints what the local aggregate prints."""
    from tfprof.catalog import aggregate_profile

    prof = _aggregated(members, tuple(names), how)
    assert prof.row_counts()["nodes"] == 0  # nothing per node on the driver: the view runs on Spark
    before = SparkSql._count
    try:
        want = run_view(aggregate_profile(members, names, how), cmd, options)
    except OptionError as error:  # the job's ranks have no code traces: the same error on Spark
        with pytest.raises(OptionError, match=re.escape(str(error))):
            run_view(prof, cmd, options)
        assert cmd == "code" and names == ["job"]
        return
    got = run_view(prof, cmd, options)
    assert got.text == want.text
    assert SparkSql._count > before
    if cmd in ("op", "code") and "input_shapes" in options.get("select", ()):  # the members, as the proto holds them
        assert got.proto.SerializeToString(deterministic=True) == want.proto.SerializeToString(deterministic=True)


_AGGREGATED: dict = {}


def _aggregated(root: Path, names: tuple, how: str):
    from tfprof.catalog.spark_members import spark_aggregate

    if (names, how) not in _AGGREGATED:
        _AGGREGATED[names, how] = spark_aggregate(root, list(names), how)
    return _AGGREGATED[names, how]


def test_runs_aggregated_on_spark_from_the_command_line(members, capsys):
    """`tfprof scope|graph|op|code --catalog DIR --runs P --aggregate H --engine spark` prints the local
    bytes, and so does the proto of a code view; a bad regex is one line, exit 2."""
    from tfprof.cli.main import main

    for cmd in ("scope", "op", "graph", "code"):
        args = [cmd, "--catalog", str(members), "--runs", "n-*", "--aggregate", "sum", "--max_depth", "4"]
        assert main(args) == 0
        local = capsys.readouterr().out
        assert main([*args, "--engine", "spark"]) == 0
        assert capsys.readouterr().out == local
    assert main(["scope", "--catalog", str(members), "--run", "job", "--aggregate", "mean", "--engine", "spark",
                 "--show_name_regexes", "(unclosed"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "show_name_regexes" in err


def test_an_entry_script_run_without_its_venv_on_path_works(members, tmp_path):
    """A venv's `tfprof` run by its path, the venv not activated: Spark's Python workers must run
    that interpreter, not the first `python3` on PATH (here one that has nothing installed)."""
    import os
    import subprocess
    import sys

    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("python3", "python"):
        (fake / name).write_text("#!/bin/sh\necho 'not the venv' >&2; exit 1\n")
        (fake / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env.update(PATH=f"{fake}:/usr/bin:/bin", TFPROF_SERVER="0")
    args = ["scope", "--catalog", str(members), "--runs", "n-*", "--aggregate", "sum", "--max_depth", "3",
            "--show_name_regexes", ".*", "--engine"]
    local = subprocess.run([sys.executable, "-m", "tfprof", *args, "local"], capture_output=True, text=True, env=env,
                           timeout=600)
    remote = subprocess.run([sys.executable, "-m", "tfprof", *args, "spark"], capture_output=True, text=True, env=env,
                            timeout=600)
    assert remote.returncode == 0, remote.stderr[-2000:]
    assert remote.stdout == local.stdout and local.returncode == 0

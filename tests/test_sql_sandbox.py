"""The SQL sandbox (tfprof.sqlbox): SQL a user gives is one read-only query over the profile's
tables. Hostile SQL is refused with one line (exit code 2 in the CLI, ``QueryError`` in Python)
and leaves the store and the working directory byte-for-byte as they were; every setting the
sandbox relies on is shown to take effect; ordinary queries give what plain DuckDB gives."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from conftest import FIXTURES

import tfprof
from tfprof import Profile, QueryError, sqlbox
from tfprof.api import advise
from tfprof.cli.main import main
from tfprof.errors import OptionError, ProfileFormatError
from tfprof.schema import TABLES

PB = FIXTURES / "multistep" / "profile.pb"

# {dir} is the working directory of the test (checksummed before and after), {store} the store.
HOSTILE = {
    # statements that are not queries
    "copy_to": "COPY (SELECT 1) TO '{dir}/x.csv'",
    "copy_over_store": "COPY (SELECT 1 AS a) TO '{store}/nodes.parquet' (FORMAT parquet, USE_TMP_FILE false)",
    "copy_from": "COPY nodes FROM '{store}/nodes.parquet'",
    "attach": "ATTACH '{dir}/x.db'",
    "attach_store_file": "ATTACH '{store}/nodes.parquet' AS s",
    "detach": "DETACH memory",
    "install": "INSTALL httpfs",
    "force_install": "FORCE INSTALL httpfs",
    "load": "LOAD httpfs",
    "load_path": "LOAD '{dir}/x.duckdb_extension'",
    "set_external_access": "SET enable_external_access = true",
    "set_memory_limit": "SET memory_limit = '1GB'",
    "unlock": "SET lock_configuration = false",
    "reset": "RESET threads",
    "set_variable": "SET VARIABLE x = 1",
    "pragma": "PRAGMA version",
    "pragma_setting": "PRAGMA enable_profiling",
    "create_table": "CREATE TABLE t AS SELECT 1 AS a",
    "replace_view": "CREATE OR REPLACE VIEW nodes AS SELECT 1 AS node_id",
    "create_macro": "CREATE MACRO m(x) AS x",
    "create_secret": "CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's')",
    "drop_view": "DROP VIEW nodes",
    "alter": "ALTER VIEW nodes RENAME TO n",
    "insert": "INSERT INTO nodes SELECT * FROM nodes",
    "update": "UPDATE nodes SET op = 'x'",
    "delete": "DELETE FROM nodes",
    "export": "EXPORT DATABASE '{dir}/x'",
    "import": "IMPORT DATABASE '{dir}'",
    "call": "CALL pragma_version()",
    "checkpoint": "CHECKPOINT",
    "vacuum": "VACUUM",
    "use": "USE memory",
    "begin": "BEGIN TRANSACTION",
    "prepare": "PREPARE p AS SELECT 1",
    "comment_on": "COMMENT ON VIEW nodes IS 'x'",
    "update_extensions": "UPDATE EXTENSIONS",
    "pivot_creating_a_type": "PIVOT nodes ON op",
    # statements hidden behind a query, in comments, in case tricks, inside a query
    "query_then_drop": "select 1; drop view nodes",
    "query_then_copy": "select 1 AS a; COPY (select 1) TO '{dir}/x.csv'",
    "two_queries": "select 1; select 2",
    "block_comment_first": "/* select 1; */ DROP VIEW nodes",
    "line_comment_first": "\n-- select 1\nDROP VIEW nodes",
    "mixed_case": "dRoP vIeW nodes",
    "cte_delete": "WITH d AS (DELETE FROM nodes RETURNING *) SELECT * FROM d",
    "cte_insert": "WITH d AS (INSERT INTO nodes SELECT * FROM nodes RETURNING *) SELECT count(*) FROM d",
    "nested_cte_update": "SELECT * FROM (WITH u AS (UPDATE nodes SET op = 'x' RETURNING *) SELECT * FROM u)",
    "explain_copy": "EXPLAIN COPY (SELECT 1) TO '{dir}/x.csv'",
    "explain_analyze_delete": "EXPLAIN ANALYZE DELETE FROM nodes",
    "explain_options_drop": "EXPLAIN (FORMAT json) DROP VIEW nodes",
    # table functions that read files, the network, or run SQL from a string
    "read_csv": "select * from read_csv('/etc/passwd')",
    "read_csv_mixed_case": "SELECT * FROM ReAd_CsV('/etc/passwd')",
    "read_csv_quoted": "select * from \"read_csv\"('/etc/passwd')",
    "read_csv_qualified": "select * from system.main.read_csv('/etc/passwd')",
    "read_csv_in_subquery": "select * from (select * from read_csv('/etc/passwd'))",
    "read_csv_in_cte": "with p as (select * from read_csv_auto('/etc/passwd')) select * from p",
    "read_csv_scalar_subquery": "select (select count(*) from read_csv('/etc/passwd'))",
    "read_csv_joined": "select * from nodes, read_csv('/etc/passwd') limit 1",
    "read_csv_in_describe": "DESCRIBE SELECT * FROM read_csv('/etc/passwd')",
    "glob_in_summarize": "SUMMARIZE SELECT * FROM glob('*')",
    "read_parquet_of_store": "select * from read_parquet('{store}/nodes.parquet')",
    "parquet_scan": "select * from parquet_scan('{store}/*.parquet')",
    "parquet_metadata": "select * from parquet_metadata('{store}/nodes.parquet')",
    "glob": "select * from glob('{store}/*')",
    "read_text": "select * from read_text('/etc/hostname')",
    "read_blob": "select * from read_blob('/etc/hostname')",
    "read_json": "select * from read_json_auto('/etc/hostname')",
    "sniff_csv": "select * from sniff_csv('/etc/passwd')",
    "file_as_table": "select * from '/etc/passwd'",
    "cwd_file_as_table": "select * from '{dir}/keep.csv'",
    "store_index_as_table": "select * from '{store}/tfprof_store.json'",
    "http_reader": "select * from read_parquet('https://example.com/x.parquet')",
    "http_as_table": "select * from 'https://example.com/x.csv'",
    "s3_as_table": "select * from 's3://bucket/x.parquet'",
    "sqlite_scan": "select * from sqlite_scan('{dir}/x.db', 't')",
    "excel": "select * from read_xlsx('{dir}/x.xlsx')",
    "query_from_string": "select * from query('select 1')",
    "query_table": "select * from query_table('nodes')",
    "json_execute": "select * from json_execute_serialized_sql('{{}}')",
    # settings, secrets, extensions, the environment
    "duckdb_settings": "select * from duckdb_settings()",
    "duckdb_extensions": "select * from duckdb_extensions()",
    "duckdb_secrets": "select * from duckdb_secrets()",
    "enable_profiling_fn": "select * from enable_profiling()",
    "getenv": "select getenv('HOME')",
    # nothing to run
    "blank": "   \n\t ",
}


def _digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (by relative path) and its SHA-256."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sandbox") / "run.tfprof"
    tfprof.save(tfprof.load(profile_path=str(PB)), path)
    return path


@pytest.fixture(scope="module")
def memory() -> Profile:
    return tfprof.load(profile_path=str(PB))


@pytest.fixture
def cwd(tmp_path, monkeypatch) -> Path:
    """A working directory holding a file, checked to be unchanged afterwards."""
    here = tmp_path / "cwd"
    here.mkdir()
    (here / "keep.csv").write_text("a,b\n1,2\n")
    monkeypatch.chdir(here)
    return here


def _hostile(key: str, cwd: Path, store: Path) -> str:
    return HOSTILE[key].format(dir=cwd, store=store)


def test_enough_hostile_cases():
    assert len(HOSTILE) >= 40


@pytest.mark.parametrize("key", HOSTILE)
def test_hostile_sql_in_the_cli_is_one_error_line_and_changes_nothing(key, store, cwd, capsys):
    sql = _hostile(key, cwd, store)
    before = (_digest(store), _digest(cwd))
    code = main(["sql", sql, str(store)])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "Traceback" not in err and out == ""
    assert (_digest(store), _digest(cwd)) == before


@pytest.mark.parametrize("key", HOSTILE)
def test_hostile_sql_in_python_raises_query_error_and_changes_nothing(key, store, memory, cwd):
    sql = _hostile(key, cwd, store)
    before = (_digest(store), _digest(cwd))
    on_store = Profile.open(store)
    for prof in (on_store, memory):
        with pytest.raises(QueryError) as caught:
            prof.sql(sql)
        assert "\n" not in str(caught.value)
        # the views are all still there, answering as before
        assert prof.sql("select count(*) as n from nodes")["n"][0] == prof.table("nodes").num_rows
    assert (_digest(store), _digest(cwd)) == before


@pytest.mark.parametrize("key", HOSTILE)
def test_hostile_sql_checker_is_refused(key, store, cwd, tmp_path):
    checks = tmp_path / "checks"
    checks.mkdir()
    checker = checks / "evil.sql"
    checker.write_text(_hostile(key, cwd, store))
    before = (_digest(store), _digest(cwd))
    with pytest.raises(OptionError, match="checker `evil`"):
        advise(Profile.open(store), {checker: {}})
    assert (_digest(store), _digest(cwd)) == before


def test_hostile_checker_through_a_parameter(store, cwd, tmp_path):
    checker = tmp_path / "sneaky.sql"
    checker.write_text("-- option path = /etc/passwd\nselect column0 as report from read_csv($path)")
    with pytest.raises(QueryError, match="Table function `read_csv`"):
        advise(Profile.open(store), {checker: {"path": str(cwd / "keep.csv")}})


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        ("", "Empty query"),
        ("  \n ", "Empty query"),
        ("-- nothing but a comment", "Empty query"),
        ("DROP VIEW nodes", "`DROP` statements cannot run here"),
        ("select 1; select 2", "2 statements given"),
        ("with d as (delete from nodes returning *) select * from d", "`DELETE` inside a query"),
        ("select * from read_csv('/etc/passwd')", "Table function `read_csv`"),
        ("selec 1", "Parser Error"),
    ],
)
def test_refusals_say_what_and_why(memory, sql, match):
    with pytest.raises(QueryError, match=match):
        memory.sql(sql)


def test_a_statement_inside_a_comment_is_only_a_comment(store):
    prof = Profile.open(store)
    assert prof.sql("select 1 as a /* ; drop view nodes */")["a"].to_list() == [1]
    assert prof.sql("select count(*) as n from nodes")["n"][0] == prof.table("nodes").num_rows


# ------------------------------------------------------------------------------ the connection's settings


def _settings(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(con.sql("select name, value from duckdb_settings()").fetchall())


@pytest.fixture(params=["store", "memory"])
def prof(request, store, memory) -> Profile:
    return Profile.open(store) if request.param == "store" else memory


def test_settings_are_those_the_sandbox_promises(prof):
    got = _settings(prof.connection())
    assert got["enable_external_access"] == "false"
    assert got["lock_configuration"] == "true"
    assert got["autoinstall_known_extensions"] == "false"
    assert got["autoload_known_extensions"] == "false"
    assert got["temp_directory"] == ""
    assert got["allowed_directories"] == "[]"


def test_external_access_is_off_even_on_the_bare_connection(prof, cwd):
    con = prof.connection()  # statements here skip sqlbox's checks: the engine still refuses
    for sql in (
        "select * from read_csv('/etc/passwd')",
        f"select * from '{cwd}/keep.csv'",
        f"COPY (select 1) TO '{cwd}/x.csv'",
        f"ATTACH '{cwd}/x.db'",
        "INSTALL httpfs",
        "LOAD httpfs",
    ):
        with pytest.raises(duckdb.PermissionException, match="disabled (by|through) configuration"):
            con.sql(sql)
    assert sorted(os.listdir(cwd)) == ["keep.csv"]


def test_only_the_store_table_files_are_readable(store):
    con = Profile.open(store).connection()
    allowed = _settings(con)["allowed_paths"]
    assert str(store.absolute() / "nodes.parquet") in allowed
    con.sql(f"select count(*) from read_parquet('{store.absolute()}/nodes.parquet')").fetchall()
    for other in ("tfprof_store.json", "indexes"):
        with pytest.raises(duckdb.Error, match="disabled by configuration"):
            con.sql(f"select * from read_text('{store.absolute()}/{other}')").fetchall()


def test_configuration_is_locked(prof):
    con = prof.connection()
    for sql in (
        "SET memory_limit = '1GB'",
        "SET enable_external_access = true",
        "SET allowed_directories = ['/']",
        "SET autoload_known_extensions = true",
        "SET lock_configuration = false",
    ):
        with pytest.raises(duckdb.Error, match="locked|disabled|Cannot change"):
            con.execute(sql)
    with pytest.raises(duckdb.Error, match="locked"):
        con.sql("select * from enable_profiling()").fetchall()
    assert _settings(con)["enable_external_access"] == "false"


def test_known_extensions_are_not_installed_or_loaded(prof):
    # read_xlsx and sqlite_scan live in extensions DuckDB knows: with autoinstall/autoload on,
    # it would try to install them ("An error occurred while trying to automatically install")
    for sql in ("select * from read_xlsx('x.xlsx')", "select * from sqlite_scan('x.db', 't')"):
        with pytest.raises(duckdb.CatalogException, match="is not in the catalog, but it exists") as caught:
            prof.connection().sql(sql)
        assert "automatically" not in str(caught.value)


def test_no_python_variable_is_read_by_name(prof):
    secret_rows = pa.table({"s": ["do not read me"]})  # noqa: F841  (what a replacement scan would find)
    with pytest.raises(QueryError, match="secret_rows"):
        prof.sql("select * from secret_rows")
    with pytest.raises(duckdb.CatalogException):
        prof.connection().sql("select * from secret_rows")


def test_no_setting_tells_the_home_directory(prof):
    home = os.path.expanduser("~")
    values = prof.sql("select name, setting from pg_settings", output="arrow").to_pylist()
    assert values and not [v for v in values if home in str(v["setting"])]
    assert prof.sql("select current_setting('secret_directory') as s")["s"][0] == ""


def test_nothing_spills_to_disk(cwd, monkeypatch):
    """temp_directory is '': an operator past the memory limit fails instead of writing .tmp/ here."""
    monkeypatch.setitem(sqlbox.SETTINGS, "memory_limit", "30MB")
    con = sqlbox.connect({})
    with pytest.raises(QueryError, match="Out of Memory"):
        sqlbox.query(con, "select i, random() as r from range(3000000) t(i) order by r")
    assert sorted(os.listdir(cwd)) == ["keep.csv"]


LONG_QUERY = "select count(*) as n from range(100000000000) t(i) where i % 7 = 3"


def test_an_interrupted_query_is_a_keyboard_interrupt(memory):
    con = memory.connection()
    timer = threading.Timer(0.5, con.interrupt)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        memory.sql(LONG_QUERY)
    timer.join()
    assert memory.sql("select 42 as a")["a"].to_list() == [42]  # the connection still works


def _signal_when_running(argv: list[str], signum: int) -> tuple[int, str, str]:
    """Run ``argv``, send ``signum`` once it is inside the query (it has used more CPU than
    starting up takes), and return its exit code and output; fail if it runs on."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stat = Path(f"/proc/{proc.pid}/stat")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        ticks = sum(int(x) for x in stat.read_text().rsplit(")", 1)[1].split()[11:13])  # utime, stime
        if ticks / os.sysconf("SC_CLK_TCK") > 3.0:
            break
        time.sleep(0.1)
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the query ran on for 20 s after signal {signum}")
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.parametrize(("signum", "said"), [(signal.SIGINT, "Interrupted."), (signal.SIGTERM, "Terminated.")])
def test_a_signal_stops_a_long_query_in_the_cli(store, signum, said):
    code, out, err = _signal_when_running([sys.executable, "-m", "tfprof", "sql", LONG_QUERY, str(store)], signum)
    assert code == 128 + signum, err
    assert out == "" and err.strip().splitlines() == [said]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_long_query_in_python(store, signum):
    """The signal's Python handler runs as soon as the query stops, and what it raises is
    what ``Profile.sql`` raises: KeyboardInterrupt for Ctrl-C, the handler's own for SIGTERM."""
    script = (
        "import signal, sys\n"
        "from tfprof import Profile\n"
        "class Stop(BaseException): pass\n"
        "def stop(*_): raise Stop\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "try:\n"
        f"    Profile.open(sys.argv[1]).sql({LONG_QUERY!r})\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n"
        "except Stop:\n"
        "    sys.exit(143)\n"
    )
    code, out, err = _signal_when_running([sys.executable, "-c", script, str(store)], signum)
    assert code == 128 + signum, err


def test_a_damaged_table_file_is_named(tmp_path):
    path = tmp_path / "s"
    tfprof.save(tfprof.load(profile_path=str(PB)), path)
    (path / "steps.parquet").write_bytes(b"not parquet")
    with pytest.raises(ProfileFormatError, match="steps.parquet"):
        Profile.open(path).sql("select 1")


# ------------------------------------------------------------------------------ ordinary queries


POSITIVE = [
    "select op, count(*) as n from nodes group by op order by n desc, op",
    "select n.op, sum(e.duration_micros) as us from execs e join nodes n using (node_id) group by n.op order by us desc, n.op",
    "with per_step as (select step, sum(duration_micros) as us from execs group by step) select * from per_step order by step",
    "select node_id, step, row_number() over (partition by step order by duration_micros desc, node_id) as r "
    "from execs qualify r <= 3 order by step, r",
    "from steps order by step",
    "values (1, 'a'), (2, 'b')",
    "select * from range(3) t(i)",
    "select unnest([3, 1, 2]) as x order by x",
    "select count(*) as n from nodes where op in (select distinct op from nodes where params > 0)",
    "describe nodes",
    "show tables",
    "summarize steps",
]


def _plain(prof: Profile, store: Path | None) -> duckdb.DuckDBPyConnection:
    """An unrestricted DuckDB connection over the same tables, as tfprof had before the sandbox."""
    con = duckdb.connect()
    for name in TABLES:
        if store is not None:
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{store}/{name}.parquet')")
        else:
            con.register(name, prof.table(name))
    return con


@pytest.mark.parametrize("sql", POSITIVE)
def test_queries_give_what_plain_duckdb_gives(sql, store, memory):
    for prof, source in ((Profile.open(store), store), (memory, None)):
        want = _plain(prof, source).sql(sql).to_arrow_table()
        got = prof.sql(sql, output="arrow")
        assert got.num_rows > 0
        assert got.equals(want), sql


@pytest.mark.parametrize("sql", POSITIVE[:9])
def test_cli_gives_what_the_api_gives(sql, store, capsys):
    code = main(["sql", sql, str(store), "--format", "csv"])
    out, err = capsys.readouterr()
    assert code in (0, None) and err == ""
    assert pl.read_csv(io.BytesIO(out.encode())).equals(pl.read_csv(io.BytesIO(_csv(Profile.open(store).sql(sql)))))


def _csv(frame: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.write_csv(buf)
    return buf.getvalue()


def test_results_are_right(store, memory):
    """Checked against polars, not DuckDB: the op counts and the per-op time of the join."""
    for prof in (Profile.open(store), memory):
        counts = prof.sql("select op, count(*) as n from nodes group by op")
        want = prof.frame("nodes").group_by("op").agg(pl.len().cast(pl.Int64).alias("n"))
        assert counts.sort("op").equals(want.sort("op"))
        joined = prof.sql("select n.op, sum(e.duration_micros) as us from execs e join nodes n using (node_id) group by n.op")
        per_op = (
            prof.frame("execs").join(prof.frame("nodes"), on="node_id").group_by("op").agg(pl.col("duration_micros").sum().alias("us"))
        )
        assert dict(joined.iter_rows()) == dict(per_op.iter_rows())


def test_explain_and_parameters(prof):
    plan = prof.sql("explain select count(*) from nodes", output="arrow")
    assert plan.num_rows >= 1 and "explain_value" in plan.column_names
    assert prof.sql("EXPLAIN (FORMAT json) select 1", output="arrow").num_rows == 1
    con = prof.connection()
    got = sqlbox.query(con, "select count(*) as n from nodes where params >= $p", params={"p": 1})
    assert got["n"][0].as_py() == pl.from_arrow(prof.table("nodes")).filter(pl.col("params") >= 1).height


def test_some_tables_read_already_and_an_awkward_store_path(tmp_path, monkeypatch):
    odd = tmp_path / "it's a store"
    tfprof.save(tfprof.load(profile_path=str(PB)), odd)
    monkeypatch.chdir(tmp_path)
    prof = Profile.open("it's a store")  # relative, with a quote and spaces
    prof.table("steps")  # read into memory before the connection exists
    n = prof.sql("select count(*) as n from steps join execs using (step)")["n"][0]
    assert n == prof.table("execs").num_rows


def test_sql_checkers_still_run_with_parameters(store, tmp_path):
    checker = tmp_path / "busy_ops.sql"
    checker.write_text(
        "-- option min_nodes = 2\n"
        "select op || ' has ' || count(*) || ' nodes' as report from nodes group by op "
        "having count(*) >= $min_nodes::integer order by op"
    )
    prof = Profile.open(store)
    rows = advise(prof, {checker: {"min_nodes": "3"}}).evidence["busy_ops"]
    counts = prof.frame("nodes").group_by("op").len().filter(pl.col("len") >= 3).sort("op")
    assert rows["report"].to_list() == [f"{op} has {n} nodes" for op, n in counts.iter_rows()]

"""Spark as an engine (``--engine spark``, ``pip install 'tfprof[spark]'``): the reference
backend's SQL files run on Spark, and SQL over a catalog's Parquet runs there too.

The SQL is not written twice: each file of ``tfprof/queries/sql/`` (and a user's query) is
DuckDB SQL, transpiled by sqlglot to Spark SQL (``$name`` parameters become Spark's ``:name``
markers, bound by ``spark.sql(text, args=...)``). Frames go to Spark as Arrow tables and come
back with ``DataFrame.toArrow()``; the views render them as they render the local results,
so the report is byte for byte the same (tests/test_spark.py, on every golden fixture).

What runs where: every view (scope, graph, op, code) executes the SQL steps of the reference
backend on Spark; the per-node numbers they start from, and the code view's call-stack trie,
are computed here, by polars, from the run's tables. Recursive CTEs (``scope_tree``,
``path_keys``) need Spark 4.1 or later.

The session is ``local[*]`` unless ``--master URL`` names a cluster, or ``SPARK_REMOTE`` a Spark
Connect server (then ``SparkSession.builder.remote``). It is made once per process. A local
session's Python workers run the interpreter running tfprof (``PYSPARK_PYTHON``, unless set).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import polars as pl
import pyarrow as pa

from tfprof.catalog.layout import locked, read_runs, require_catalog
from tfprof.catalog.read import partition_files, verify_tables
from tfprof.errors import MissingDependencyError, OptionError, QueryError
from tfprof.output import PathLike
from tfprof.queries.reference.sql import sql_text
from tfprof.schema import TABLES

_SESSIONS: dict[str, object] = {}
_LOCAL_ROWS = 20_000  # frames larger than this are checkpointed on Spark before a step reads them


def session(master: str | None = None):
    """The Spark session for ``master`` (default ``local[*]``; ``SPARK_REMOTE`` wins)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise MissingDependencyError("--engine spark needs pyspark: pip install 'tfprof[spark]'") from None
    remote = os.environ.get("SPARK_REMOTE")
    key = remote or master or "local[*]"
    if key not in _SESSIONS:
        if key.startswith("local") and not remote:
            # the Python workers of a local session run this interpreter, whose environment has
            # tfprof, not the first `python3` on PATH (an entry script run without activating its
            # venv found none there); a cluster's workers take the cluster's own setting
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.appName("tfprof")
        if remote:
            builder = builder.remote(remote)
        else:
            builder = (builder.master(key).config("spark.ui.enabled", "false")
                       .config("spark.ui.showConsoleProgress", "false")
                       .config("spark.driver.memory", driver_memory())
                       .config("spark.sql.shuffle.partitions", "4")
                       .config("spark.sql.session.timeZone", "UTC")
                       # the trees' recursive CTEs stop where the tree does; Spark's default stops at 1M rows
                       .config("spark.sql.cteRecursionRowLimit", "-1")
                       .config("spark.sql.cteRecursionLevelLimit", "-1")
                       # the graph view's rounds build plans Spark's constraint inference fails on
                       .config("spark.sql.constraintPropagation.enabled", "false")
                       .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false"))
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR") if not remote else None
        _SESSIONS[key] = spark
    return _SESSIONS[key]


def driver_memory() -> str:
    """The local driver's heap: ``TFPROF_SPARK_MEMORY`` (a JVM size such as ``16g``), 4g by default."""
    value = os.environ.get("TFPROF_SPARK_MEMORY", "4g").strip()
    if not re.fullmatch(r"[1-9][0-9]*[kmgtKMGT]?", value):
        raise OptionError(f"TFPROF_SPARK_MEMORY=`{value}` is not a memory size; give one such as 4g or 16g")
    return value


@cache
def to_spark(text: str) -> str:
    """DuckDB SQL ``text`` as Spark SQL (sqlglot; raises on what Spark cannot say)."""
    try:
        import sqlglot
        from sqlglot import ErrorLevel
    except ImportError:
        raise MissingDependencyError("--engine spark needs sqlglot: pip install 'tfprof[spark]'") from None
    try:
        [out] = sqlglot.transpile(text, read="duckdb", write="spark", unsupported_level=ErrorLevel.RAISE)
    except sqlglot.errors.SqlglotError as exc:
        raise QueryError(f"the query cannot be written as Spark SQL: {str(exc).splitlines()[0]}") from None
    return out


def _arrow(df) -> pa.Table:
    return df.toArrow()


class SparkSql:
    """The reference backend's ``Sql`` (``tfprof.queries.reference.sql``) on Spark: the same
    ``run(name, params, **frames)``, each file transpiled once; ``frame`` leaves the result on
    Spark (``tfprof.catalog.spark_views`` chains the steps of a view so)."""

    _count = 0

    def __init__(self, master: str | None = None) -> None:
        self.spark = session(master)

    def run(self, name: str, params: dict[str, object] | None = None, **frames: pl.DataFrame) -> pl.DataFrame:
        views: list[str] = []
        try:
            return pl.from_arrow(_arrow(self._query(name, params, frames, views)))
        finally:
            for view in views:
                self.spark.catalog.dropTempView(view)

    def frame(self, name: str, params: dict[str, object] | None = None, **frames):
        """File ``name`` over ``frames`` (polars frames or Spark DataFrames) as a Spark DataFrame,
        not computed yet. (Spark resolves the temporary views when it reads the SQL: they are
        dropped at once.)"""
        views: list[str] = []
        try:
            return self._query(name, params, frames, views)
        finally:
            for view in views:
                self.spark.catalog.dropTempView(view)

    def _query(self, name: str, params: dict[str, object] | None, frames: dict, views: list[str]):
        SparkSql._count += 1
        text = to_spark(sql_text(name))
        named = {}
        for table, frame in frames.items():
            # a private name per call: temp views are per session, and views of one step never clash
            named[table] = f"{table.lstrip('_')}_{SparkSql._count}"
            if isinstance(frame, pl.DataFrame):
                df = self.spark.createDataFrame(frame.to_arrow())
                # a large local relation is copied into every task that reads it: materialised once, it
                # is read as partitions (the display step on 266k closure rows: 24 s as a relation, 5 s so)
                df = df.localCheckpoint() if frame.height > _LOCAL_ROWS else df
            else:  # fresh attribute ids: one frame given under two names is no self-join Spark trips on
                from pyspark.sql import functions as F

                df = frame.select(*(F.col(c).alias(c) for c in frame.columns))
            df.createOrReplaceTempView(named[table])
            views.append(named[table])
        for table, view in named.items():
            text = re.sub(rf"(?<![\w`]){re.escape(table)}(?![\w`])", view, text)
        wanted = set(re.findall(r":(\w+)", text))
        bound = {k: v for k, v in (params or {}).items() if k in wanted}
        return self.spark.sql(text, args=bound)

    def close(self) -> None:
        pass


@contextlib.contextmanager
def on_spark(master: str | None = None) -> Iterator[None]:
    """Run the views meanwhile on the reference backend with its SQL on Spark (``SparkSql``)."""
    from tfprof import kernels
    from tfprof.queries.reference import sql_backend

    session(master)  # fails here, with the install hint, if pyspark is missing
    previous = os.environ.get("TFPROF_ENGINE")
    os.environ["TFPROF_ENGINE"] = "reference"  # the kernel-free paths, whose SQL runs on Spark
    try:
        with sql_backend(lambda: SparkSql(master)), kernels.using(False):
            yield
    finally:
        if previous is None:
            os.environ.pop("TFPROF_ENGINE", None)
        else:
            os.environ["TFPROF_ENGINE"] = previous


def spark_sql(catalog: PathLike, query: str, *, master: str | None = None) -> pa.Table:
    """Run ``query`` (DuckDB SQL, checked by the SQL sandbox's rules first) on Spark over every
    run of ``catalog``: each table a view over its partitions with ``run``, ``host`` and
    ``worker`` columns, and ``runs``. The rows come back as Arrow."""
    from tfprof import sqlbox
    from tfprof.catalog.storage import object_uri

    if uri := object_uri(catalog):
        return _staged_sql(uri, query, session(master))
    root = require_catalog(catalog)
    spark = session(master)
    with locked(root, shared=True):
        files, listed = partition_files(root)
        runs = read_runs(root)
        # the sandbox's checks (one read-only query, no file functions) on the local schema
        from tfprof.catalog.layout import with_run_column

        con = sqlbox.connect({**{n: with_run_column(n).empty_table() for n in TABLES}, "runs": runs.slice(0, 0)})
        try:
            sqlbox.check(con, query)
            verify_tables(root, listed, con, query)  # the CRC-32s of the partitions it reads
        finally:
            con.close()
        return _run_on(spark, Path(root), files, runs, query)


def _run_on(spark, root: Path, files: dict[str, list[Path]], runs: pa.Table, query: str,
            names: list[str] | None = None) -> pa.Table:
    """``query`` on Spark with each table (of ``names``, default all) a view over its
    partition ``files`` under ``root``."""
    from tfprof.catalog.layout import with_run_column

    for name in TABLES if names is None else names:
        if files[name]:
            frame = spark.read.option("basePath", str(root / name)).parquet(*map(str, files[name]))
        else:
            frame = spark.createDataFrame(with_run_column(name).empty_table())
        frame.createOrReplaceTempView(name)
    spark.createDataFrame(runs.drop(["files"])).createOrReplaceTempView("runs")
    with spark_errors():
        return _arrow(spark.sql(to_spark(query)))


@contextlib.contextmanager
def spark_errors() -> Iterator[None]:
    """Spark's AnalysisException, Py4JJavaError and friends as one line (``QueryError``)."""
    try:
        yield
    except Exception as exc:
        if type(exc).__module__.startswith(("pyspark", "py4j")):
            lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
            cause = next((line for line in lines if "[" in line and "]" in line and "Exception" not in line[:12]),
                         lines[0] if lines else type(exc).__name__)
            raise QueryError(f"Spark: {cause[:400]}") from None
        raise


def _staged_sql(uri: str, query: str, spark) -> pa.Table:
    """``spark_sql`` over a catalog in object storage. Spark reads ``s3a://`` only with the
    hadoop-aws jars, which pyspark does not ship: the partitions of the tables the query names
    are copied through pyarrow into a local temporary catalog (each checked, as
    ``tfprof.catalog.remote`` reads them), which Spark reads as it reads a local one."""
    import tempfile

    from tfprof import sqlbox
    from tfprof.catalog.layout import RUNS_SCHEMA, with_run_column
    from tfprof.catalog.remote import download
    from tfprof.profile import tables_read

    con = sqlbox.connect({**{n: with_run_column(n).empty_table() for n in TABLES}, "runs": RUNS_SCHEMA.empty_table()})
    try:
        sqlbox.check(con, query)
        wanted = tables_read(con, query)
    finally:
        con.close()
    with tempfile.TemporaryDirectory(prefix="tfprof-spark-") as tmp:
        files, runs = download(uri, wanted, Path(tmp))
        return _run_on(spark, Path(tmp), files, runs, query, wanted)  # (the other tables are not read)

"""Running the reference backend's SQL files (``tfprof/queries/sql/*.sql``) on DuckDB.

Each file is one step of a view, written against a few input relations named in its header
comment (``_tree``, ``_closure``, ...). ``Sql.run`` registers polars frames under those names on
a private in-memory DuckDB connection, binds the file's ``$parameters`` and returns the result
as a polars frame. Metrics travel between steps in long form (``id, metric, value``), so that
no file depends on which metrics a view counts.

The files are written to stay portable (a later backend runs them on Spark through sqlglot;
tests/test_sql_portable.py holds them to it): functions with a standard or Spark spelling
only, and recursive CTEs with ``UNION ALL``. Parameters are DuckDB's named parameters,
``$name``, bound by name from ``Sql.run``'s ``params``; sqlglot writes them as Spark's named
parameter markers, ``:name``, which ``spark.sql(text, args={...})`` binds the same way. A
comment may mention ``$name`` only for a parameter the file takes: the parameters a file needs
are all the ``$name`` in its text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

import duckdb
import polars as pl

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"


@cache
def sql_text(name: str) -> str:
    """The text of ``tfprof/queries/sql/<name>.sql``."""
    return (SQL_DIR / f"{name}.sql").read_text()


class Sql:
    """A private in-memory DuckDB connection that runs the SQL files over registered frames;
    ``text`` gives a file's SQL by name (the files themselves unless told otherwise)."""

    def __init__(self, text: Callable[[str], str] = sql_text) -> None:
        self.con = duckdb.connect()
        self.text = text

    def run(self, name: str, params: dict[str, object] | None = None, **frames: pl.DataFrame) -> pl.DataFrame:
        """Run file ``name`` with ``frames`` registered under their keyword names."""
        for table, frame in frames.items():
            self.con.register(table, frame.to_arrow())
        text = self.text(name)
        wanted = set(re.findall(r"\$(\w+)", text))
        bound = {k: v for k, v in (params or {}).items() if k in wanted}
        missing = wanted - bound.keys()
        if missing:
            raise ValueError(f"`{name}.sql` needs parameters {sorted(missing)}")
        try:
            return pl.from_arrow(self.con.sql(text, params=bound).to_arrow_table())
        finally:
            for table in frames:
                self.con.unregister(table)

    def close(self) -> None:
        self.con.close()


def long(frame: pl.DataFrame, columns: list[str], id_col: str = "id") -> pl.DataFrame:
    """``frame``'s ``columns`` in long form: one row per ``id`` and metric."""
    return frame.select(
        pl.col(id_col).alias("id"), *(pl.col(c).cast(pl.Int64) for c in columns)
    ).unpivot(index="id", on=columns, variable_name="metric", value_name="value")


def wide(frame: pl.DataFrame, columns: list[str], value: str, prefix: str = "", key: str = "id") -> pl.DataFrame:
    """Long rows (``key``, ``metric``, ``value``) back to one column per metric (missing: 0),
    named ``prefix + metric``, one row per ``key``."""
    out = frame.pivot(on="metric", index=key, values=value) if frame.height else pl.DataFrame(
        [pl.Series(key, [], frame.schema[key])]
    )
    return out.with_columns(
        *(
            (pl.col(c) if c in out.columns else pl.lit(None)).cast(pl.Int64).fill_null(0).alias(prefix + c)
            for c in columns
        )
    ).select(key, *(prefix + c for c in columns))


def width(*values: int) -> int:
    """Digits enough to write every one of ``values`` (non-negative integers) in a key."""
    return max(1, *(len(str(int(v))) for v in values))

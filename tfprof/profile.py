"""``Profile``: the tables of one profile, in memory or in a Parquet store, queryable by SQL and polars.

A store is a directory with one ``<table>.parquet`` file per table and a ``tfprof_store.json``
manifest. Opening a store reads only the manifest; a table is read (memory-mapped) the first
time it is used, and ``lazy(name)`` scans the file without reading columns the query does not use.
A table's file is compared with its checksum when it is first used (``tfprof.manifest``), and
SQL checks the files of the tables a query names.

A profile opened from a store reads only that store: its identity (``tfprof.manifest.identity``)
is taken when it is opened and compared before every read from it and every use of what was
read or derived (``table``, ``memo``, ``index``; and after a read that is done at once), so a
store replaced or deleted meanwhile (``ingest --force``, moved away and another put there,
copied over in place) is a ``ProfileChangedError``, never a table of another generation beside
those already read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from tfprof.errors import InputError, ProfileChangedError, ProfileFormatError, UnknownTableError
from tfprof.manifest import identity, recreate_hint
from tfprof.output import Inputs, PathLike, input_paths
from tfprof.schema import TABLES
from tfprof.store import (
    check_tails,
    read_index,
    read_manifest,
    stored_tables,
    table_file,
    undecodable,
    verify_store,
    verify_store_files,
)

if TYPE_CHECKING:  # DuckDB is imported on first SQL use: a view or an ingest never needs it
    import duckdb
    import polars as pl


def _check_table(name: str) -> None:
    if name not in TABLES:
        raise UnknownTableError(f"unknown table `{name}`; tables: {', '.join(TABLES)}")


class Profile:
    """One profile's tables.

    Build one with ``tfprof.load(...)`` (tfprof's input files, or a store) or
    ``Profile.open(dir)`` (a store written by ``tfprof ingest`` or ``tfprof.save``). A profile
    never changes: what is derived from its tables (``memo``, ``index``) is computed once.

    This module is a leaf of the package: it reads tables, and imports nothing that queries,
    renders or runs them (views are ``tfprof.api.run_view(prof, ...)``).
    """

    def __init__(
        self, tables: dict[str, pa.Table] | None = None, *, store: Path | None = None, source: str = "profile"
    ) -> None:
        self._tables: dict[str, pa.Table] = dict(tables or {})
        if store is None:  # in memory, a table the reader had nothing for is empty
            for name in TABLES:
                if name not in self._tables:
                    self._tables[name] = TABLES[name].schema.empty_table()
        self._store = store
        # the store's identity and manifest when it was opened (``open``): what every read checks
        self._identity: tuple | None = None
        self._manifest: dict | None = None
        # the tables a store was written without (tfprof.manifest.LATER_TABLES): empty, not measured
        self.predates: frozenset[str] = frozenset()
        # "run_metadata" when built from raw step stats, "profile" from a ProfileProto. tfprof
        # forgets miss_accelerator_stream when it loads a ProfileProto (docs/TFPROF_BEHAVIOUR.md, 'ProfileProto'), so
        # only
        # profiles built from RunMetadata print the missing-stream warning.
        self.source = source
        self._con: duckdb.DuckDBPyConnection | None = None
        self._memo: dict[object, object] = {}
        # the files (and store directory) the profile was read from: never written over
        self.inputs: Inputs = input_paths(profile_path=store) if store is not None else Inputs()
        # where its views run when its numbers are not here (a Spark aggregate of a catalog's runs:
        # tfprof.catalog.spark_views); ``executor(spec)`` returns what an engine returns for it
        self.executor: Callable | None = None

    # ----------------------------------------------------------------------- construction

    @classmethod
    def open(cls, path: PathLike) -> Profile:
        """Open a store directory without reading any table yet."""
        p = Path(path)
        before = identity(p)
        manifest = read_manifest(p)  # checks every file's size
        check_tails(p, manifest)  # and that each ends as a complete file
        if identity(p) != before:  # written meanwhile: what was read may be of two stores
            raise ProfileChangedError(f"the store `{p}` changed while it was being opened (written again or "
                                      "replaced); open it again once it is complete")
        kept = stored_tables(manifest)
        # a table the store predates (see tfprof.manifest.LATER_TABLES) is empty
        empty = {n: TABLES[n].schema.empty_table() for n in TABLES if n not in kept}
        prof = cls(empty, store=p, source=manifest.get("source", "profile"))
        prof.predates = frozenset(empty)
        prof._identity, prof._manifest = before, manifest
        return prof

    def check_unchanged(self) -> None:
        """Raise ``ProfileChangedError`` if the store this profile was opened from is no longer
        the one it opened (replaced, written again, deleted); a few ``stat`` calls. Every read
        from the store calls it first; a profile in memory never changed."""
        if self._identity is None:
            return
        now = identity(self._store)
        if now == self._identity:
            return
        deleted = now is None
        what = "deleted" if deleted else "replaced (written again, or another store put in its place)"
        raise ProfileChangedError(
            f"the store `{self._store}` was {what} after this profile was opened from it; nothing more is read "
            "from it into this profile: open it again (or run the command again)", deleted=deleted)

    # ----------------------------------------------------------------------- access

    @property
    def identity(self) -> tuple | None:
        """The store's identity when this profile opened it (``tfprof.manifest.identity``; None
        for a profile in memory): what ``check_unchanged`` compares with."""
        return self._identity

    @property
    def store(self) -> Path | None:
        """The store directory the tables are read from (None for a profile in memory)."""
        return self._store

    @property
    def table_names(self) -> list[str]:
        """Names of the tables, in schema order."""
        return list(TABLES)

    def table(self, name: str) -> pa.Table:
        """Table ``name`` as Arrow (read from the store on first use)."""
        _check_table(name)
        self.check_unchanged()  # read before or now, it is the opened store's only while that is there
        if name not in self._tables:
            assert self._store is not None
            self._tables[name] = self._read(name)
        return self._tables[name]

    def _read(self, name: str, columns: list[str] | None = None) -> pa.Table:
        """Table ``name`` (or some of its columns) from the store; a damaged file is named."""
        file = self._store_file(name)
        try:
            table = pq.read_table(file, columns=columns, memory_map=True)
        except (pa.ArrowException, OSError, ValueError) as exc:  # ValueError: e.g. a footer's text not UTF-8
            self.check_unchanged()  # a file gone with its store is the store gone, not damage
            raise undecodable(self._store, file, exc) from None
        self.check_unchanged()  # replaced while it was read: the bytes may be the other store's
        return table

    def _store_file(self, name: str) -> Path:
        """The store's Parquet file of table ``name``, its tail, checksum and schema checked once
        per profile (the checksum once per process, and again when the file changes), after
        ``check_unchanged``: the file is the opened store's."""
        self.check_unchanged()
        file, seen = self.memo(("table_file", name), lambda: self._checked_file(name))
        if _file_stat(file) != seen:  # written in place since it was checked: check it again
            file, seen = self._memo[("table_file", name)] = self._checked_file(name)
        return file

    def _checked_file(self, name: str) -> tuple[Path, tuple | None]:
        seen = _file_stat(self._store / f"{name}.parquet")
        file = table_file(self._store, name)
        verify_store_files(self._store, [file.name])
        try:
            schema = pq.read_schema(file, memory_map=True)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise undecodable(self._store, file, exc) from None
        if not schema.equals(TABLES[name].schema, check_metadata=False):  # e.g. another table's file
            raise ProfileFormatError(f"`{file}` does not hold the store's `{name}` table; {recreate_hint(self._store)}")
        return file, seen

    def damage(self) -> InputError | None:
        """For a store, the first damaged file a full check finds (checksums, then decoding every
        table and index: ``verify_store``), or None: called when a query fails in a way no
        check foresaw, to tell a damaged store from a bug. A store replaced or deleted since it
        was opened is that (``ProfileChangedError``), not the new store's damage."""
        if self._store is None:
            return None
        try:
            self.check_unchanged()
            verify_store(self._store, checksums=True)
        except (ProfileChangedError, ProfileFormatError) as exc:
            return exc
        return None

    def columns(self, name: str, columns: list[str]) -> pa.Table:
        """Columns ``columns`` of table ``name`` as Arrow, reading only those from a store
        (and caching nothing: an index built at ingest reads what it needs once)."""
        _check_table(name)
        if self._store is not None and name not in self._tables:
            return self._read(name, columns)
        return self.table(name).select(columns)

    def tables(self) -> dict[str, pa.Table]:
        """Every table as Arrow."""
        return {name: self.table(name) for name in TABLES}

    def lazy(self, name: str) -> pl.LazyFrame:
        """Table ``name`` as a polars LazyFrame; over a store, columns are read only when used."""
        import polars as pl

        _check_table(name)
        if self._store is not None and name not in self._tables:
            return pl.scan_parquet(self._store_file(name))
        return pl.from_arrow(self.table(name)).lazy()

    def frame(self, name: str) -> pl.DataFrame:
        """Table ``name`` as a polars DataFrame."""
        return self.lazy(name).collect()

    def row_counts(self) -> dict[str, int]:
        """Rows per table (from the manifest for a store: nothing is read)."""
        if self._store is not None:  # the manifest of the store as opened
            counts = (self._manifest or read_manifest(self._store))["tables"]
            return {name: (self._tables[name].num_rows if name in self._tables else counts[name]) for name in TABLES}
        return {name: t.num_rows for name, t in self._tables.items()}

    def memo(self, key: object, compute):
        """``compute()``, remembered under ``key``: a profile never changes, so frames derived
        from it (per-node metrics of a step, op-type lists, …) are computed once. Over a store,
        only while the store is the one opened (``check_unchanged``): an index part is a memory
        map of its file, which a store rewritten in place would change under it."""
        self.check_unchanged()
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def index(self, name: str, build) -> dict[str, pl.DataFrame]:
        """Frames derived from the tables that no option changes (an index, e.g. the code
        view's call-stack trie): read from the store when ingest saved them there, else
        ``build(self)``, once per profile."""

        def load() -> dict[str, pl.DataFrame]:
            parts = read_index(self._store, name) if self._store is not None else None
            self.check_unchanged()
            problem = build.check(parts, self) if parts is not None and hasattr(build, "check") else None
            if problem:  # values a kernel would index with out of range (queries.indexes.checks)
                folder = self._store / "indexes" / name
                raise ProfileFormatError(f"`{folder}` is damaged ({problem}); {recreate_hint(self._store)}")
            if parts is None:
                import polars as pl

                parts = {part: pl.from_arrow(table) for part, table in build(self).items()}
            return parts

        return self.memo(("index", name), load)

    # ----------------------------------------------------------------------- SQL

    def sql(self, query: str, *, output: Literal["arrow", "polars"] = "polars") -> pa.Table | pl.DataFrame:
        """Run one read-only DuckDB query over the tables (each table is a view of the same name).

        Returns a polars DataFrame (which Jupyter shows as an HTML table), or with
        ``output="arrow"`` a pyarrow Table. The query runs in the SQL sandbox (``tfprof.sqlbox``):
        anything but one query (``COPY``, ``ATTACH``, ``SET``, ``CREATE``, ``INSERT``, ...), a
        table function that reads files (``read_csv``, ``glob``, ...) and an empty query raise
        ``QueryError`` before anything runs, as does a query DuckDB rejects.
        """
        from tfprof import sqlbox

        con = self._connection()
        if self._store is not None:  # the checksums of the files the query reads, before it does
            for name in tables_read(con, query):
                if name not in self._tables:
                    self._store_file(name)
        try:
            rows = sqlbox.query(con, query)
        except Exception:
            self.check_unchanged()  # files gone with their store: say that, not DuckDB's words
            raise
        self.check_unchanged()  # the query read the files as it ran: they must be the opened store's
        if rows is None:  # a statement with no result
            rows = pa.table({})
        if output == "arrow":
            return rows
        import polars as pl

        return pl.from_arrow(rows)

    def connection(self) -> duckdb.DuckDBPyConnection:
        """The sandboxed DuckDB connection ``sql`` runs on, where each table is a view of its name
        (created on first use; a store's tables are read from its files as queries need them).

        Its settings are locked (``tfprof.sqlbox.connect``): it cannot reach a file other than
        the store's table files, the network or an extension, nor change a setting. Statements
        run on it directly are not checked as ``sql`` checks them, though: one could drop a view
        of this connection or, through ``COPY ... (use_tmp_file false)``, overwrite one of the
        store's table files. Give SQL you did not write to ``sql``, not to this connection.
        Every table file of a store is checked against its checksum first (``sql`` checks only
        those a query names).
        """
        if self._store is not None:
            self.check_unchanged()
            for name in TABLES:
                if name not in self._tables:
                    self._store_file(name)
        return self._connection()

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            from tfprof import sqlbox

            lazy = self._store is not None
            self._con = sqlbox.connect(
                {n: self._store / f"{n}.parquet" if lazy and n not in self._tables else self.table(n) for n in TABLES}
            )
        return self._con

    def __repr__(self) -> str:
        counts = self.row_counts()
        where = f"store={str(self._store)!r}" if self._store else "in memory"
        return f"Profile({where}, nodes={counts.get('nodes', 0)}, steps={counts.get('steps', 0)})"


def _file_stat(file: Path) -> tuple | None:
    """A file's identity: what changes when it is written, even in place."""
    try:
        st = file.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def named_tables(con: duckdb.DuckDBPyConnection, query: str) -> set[str] | None:
    """The names of the tables ``query`` reads (lower case, CTE names included), from DuckDB's
    parse tree (``json_serialize_sql`` on a cursor of ``con``, which binds nothing and reads no table); None
    when it cannot say (a statement other than a query, or a syntax error)."""
    import json

    import duckdb

    try:
        with con.cursor() as cur:  # its own result: a result pending on ``con`` stays as it is
            tree = json.loads(cur.execute("SELECT json_serialize_sql($q)", {"q": query}).fetchone()[0])
    except (duckdb.Error, ValueError, TypeError):
        return None
    if tree.get("error"):
        return None
    names: set[str] = set()
    stack: list = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE" and isinstance(node.get("table_name"), str):
                names.add(node["table_name"].lower())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return names


def tables_read(con: duckdb.DuckDBPyConnection, query: str) -> list[str]:
    """The profile's tables ``query`` names; every table when the parser cannot say, once the
    sandbox has found nothing to refuse in it."""
    named = named_tables(con, query)
    if named is None:
        from tfprof import sqlbox

        sqlbox.check(con, query)  # a syntax error or a refused statement is said before any file is read
        return list(TABLES)
    return [n for n in TABLES if n in named]

"""``Profile``: the tables of one profile, in memory or in a Parquet store, queryable by SQL and polars.

A store is a directory with one ``<table>.parquet`` file per table and a ``tfprof_store.json``
manifest. Opening a store reads only the manifest; a table is read (memory-mapped) the first
time it is used, and ``lazy(name)`` scans the file without reading columns the query does not use.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from tfprof.errors import ProfileFormatError
from tfprof.ingest import PathLike, Progress, add_checkpoint, iter_inputs, merge_batches
from tfprof.manifest import recreate_hint
from tfprof.schema import TABLES
from tfprof.output import Inputs, input_paths
from tfprof.store import (check_tails, read_index, read_manifest, stored_tables, table_file, undecodable,
                          verify_store, write_store)

if TYPE_CHECKING:  # DuckDB is imported on first SQL use: a view or an ingest never needs it
    import duckdb
    import polars as pl


def _check_table(name: str) -> None:
    if name not in TABLES:
        raise KeyError(f"unknown table `{name}`; tables: {', '.join(TABLES)}")


class Profile:
    """One profile's tables.

    Build one with ``Profile.from_inputs(...)`` (tfprof-style input paths) or ``Profile.open(dir)``
    (a store written by ``to_parquet``).
    """

    def __init__(
        self, tables: dict[str, pa.Table] | None = None, *, store: Path | None = None, source: str = "profile"
    ) -> None:
        self._tables: dict[str, pa.Table] = dict(tables or {})
        self._store = store
        # "run_metadata" when built from raw step stats, "profile" from a ProfileProto. tfprof
        # forgets miss_accelerator_stream when it loads a ProfileProto (spec 2.6), so only
        # profiles built from RunMetadata print the missing-stream warning.
        self.source = source
        self._con: duckdb.DuckDBPyConnection | None = None
        self._memo: dict[object, object] = {}
        # the files (and store directory) the profile was read from: never written over
        self.inputs: Inputs = input_paths(profile_path=store) if store is not None else Inputs()

    # ----------------------------------------------------------------------- construction

    @classmethod
    def from_inputs(
        cls,
        *,
        graph_path: PathLike | None = None,
        run_meta_path: PathLike | list[PathLike] | None = None,
        op_log_path: PathLike | None = None,
        checkpoint_path: PathLike | None = None,
        profile_path: PathLike | None = None,
        progress: Progress | None = None,
    ) -> Profile:
        """Ingest tfprof inputs; ``profile_path`` may also be a store directory."""
        given = input_paths(graph_path=graph_path, run_meta_path=run_meta_path, op_log_path=op_log_path,
                            checkpoint_path=checkpoint_path, profile_path=profile_path)
        if isinstance(profile_path, (str, os.PathLike)) and profile_path and Path(profile_path).is_dir():
            prof = cls.open(profile_path)
            if checkpoint_path:
                from tfprof.ingest.checkpoint import read_checkpoint

                # marked as variables only if the store was built from a graph, as tfprof does
                tables = add_checkpoint(
                    prof.tables(), read_checkpoint(checkpoint_path), mark_types=prof.source == "run_metadata"
                )
                prof = cls(tables, source=prof.source)
            prof.inputs = given
            return prof
        batches = iter_inputs(
            graph_path=graph_path,
            run_meta_path=run_meta_path,
            op_log_path=op_log_path,
            checkpoint_path=checkpoint_path,
            profile_path=profile_path,
            progress=progress,
        )
        prof = cls(merge_batches(list(batches)), source="profile" if profile_path else "run_metadata")
        prof.inputs = given
        return prof

    @classmethod
    def open(cls, path: PathLike) -> Profile:
        """Open a store directory without reading any table yet."""
        p = Path(path)
        manifest = read_manifest(p)  # checks every file's size
        check_tails(p, manifest)  # and that each ends as a complete file
        kept = stored_tables(manifest)
        # a table the store predates (see tfprof.manifest.LATER_TABLES) is empty
        empty = {n: TABLES[n].schema.empty_table() for n in TABLES if n not in kept}
        return cls(empty, store=p, source=manifest.get("source", "profile"))

    # ----------------------------------------------------------------------- access

    @property
    def table_names(self) -> list[str]:
        """Names of the tables, in schema order."""
        return list(TABLES)

    def table(self, name: str) -> pa.Table:
        """Table ``name`` as Arrow (read from the store on first use)."""
        _check_table(name)
        if name not in self._tables:
            assert self._store is not None
            self._tables[name] = self._read(name)
        return self._tables[name]

    def _read(self, name: str, columns: list[str] | None = None) -> pa.Table:
        """Table ``name`` (or some of its columns) from the store; a damaged file is named."""
        file = self._store_file(name)
        try:
            return pq.read_table(file, columns=columns, memory_map=True)
        except (pa.ArrowException, OSError, ValueError) as exc:  # ValueError: e.g. a footer's text not UTF-8
            raise undecodable(self._store, file, exc) from None

    def _store_file(self, name: str) -> Path:
        """The store's Parquet file of table ``name``, its tail and schema checked once per profile."""
        return self.memo(("table_file", name), lambda: self._checked_file(name))

    def _checked_file(self, name: str) -> Path:
        file = table_file(self._store, name)
        try:
            schema = pq.read_schema(file, memory_map=True)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise undecodable(self._store, file, exc) from None
        if not schema.equals(TABLES[name].schema, check_metadata=False):  # e.g. another table's file
            raise ProfileFormatError(f"`{file}` does not hold the store's `{name}` table; {recreate_hint(self._store)}")
        return file

    def damage(self) -> ProfileFormatError | None:
        """For a store, the first damaged file a full check finds (checksums, then decoding every
        table and index: ``verify_store``), or None: called when a query fails in a way no
        check foresaw, to tell a damaged store from a bug."""
        if self._store is None:
            return None
        try:
            verify_store(self._store, checksums=True)
        except ProfileFormatError as exc:
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
        if self._store is not None:
            counts = read_manifest(self._store)["tables"]
            return {name: (self._tables[name].num_rows if name in self._tables else counts[name]) for name in TABLES}
        return {name: t.num_rows for name, t in self._tables.items()}

    def memo(self, key: object, compute):
        """``compute()``, remembered under ``key``: a profile never changes, so frames derived
        from it (per-node metrics of a step, op-type lists, …) are computed once."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def index(self, name: str, build) -> dict[str, pl.DataFrame]:
        """Frames derived from the tables that no option changes (an index, e.g. the code
        view's call-stack trie): read from the store when ingest saved them there, else
        ``build(self)``, once per profile."""

        def load() -> dict[str, pl.DataFrame]:
            parts = read_index(self._store, name) if self._store is not None else None
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

        rows = sqlbox.query(self.connection(), query)
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
        """
        if self._con is None:
            from tfprof import sqlbox

            lazy = self._store is not None
            self._con = sqlbox.connect(
                {n: self._store / f"{n}.parquet" if lazy and n not in self._tables else self.table(n) for n in TABLES}
            )
        return self._con

    # ----------------------------------------------------------------------- views as frames

    def view(self, cmd: str, **options: object) -> pl.DataFrame:
        """The rows view ``cmd`` (scope, graph, op, code) shows, one per printed line, in order.

        Options take tfprof's names (``max_depth=3``, ``select=["params"]``, ``order_by="micros"``);
        the rest keep the command line's defaults. Columns: ``name``, ``depth``, then each
        selected metric beside its ``total_`` (``select`` as the report's: ``micros`` by
        default; documented in ``tfprof.views.table.COLUMNS``). For the
        report text as well, call ``tfprof.api.run_view``.

        >>> import tfprof
        >>> tfprof.load(tfprof.sample_path()).view("scope", max_depth=0)["name"].to_list()
        ['_TFProfRoot']
        """
        from tfprof.api import run_view  # api imports this module
        from tfprof.views.table import view_table

        if "output" in options or "dump_to_file" in options:
            from tfprof.errors import OptionError

            raise OptionError("Profile.view returns rows, not output: drop `output` (run_view(...).text is the report)")
        result = run_view(self, cmd, options, full_rows=True)
        return view_table(cmd, result.frame, result.options.select)

    def _repr_html_(self) -> str:
        """Jupyter's summary of the profile: model facts, totals per step, table sizes."""
        from tfprof.queries.summary import model_facts, summary
        from tfprof.views.notebook import profile_html

        where = f"store {self._store}" if self._store is not None else "in memory"
        return profile_html(where, self.source, model_facts(self), summary(self), self.row_counts())

    # ----------------------------------------------------------------------- store

    def to_parquet(self, path: PathLike, *, force: bool = False) -> Path:
        """Write the tables as a store at ``path``. An existing ``path`` is replaced (atomically)
        only with ``force``, and only if it is a tfprof store holding nothing else; the files
        the profile was read from are never written over."""
        return write_store(path, [self.tables()], source=self.source, force=force, inputs=self.inputs)

    def __repr__(self) -> str:
        counts = self.row_counts()
        where = f"store={str(self._store)!r}" if self._store else "in memory"
        return f"Profile({where}, nodes={counts.get('nodes', 0)}, steps={counts.get('steps', 0)})"

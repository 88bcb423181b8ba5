"""The SQL sandbox: SQL a user gives runs here, read-only over a profile's tables, with no way out.

Every path that runs user SQL comes through ``query`` (``Profile.sql``, ``tfprof sql``, the
advisor's ``.sql`` checkers). Three layers stand between such SQL and the machine:

1. **The statement.** DuckDB's own parser splits the text (``extract_statements``); it must
   be one query: ``SELECT``/``WITH``/``VALUES``/``FROM``/``TABLE``, ``DESCRIBE``, ``SUMMARIZE``,
   ``SHOW`` (which DuckDB parses as a SELECT) or ``EXPLAIN`` of one. Anything else (``COPY``,
   ``ATTACH``, ``INSTALL``, ``SET``, ``PRAGMA``, ``CREATE``, ``INSERT``, ``EXPORT``, ``CALL``, ...)
   is refused before anything runs.
2. **The query tree.** DuckDB's parse tree of the query (``json_serialize_sql``) is walked: a
   data-modifying common table expression (``WITH d AS (DELETE ... RETURNING *)``, which parses as
   a SELECT) is refused, and a table function must be one of ``TABLE_FUNCTIONS`` (``range``,
   ``unnest``, the catalog listings): file readers (``read_csv``, ``read_parquet``, ``glob``, ...),
   ``query()`` (SQL built from a string, which would skip these checks) and every other table
   function are refused.
3. **The connection** (``connect``), whose settings are locked before any user SQL runs:
   ``enable_external_access=false`` (no file but the store's own table files, which
   ``allowed_paths`` lists, no network, no extension loading, no Python objects found by name),
   ``autoinstall_known_extensions`` and ``autoload_known_extensions`` off, ``temp_directory=''``
   (an operator never spills to disk: nothing is written anywhere, the working directory
   included), ``secret_directory=''`` (its default is under the user's home, the one setting
   that told where the environment is), then ``lock_configuration=true`` (no ``SET``, no
   ``enable_*()`` table function, no setting can change again). This layer holds for
   statements run on the connection directly too, which the first two do not check, with one
   gap: DuckDB lets a listed path be written as well as read, so there ``COPY ... TO
   '<store>/nodes.parquet' (USE_TMP_FILE false)`` would overwrite a table file (the first
   layer refuses every COPY). Registering the files as ``pyarrow.dataset`` objects instead
   would close it, but Arrow's scan made queries 1.1-3x slower than DuckDB's own reader.

What a query can still do: read every table of the profile, use all cores (``threads`` is left
at DuckDB's default) and memory up to DuckDB's ``memory_limit`` (its default, 80% of RAM; beyond
it a query fails with an Out of Memory error, as nothing may spill), run as long as it likes
(DuckDB has no statement timeout; Ctrl-C stops it, and so does SIGTERM where Python handles
it, as ``tfprof``'s CLI does: see ``query``), and read the settings (memory limit, threads,
time zone, the store's table paths) through ``current_setting`` or ``pg_settings``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tfprof.errors import ProfileFormatError, QueryError
from tfprof.schema import TABLES

#: Settings of every sandbox connection, given when it is made (``secret_directory``,
#: ``enable_external_access`` and ``lock_configuration`` follow, see ``connect``).
SETTINGS: dict[str, Any] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "temp_directory": "",
}

#: Table functions a query may call: generators, and listings of the connection's own catalog.
TABLE_FUNCTIONS = frozenset(
    {
        "range",
        "generate_series",
        "unnest",
        "repeat",
        "json_each",
        "json_tree",
        "duckdb_tables",
        "duckdb_views",
        "duckdb_columns",
        "duckdb_schemas",
        "duckdb_types",
        "duckdb_functions",
        "duckdb_keywords",
        "pragma_table_info",
        "table_info",
    }
)

#: Nodes of DuckDB's parse tree that only read; ``INSERT_QUERY_NODE`` and the like write.
_READING_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"})

_ASK = (
    "give exactly one SELECT query (or WITH, FROM, VALUES, DESCRIBE, SUMMARIZE, SHOW, EXPLAIN) "
    "over the profile's tables (see `tfprof tables`)"
)


def first_line(exc: BaseException) -> str:
    """DuckDB's message in one line, without the caret drawing it appends, keeping a "Did you
    mean" hint; a Catalog Error lists the tables."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
    hint = next((ln for ln in lines[1:] if ln.startswith(("Did you mean", "Candidate"))), None)
    tables = "; tables: " + ", ".join(TABLES) if lines[0].startswith("Catalog Error") else ""
    return lines[0] + (f" ({hint})" if hint else "") + tables


# --------------------------------------------------------------------------- the connection


def _partition_keys(file: Path) -> list[str]:
    """The hive partition keys of ``file``'s path (``.../run=a/host=b/part.parquet``: run, host)."""
    keys = []
    for part in reversed(file.parent.parts):
        if "=" not in part:
            break
        keys.insert(0, part.split("=", 1)[0])
    return keys


def connect(tables: Mapping[str, pa.Table | Path | list[Path]]) -> duckdb.DuckDBPyConnection:
    """A locked-down in-memory DuckDB connection where each of ``tables`` is a view of its name:
    an Arrow table (registered, nothing copied), a Parquet file (read by DuckDB's own reader
    when a query runs, only the columns and row groups it needs), or a non-empty list of Parquet
    files of one hive-partitioned dataset (a catalog's: ``.../run=<r>/host=<h>/worker=<w>/part-*.parquet``),
    read together with a string column per partition key, last."""
    con = duckdb.connect(config=SETTINGS)
    try:
        con.execute("SET secret_directory = ''")  # '' given to connect() means "the default"
        files = {name: [Path(p).absolute() for p in (src if isinstance(src, list) else [src])]
                 for name, src in tables.items() if not isinstance(src, pa.Table)}
        # allowed_paths can only be set while external access is on; it lets the engine read
        # these files (and only these) once it is off
        con.execute("SET allowed_paths = $paths", {"paths": [str(p) for ps in files.values() for p in ps]})
        for name, src in tables.items():
            if name in files:
                quoted = ", ".join("'" + str(p).replace("'", "''") + "'" for p in files[name])
                hive, columns = "", "*"
                if isinstance(src, list):  # the partition columns last, in directory order (as Spark reads them)
                    hive = ", hive_partitioning = true, hive_types_autocast = false"
                    keys = ", ".join(f'"{k}"' for k in _partition_keys(files[name][0]))
                    columns = f"* EXCLUDE ({keys}), {keys}" if keys else "*"
                try:
                    con.execute(f'CREATE VIEW "{name}" AS SELECT {columns} FROM read_parquet([{quoted}]{hive})')
                except duckdb.Error as exc:
                    raise ProfileFormatError(
                        f"Cannot read table `{name}` of the store at `{files[name][0]}`: {first_line(exc)}; "
                        "write the store again from its inputs"
                    ) from None
            else:
                con.register(name, src)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


# --------------------------------------------------------------------------- the checks


def check(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement:
    """The one query ``sql`` holds, parsed; ``QueryError`` (before anything runs) if it is empty,
    holds more than one statement, or is or contains anything but a read-only query."""
    if not isinstance(sql, str) or not sql.strip():
        raise QueryError(f"Empty query: {_ASK}")
    statements = _parse(con, sql)
    if not statements:
        raise QueryError(f"Empty query (only comments): {_ASK}")
    for statement in statements:
        _check_statement(con, statement)
    if len(statements) > 1:
        raise QueryError(f"{len(statements)} statements given: {_ASK}")
    return statements[0]


def _parse(con: duckdb.DuckDBPyConnection, sql: str) -> list[duckdb.Statement]:
    try:  # the connection's parser: duckdb.extract_statements would make a default connection
        return con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(first_line(exc)) from None


def _check_statement(con: duckdb.DuckDBPyConnection, statement: duckdb.Statement) -> None:
    try:
        kind = statement.type.name
    except ValueError:  # a statement type the Python enum lacks (UPDATE EXTENSIONS)
        kind = "?"
    if kind == "EXPLAIN":
        inner = _parse(con, _explained(statement.query))
        if len(inner) != 1:
            raise QueryError(f"EXPLAIN takes one query: {_ASK}")
        _check_statement(con, inner[0])
    elif kind == "SELECT":
        _check_tree(con, statement.query)
    elif kind == "MULTI":  # PIVOT without an IN list creates a type first
        raise QueryError(f"PIVOT needs its values listed here (`PIVOT t ON col IN (...)`): {_ASK}")
    else:
        raise QueryError(f"`{_keyword(statement.query)}` statements cannot run here, SQL is read-only: {_ASK}")


def _words(sql: str) -> list[tuple[int, str]]:
    """(offset, text) of each token of ``sql`` but comments, as DuckDB's tokenizer splits it."""
    tokens = duckdb.tokenize(sql)
    ends = [start for start, _ in tokens[1:]] + [len(sql)]
    return [
        (start, sql[start:end].strip())
        for (start, kind), end in zip(tokens, ends)
        if kind != duckdb.token_type.comment
    ]


def _keyword(sql: str) -> str:
    words = _words(sql)
    return words[0][1].upper() if words else "?"


def _explained(sql: str) -> str:
    """The statement an EXPLAIN wraps: what follows ``EXPLAIN``, ``ANALYZE`` and an option list."""
    words = _words(sql)
    i = 1  # past EXPLAIN
    if i < len(words) and words[i][1].lower() in ("analyze", "analyse"):
        i += 1
    if i < len(words) and words[i][1].startswith("("):
        depth = 0
        while i < len(words):
            depth += words[i][1].count("(") - words[i][1].count(")")
            i += 1
            if depth <= 0:
                break
    return sql[words[i][0] :] if i < len(words) else ""


#: Verdicts of ``_tree_refusal`` by query text (a parse depends on the text alone), so a
#: query run again, as a notebook cell is, is not serialized and walked again.
_VERDICTS: dict[str, str | None] = {}


def _check_tree(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    if sql not in _VERDICTS:
        if len(_VERDICTS) >= 1024:
            _VERDICTS.clear()
        _VERDICTS[sql] = _tree_refusal(con, sql)
    refusal = _VERDICTS[sql]
    if refusal is not None:
        raise QueryError(refusal)


def _tree_refusal(con: duckdb.DuckDBPyConnection, sql: str) -> str | None:
    """Why the query's parse tree cannot run (a write, or a table function not in
    ``TABLE_FUNCTIONS``), or None when it only reads."""
    cursor = con.cursor()  # its own result: a result left open on ``con`` does not get in the way
    try:
        text = cursor.execute("SELECT json_serialize_sql($sql)", {"sql": sql}).fetchall()[0][0]
    finally:
        cursor.close()
    tree = json.loads(text)
    if tree.get("error"):
        return f"Cannot check the query ({tree.get('error_message', 'unknown error')}): {_ASK}"
    stack: list[Any] = [tree["statements"]]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            kind = item.get("type")
            if isinstance(kind, str) and kind.endswith("_NODE") and kind not in _READING_NODES:
                verb = kind.removesuffix("_NODE").removesuffix("_QUERY").replace("_", " ")
                return f"`{verb}` inside a query cannot run here, SQL is read-only: {_ASK}"
            if kind == "TABLE_FUNCTION":
                name = str((item.get("function") or {}).get("function_name", "?")).lower()
                if name not in TABLE_FUNCTIONS:
                    return (
                        f"Table function `{name}` cannot run here: queries read only the profile's tables "
                        f"(table functions allowed: {', '.join(sorted(TABLE_FUNCTIONS))})"
                    )
            stack.extend(item.values())
    return None


# --------------------------------------------------------------------------- running


def query(con: duckdb.DuckDBPyConnection, sql: str, *, params: Mapping[str, Any] | None = None) -> pa.Table | None:
    """The rows of the read-only query ``sql`` (checked first, see ``check``) with its named
    ``$parameters`` from ``params``, as Arrow (None if the statement returned no result).

    Anything DuckDB refuses, when it binds or runs, is a ``QueryError`` of one line. A query
    stopped by Ctrl-C (see ``_stopped_by_signals``) or ``con.interrupt()`` raises
    ``KeyboardInterrupt``, as Python code stopped does.
    """
    statement = check(con, sql)
    try:
        return run_arrow(con, statement, params)
    except duckdb.Error as exc:
        raise QueryError(first_line(exc)) from None


def run_arrow(con: duckdb.DuckDBPyConnection, sql, params: Mapping[str, Any] | None = None) -> pa.Table | None:
    """The rows of ``sql`` (a statement or its text, not checked: for tfprof's own queries) as
    Arrow, or None if it returned none. Ctrl-C and SIGTERM stop it (see ``_stopped_by_signals``)
    and raise what they raise in Python code (``KeyboardInterrupt``, the CLI's ``Terminated``);
    DuckDB's own errors propagate."""
    try:
        with _stopped_by_signals(con):
            rel = con.sql(sql, params=dict(params) if params else None)
            if rel is None:  # no rows came back (no query does this, but the API allows it)
                return None
            reader = rel.arrow()  # a stream, read at once: to_arrow_table() ignores interrupts
            try:
                return reader.read_all()
            finally:
                reader.close()  # an unread stream would hold the connection
    except (duckdb.InterruptException, RuntimeError) as exc:  # RuntimeError: DuckDB's own SIGINT check
        if isinstance(exc, RuntimeError) and "interrupted" not in str(exc).lower():
            raise
        # stopped by con.interrupt() from another thread (a signal's handler raises its own)
        raise KeyboardInterrupt from None


_STOPPING = frozenset({signal.SIGINT, signal.SIGTERM})


class _Watcher:
    """A thread reading a pipe that is Python's signal wakeup descriptor while a query runs, and
    interrupting that query's connection when SIGINT or SIGTERM comes. One per process (made on
    first use, again after a fork): starting a thread for each query cost 0.1-0.3 ms."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.read_end, self.write_end = os.pipe()
        os.set_blocking(self.write_end, False)
        self.lock = threading.Lock()
        self.con: duckdb.DuckDBPyConnection | None = None
        self.seen = bytearray()
        threading.Thread(target=self._run, name="tfprof-sql-interrupt", daemon=True).start()

    def _run(self) -> None:
        while chunk := os.read(self.read_end, 64):
            with self.lock:
                self.seen.extend(chunk)
                con = self.con
            if con is not None and any(number in _STOPPING for number in chunk):
                con.interrupt()


_WATCHER: list[_Watcher] = []


@contextlib.contextmanager
def _stopped_by_signals(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """While the block runs, SIGINT or SIGTERM (where Python handles it) interrupts ``con``'s
    query, and the signal's Python handler then runs once the block is over, raising what it
    raises (KeyboardInterrupt for Ctrl-C, the CLI's Terminated for SIGTERM).

    Python runs a signal's handler only between bytecodes, which a query in DuckDB's C++ never
    reaches, and DuckDB's own SIGINT check misses most Ctrl-Cs (and when it does run a handler,
    it swallows the handler's exception into its own "interrupted" error). So, meanwhile:
    Python's C-level handler writes each signal's number to the wakeup descriptor, a pipe
    ``_Watcher`` reads, which interrupts the query; and the Python-level handlers are replaced by
    one that only notes the signal. Afterwards the handlers and the previous wakeup descriptor
    come back (the signal numbers read are passed on to it: an asyncio loop listens there), and
    each noted signal goes to its own handler. Off the main thread, where neither can be set, the
    block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if not _WATCHER or _WATCHER[0].pid != os.getpid():
        _WATCHER[:] = [_Watcher()]
    watcher = _WATCHER[0]
    with watcher.lock:
        watcher.con = con
        watcher.seen.clear()
    try:
        previous = signal.set_wakeup_fd(watcher.write_end, warn_on_full_buffer=False)
    except ValueError:  # Windows takes a socket here, not a pipe
        watcher.con = None
        yield
        return
    handlers = {number: signal.getsignal(number) for number in _STOPPING}
    handlers = {number: handler for number, handler in handlers.items() if callable(handler)}
    noted: list[int] = []
    for number in handlers:
        signal.signal(number, lambda number, frame: noted.append(number))
    try:
        yield
    finally:
        import ctypes

        ctypes.pythonapi.PyErr_CheckSignals()  # note signals whose handlers are still pending
        signal.set_wakeup_fd(previous, warn_on_full_buffer=False)
        for number, handler in handlers.items():
            signal.signal(number, handler)
        with watcher.lock:
            watcher.con = None
            seen = bytes(watcher.seen)
        if seen and previous != -1:
            try:
                os.write(previous, seen)
            except OSError:  # full or closed: its owner misses these, as it would have anyway
                pass
        for number in noted:
            handlers[number](number, None)  # KeyboardInterrupt, Terminated, ... raised from here

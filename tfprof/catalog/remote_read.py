"""Reading a catalog in object storage (``tfprof.catalog.remote`` writes it): its run list, one
run as a ``Profile``, tables over every run for SQL, and copies of partitions for Spark.

Readers take no lock: they read ``runs.parquet`` once and each listed object (size, Parquet
tail, CRC-32, schema and row count checked); an object deleted under them by a concurrent
remove makes them read the run list again, once. The run list's rows are judged by the local
catalog's rules (``tfprof.catalog.trust``): a run whose row cannot be used, or whose objects
fail the checks (missing, another size, another checksum), never stops the others from being
read: a reader of every run skips it with one ``CatalogWarning`` naming it, a command that
names it is refused with its problem. Only the objects of the tables read are checked.
"""

from __future__ import annotations

import contextlib
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tfprof.catalog.layout import LEVELS, NO_VALUE, RUNS, RUNS_SCHEMA, check_name, rank_files, rank_of, with_run_column
from tfprof.catalog.storage import ObjectStore, ObjectTooLarge
from tfprof.catalog.trust import repair_hint, row_problems, run_row, shown, split_rows, usable_rows, warn_skipped
from tfprof.errors import InputNotFoundError, ProfileFormatError
from tfprof.profile import Profile
from tfprof.schema import TABLES


def runs_table(store: ObjectStore, data: bytes | None) -> pa.Table:
    """The runs table whose Parquet bytes are ``data`` (an empty one for None), checked to be one."""
    if data is None:
        return RUNS_SCHEMA.empty_table()
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ProfileFormatError(f"`{store.url(RUNS)}` is damaged ({exc}); the catalog's run list cannot be read") from None
    if not table.schema.equals(RUNS_SCHEMA, check_metadata=False):
        raise ProfileFormatError(f"`{store.url(RUNS)}` is not a tfprof runs table")
    return table


def open_catalog(uri: str) -> tuple[ObjectStore, bytes]:
    """The store of catalog ``uri`` and its run list's bytes; a one-line error when the bucket
    or the catalog is not there."""
    store = ObjectStore(uri)
    data = store.read(RUNS)
    if data is None:
        store.exists_bucket()
        raise InputNotFoundError(f"`{uri}` is not a tfprof catalog (no {RUNS}); add a run with "
                                 f"`tfprof ingest --catalog {uri} --run NAME PROFILE`")
    return store, data


def runs(uri: str) -> pa.Table:
    """The runs table of the catalog at ``uri``, every row as it is (``tfprof.catalog.runs``
    leaves out those that cannot be used)."""
    store, data = open_catalog(uri)
    return runs_table(store, data)


class _Gone(Exception):
    """A listed object is missing: it may have been deleted by a concurrent remove."""


def _fetch(store: ObjectStore, entry: dict) -> pa.Table:
    """The partition ``entry`` names, checked against it: size, Parquet tail, CRC-32, schema, rows."""
    return _decode(store, entry, _fetch_bytes(store, entry))


def _fetch_bytes(store: ObjectStore, entry: dict) -> bytes:
    """The bytes of the partition ``entry`` names, checked: size, Parquet tail, CRC-32."""
    url, hint = store.url(entry["path"]), repair_hint(store.uri)
    try:  # never more than the run list says it holds
        data = store.read(entry["path"], limit=entry["bytes"])
    except ObjectTooLarge as big:
        raise ProfileFormatError(f"`{url}` is damaged ({big.size:,} bytes where the catalog wrote {entry['bytes']:,}; "
                                 f"it was not downloaded); {hint}") from None
    if data is None:
        raise _Gone(f"`{url}` is missing from the catalog `{store.uri}`; {hint}")
    if len(data) != entry["bytes"]:
        raise ProfileFormatError(f"`{url}` is damaged ({len(data):,} bytes where the catalog wrote "
                                 f"{entry['bytes']:,}); {hint}")
    if data[-4:] != b"PAR1":
        raise ProfileFormatError(f"`{url}` is damaged (not a complete Parquet file); {hint}")
    if zlib.crc32(data) != int(entry["crc32"], 16):
        raise ProfileFormatError(f"`{url}` is damaged (its checksum differs from the one the catalog recorded); {hint}")
    return data


def _decode(store: ObjectStore, entry: dict, data: bytes) -> pa.Table:
    url, hint = store.url(entry["path"]), repair_hint(store.uri)
    name = entry["table"]
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ProfileFormatError(f"`{url}` is damaged ({str(exc).splitlines()[0]}); {hint}") from None
    if name not in TABLES or not table.schema.equals(TABLES[name].schema, check_metadata=False) \
            or table.num_rows != entry["rows"]:
        raise ProfileFormatError(f"`{url}` does not hold the run's `{name}` table; {hint}")
    return table


@contextlib.contextmanager
def _threads():
    """8 threads for object reads. A failure or a stop (Ctrl-C) does not wait for the calls still
    running: they end by their time limits (``storage.abandoned``)."""
    pool = ThreadPoolExecutor(max_workers=8)
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _fetch_each(store: ObjectStore, entries: list[dict], fetch=_fetch) -> list:
    """``fetch(store, entry)`` for each of ``entries``, 8 at a time: its value, or the
    ``ProfileFormatError`` or ``_Gone`` it failed with (any other failure is raised)."""
    def attempt(entry: dict):
        try:
            return fetch(store, entry)
        except (ProfileFormatError, _Gone) as exc:
            return exc

    with _threads() as pool:
        return list(pool.map(attempt, entries))


def _fetch_all(store: ObjectStore, entries: list[dict]) -> list[pa.Table]:
    """The tables of ``entries`` (``_fetch``); the first failure is raised."""
    out = _fetch_each(store, entries)
    for value in out:
        if isinstance(value, Exception):
            raise value
    return out


def _consistent(uri: str, read):
    """``read(store, table, settled)`` over the run list ``table``; again, once, if an object it
    lists was missing (``_Gone``) and the run list has changed meanwhile (a concurrent remove or
    replace). ``settled()`` says whether an object found missing is not such a change (the run
    list is as it was read), so that a reader of every run may skip its run."""
    store, data = open_catalog(uri)
    for again in (False, True):
        def settled(store: ObjectStore = store, data: bytes = data, again: bool = again) -> bool:
            return again or store.read(RUNS) == data

        try:
            return read(store, runs_table(store, data), settled)
        except _Gone as gone:
            if settled():
                raise ProfileFormatError(str(gone)) from None
        store, data = open_catalog(uri)
    raise AssertionError("unreachable")


def _each_run(uri: str, pick, fetch, names: list[str] | None = None, strict: bool = False):
    """Per run to read, its row and ``[(entry, fetch(store, entry))]`` for the entries
    ``pick(row)`` chooses; the runs table read; and the runs left out, each with its problem
    (for ``trust.warn_skipped``). The runs are ``names`` (every run when None); one whose row
    cannot be used (``trust.split_rows``) or whose objects fail their checks is left out
    (``strict``: an error instead)."""
    def read(store: ObjectStore, table: pa.Table, settled):
        if strict:
            rows = usable_rows(uri, table, names or [])  # a named run that cannot be used: DamagedRun
            rows = [run_row(uri, rows, name) for name in dict.fromkeys(names or [])]
            skipped: list[tuple[str, str]] = []
        else:
            every, bad = split_rows(table)
            wanted = None if names is None else set(names)
            skipped = [(str(every[k]["run"]), problem) for k, problem in bad.items()
                       if wanted is None or every[k]["run"] in wanted]
            rows = [r for k, r in enumerate(every) if k not in bad and (wanted is None or r["run"] in wanted)]
        chosen = [(row, entry) for row in rows for entry in pick(row)]
        values = _fetch_each(store, [entry for _, entry in chosen], fetch)
        failed: dict[str, Exception] = {}
        for (row, _), value in zip(chosen, values):
            if isinstance(value, Exception):
                failed.setdefault(row["run"], value)
        if failed and (strict or (any(isinstance(v, _Gone) for v in failed.values()) and not settled())):
            raise next(iter(failed.values()))  # (a _Gone: read again by the new run list)
        out: dict[str, tuple[dict, list]] = {row["run"]: (row, []) for row in rows if row["run"] not in failed}
        for (row, entry), value in zip(chosen, values):
            if row["run"] in out:
                out[row["run"]][1].append((entry, value))
        return out, table, skipped + [(run, str(exc)) for run, exc in failed.items()]

    return _consistent(uri, read)


def _read_runs(table: pa.Table, read: set[str]) -> pa.Table:
    """The rows of runs table ``table`` of the runs ``read``."""
    return table.filter(pa.array([run in read for run in table.column("run").to_pylist()], pa.bool_()))


def run_profile(uri: str, run: str, rank: int | None = None) -> Profile:
    """Run ``run`` of the catalog at ``uri`` (rank ``rank`` of a job's run) as a ``Profile``; a
    run whose row or objects fail the checks is an error, the others do not matter."""
    check_name(run)

    def read(store: ObjectStore, table: pa.Table, _settled) -> Profile:
        row = run_row(uri, usable_rows(uri, table, [run]), run)
        entries = {f["table"]: f for f in rank_files(row, rank) if f["table"] in TABLES}
        tables = dict(zip(entries, _fetch_all(store, list(entries.values()))))
        return Profile(tables, source=row["format"])

    return _consistent(uri, read)


def readable_runs(uri: str, names: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Those of runs ``names`` whose objects (every table's, every rank's) pass every check a
    read makes, each read whole, and each other one with its problem (``read.readable_runs``)."""
    def pick(row: dict) -> list[dict]:
        return [e for e in row["files"] if e["table"] in TABLES]

    done, _, skipped = _each_run(uri, pick, lambda store, entry: len(_fetch_bytes(store, entry)), names)
    return [name for name in names if name in done], skipped


def run_tables(uri: str, wanted: list[str] | None = None) -> dict[str, pa.Table]:
    """Tables ``wanted`` (every table when None) over every run that can be read, each with the
    partition columns run, host, worker and rank last (NULL where a run has no such tag), and
    ``runs``, the rows of those runs: what SQL over the catalog reads
    (``tfprof.catalog.read.with_run_column`` gives the schema)."""
    names = list(TABLES) if wanted is None else wanted
    done, table, skipped = _each_run(uri, lambda row: [f for f in row["files"] if f["table"] in names], _fetch)
    warn_skipped(uri, skipped)
    out: dict[str, pa.Table] = {}
    for name in names:
        pieces = [_with_levels(t, row, f, name) for row, got in done.values() for f, t in got if f["table"] == name]
        out[name] = pa.concat_tables(pieces) if pieces else with_run_column(name).empty_table()
    out["runs"] = _read_runs(table, set(done))  # the run list these tables were read by, not a later one
    return out


def download(uri: str, wanted: list[str], dest: Path, names: list[str] | None = None
             ) -> tuple[dict[str, list[Path]], pa.Table]:
    """Copy the partitions of tables ``wanted`` of every run that can be read (of runs ``names``,
    each of which must be) into ``dest`` (the catalog's layout; each object checked: size, tail,
    CRC-32), for an engine that reads Parquet files; returns the files per table and the rows of
    the runs table they belong to."""
    def pick(row: dict) -> list[dict]:
        return [f for f in row["files"] if f["table"] in wanted]

    done, table, skipped = _each_run(uri, pick, _fetch_bytes, names, strict=names is not None)
    warn_skipped(uri, skipped)
    out: dict[str, list[Path]] = {name: [] for name in TABLES}
    for _row, got in done.values():
        for entry, data in got:
            file = dest / entry["path"]  # (checked by split_rows: relative, no `..`)
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(data)
            out[entry["table"]].append(file)
    return out, _read_runs(table, set(done))


def _with_levels(table: pa.Table, row: dict, entry: dict, name: str) -> pa.Table:
    tags = dict(row["tags"] or [])
    rank = rank_of(entry["path"])
    values = {"run": row["run"], **{k: tags.get(k) for k in LEVELS[1:]}, "rank": None if rank is None else str(rank)}
    for level in LEVELS:
        value = None if values[level] in (None, NO_VALUE) else values[level]
        table = table.append_column(level, pa.array([value] * table.num_rows, pa.string()))
    return table.cast(with_run_column(name))


def sql(uri: str, query: str) -> pa.Table:
    """``tfprof.catalog.sql`` for a catalog in object storage: the tables the query names are
    read through pyarrow (each partition checked; a run that cannot be read is left out with a
    warning) and handed to DuckDB as Arrow tables."""
    from tfprof import sqlbox
    from tfprof.profile import tables_read

    empty = {n: with_run_column(n).empty_table() for n in TABLES}
    con = sqlbox.connect({**empty, "runs": RUNS_SCHEMA.empty_table()})
    try:
        wanted = tables_read(con, query)
    finally:
        con.close()
    sources = {**empty, **run_tables(uri, wanted)}
    con = sqlbox.connect(sources)
    try:
        rows = sqlbox.query(con, query)
    finally:
        con.close()
    return rows if rows is not None else pa.table({})


def check_catalog(uri: str, checksums: bool = True) -> dict:
    """``tfprof.catalog.check_catalog`` for a catalog in object storage: every row of the run
    list, and every object a run lists (with ``checksums``, read whole and checked as a read
    does; without, its size only)."""
    from pyarrow import fs

    store, data = open_catalog(uri)
    report: dict = {"catalog": uri, "problems": [], "runs": []}
    try:
        rows = runs_table(store, data).to_pylist()
    except ProfileFormatError as exc:
        return {**report, "problems": [str(exc)], "runs": None}
    seen: dict[str, str] = {}
    names: set[str] = set()
    for row in rows:
        found = row_problems(row, seen, names)
        entries = row["files"] if not found else []
        if entries and not checksums:
            paths = [store.path(e["path"]) for e in entries]
            infos = store._do("list", None, lambda paths=paths: store.fs.get_file_info(paths))
            for entry, info in zip(entries, infos):
                if info.type != fs.FileType.File:
                    found.append(f"`{store.url(entry['path'])}` is missing from the catalog `{uri}`")
                elif info.size != entry["bytes"]:
                    found.append(f"`{store.url(entry['path'])}` is damaged ({info.size:,} bytes where the catalog "
                                 f"wrote {entry['bytes']:,})")
        for entry in entries if checksums else []:
            try:
                _fetch(store, entry)
            except (ProfileFormatError, _Gone) as exc:
                found.append(str(exc))
        report["runs"].append({"run": shown(str(row["run"])), "files": len(row["files"] or []),
                               "errors": row["errors"], "warnings": row["warnings"], "problems": found})
    return report

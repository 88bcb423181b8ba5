"""A catalog in object storage (``s3://bucket/prefix``): the same layout, run list and checks as
a local one (``tfprof.catalog.layout``, ``trust``), with a commit protocol for a store that has
no rename and no flock (``tfprof.catalog.storage``).

An add ingests the profile into a local temporary store (no lock held), then takes the writers'
lock object, reads ``runs.parquet`` and its ETag, deletes the partition objects no run lists
(a dead writer's), uploads the run's partitions under fresh names, confirms the lock is still
its own, and writes the new ``runs.parquet`` in one PUT with ``If-Match`` on the ETag it read
(``If-None-Match: *`` for the first run): that PUT is the commit, atomic on S3. Even a writer
whose lock was broken while it stalled cannot then overwrite another's commit: its PUT fails
and it deletes what it uploaded. A replaced run's objects, and a removed run's, are deleted
after the commit. Readers take no lock: they read ``runs.parquet`` once and each listed object
(size, Parquet tail, CRC-32, schema and row count checked); an object deleted under them by a
concurrent remove makes them read the run list again, once.
"""

from __future__ import annotations

import datetime
import os
import re
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tfprof.catalog.layout import (
    LEVELS,
    NO_VALUE,
    RUNS,
    RUNS_SCHEMA,
    check_name,
    combined_row,
    partition_dir,
    rank_files,
    rank_of,
    with_run_column,
)
from tfprof.catalog.storage import LOCK_KEY, ObjectStore, PreconditionFailed
from tfprof.catalog.trust import check_runs
from tfprof.errors import InputNotFoundError, OptionError, OutputError, ProfileFormatError
from tfprof.ingest import Progress
from tfprof.profile import Profile
from tfprof.schema import TABLES
from tfprof.store import read_manifest

# a partition object tfprof writes (the rank level's layout, or an older one): only these are
# ever deleted as a dead writer's leftovers
_PART_KEY = re.compile(r"[a-z][a-z0-9_]{0,63}/run=[^/]+(/host=[^/]+/worker=[^/]+(/rank=[^/]+)?)?"
                       r"/part-[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.parquet")


def _runs_table(store: ObjectStore, data: bytes | None) -> pa.Table:
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
    """The runs table of the catalog at ``uri``."""
    store, data = open_catalog(uri)
    return _runs_table(store, data)


def _serialise(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table.cast(RUNS_SCHEMA).sort_by("run"), sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def _check_prefix(store: ObjectStore, has_runs: bool) -> None:
    """Refuse a prefix that holds other objects than a catalog's (never write into them)."""
    if has_runs:
        return
    foreign = [k for k in store.list() if k != LOCK_KEY and not _PART_KEY.fullmatch(k)]
    if foreign:
        raise OutputError(f"`{store.uri}` holds objects that are not a tfprof catalog's (such as `{foreign[0]}`); "
                          "give a new or empty prefix")


def add_members(uri: str, run: str, tag_map: dict[str, str], force: bool, progress: Progress | None,
                members: list[tuple[dict, Profile | None]], inputs, stage_inputs, rank_staged=None) -> dict:
    """``tfprof.catalog.add_run`` (one member: tfprof's input options or a ``Profile``) and
    ``add_job`` (a job's traces, ranked by ``rank_staged``) for a catalog in object storage (see
    the module docstring); ``stage_inputs(store, progress, given, profile)`` ingests into a
    local store."""
    store = ObjectStore(uri)
    store.client  # noqa: B018 - boto3 is needed: say so before the ingest
    store.exists_bucket()
    found = store.get(RUNS)
    _check_prefix(store, found is not None)
    _plan(store, run, force, _runs_table(store, found and found[0]))  # refused before the ingest
    job = rank_staged is not None
    with tempfile.TemporaryDirectory(prefix="tfprof-add-") as tmp:
        staged = []
        for k, (given, profile) in enumerate(members):
            folder = Path(tmp) / f"store{k}"
            staged.append((folder, stage_inputs(folder, None if job else progress, given, profile)))
            if job and progress:
                progress(k + 1, len(members), str(given["profile_path"]))
        staged, ranks = rank_staged(members, staged) if job else (staged, [None])
        token = os.urandom(6).hex()
        with store.locked() as lock:
            found = store.get(RUNS)
            _check_prefix(store, found is not None)
            table = _runs_table(store, found and found[0])
            rows = _plan(store, run, force, table)
            listed = {f["path"] for r in rows for f in r["files"]}
            for key in store.list():  # a dead writer's uploads: listed nowhere, named as ours
                if _PART_KEY.fullmatch(key) and key.split("/", 1)[0] in TABLES and key not in listed:
                    store.delete(key)
            old = [f["path"] for r in rows if r["run"] == run for f in r["files"]]
            placed = [_upload(store, folder, run, token, read_manifest(folder), source, tag_map, inputs, rank)
                      for (folder, source), rank in zip(staged, ranks)]
            row, uploaded = combined_row([r for r, _ in placed]), [key for _, keys in placed for key in keys]
            kept = table.filter(pc.not_equal(table.column("run"), run))
            data = _serialise(pa.concat_tables([kept, pa.Table.from_pylist([row], RUNS_SCHEMA)]))
            lock.confirm()
            try:
                if found is None:
                    store.put(RUNS, data, if_absent=True)
                else:
                    store.put(RUNS, data, if_match=found[1])
            except PreconditionFailed:
                for key in uploaded:
                    store.delete(key)
                raise OutputError(f"the catalog `{uri}` was changed by another writer during this add (its lock "
                                  "was broken); nothing was committed: run the command again") from None
            for key in old:  # the replaced run's objects, listed nowhere now
                store.delete(key)
    return row


def _plan(store: ObjectStore, run: str, force: bool, table: pa.Table) -> list[dict]:
    rows = check_runs(store.uri, table)
    if any(r["run"] == run for r in rows) and not force:
        raise OutputError(f"run `{run}` is already in the catalog `{store.uri}`; pass --force to replace it "
                          "(Python: force=True)")
    return rows


def _upload(store: ObjectStore, staged: Path, run: str, token: str, manifest: dict, source: str,
            tags: dict[str, str], inputs, rank: int | None = None) -> tuple[dict, list[str]]:
    """Upload the staged store's table files to their partitions (of rank ``rank`` of a job);
    the run's row and the keys."""
    files, uploaded = [], []
    for table in TABLES:
        rel = (partition_dir(Path(), table, run, tags, rank) / f"part-{token}.parquet").as_posix()
        entry = manifest["files"][f"{table}.parquet"]
        uploaded.append(rel)
        store.upload(staged / f"{table}.parquet", rel)
        files.append({"table": table, "path": rel, "bytes": entry["size"], "crc32": entry["crc32"],
                      "rows": manifest["tables"][table]})
    validation = pq.read_table(staged / "validation.parquet", columns=["severity", "count"]).to_pylist()
    counts = {s: sum(r["count"] for r in validation if r["severity"] == s) for s in ("error", "warning")}
    row = {
        "run": run, "tags": list(tags.items()),
        "source_file": ",".join(os.path.abspath(p) for p in inputs.paths + inputs.prefixes),
        "format": source, "ingested_at": datetime.datetime.now(datetime.timezone.utc),
        "nodes": manifest["tables"]["nodes"], "steps": manifest["tables"]["steps"],
        "errors": counts["error"], "warnings": counts["warning"], "files": files,
    }
    return row, uploaded


def remove_run(uri: str, run: str) -> None:
    """Remove run ``run``: the run list without it (the commit, conditional on the version
    read), then its objects, and nothing else."""
    store = ObjectStore(uri)
    store.client  # noqa: B018 - boto3 is needed
    open_catalog(uri)
    with store.locked() as lock:
        found = store.get(RUNS)
        if found is None:
            raise InputNotFoundError(f"`{uri}` is not a tfprof catalog (no {RUNS})")
        table = _runs_table(store, found[0])
        names = [r["run"] for r in check_runs(uri, table)]
        if run not in names:
            raise OptionError(f"no run `{run}` in the catalog `{uri}`; runs: {', '.join(names) or 'none'}")
        old = [f["path"] for r in table.to_pylist() if r["run"] == run for f in r["files"]]
        lock.confirm()
        try:
            store.put(RUNS, _serialise(table.filter(pc.not_equal(table.column("run"), run))), if_match=found[1])
        except PreconditionFailed:
            raise OutputError(f"the catalog `{uri}` was changed by another writer during this remove; nothing "
                              "was changed: run the command again") from None
        for key in old:
            store.delete(key)


# ---------------------------------------------------------------------------- reading
class _Gone(Exception):
    """A listed object is missing: it may have been deleted by a concurrent remove."""


def _hint(uri: str) -> str:
    return f"remove the run (`tfprof runs {uri} --remove NAME`) and add it again"


def _fetch(store: ObjectStore, entry: dict) -> pa.Table:
    """The partition ``entry`` names, checked against it: size, Parquet tail, CRC-32, schema, rows."""
    return _decode(store, entry, _fetch_bytes(store, entry))


def _fetch_bytes(store: ObjectStore, entry: dict) -> bytes:
    """The bytes of the partition ``entry`` names, checked: size, Parquet tail, CRC-32."""
    url, hint = store.url(entry["path"]), _hint(store.uri)
    data = store.read(entry["path"])
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
    url, hint = store.url(entry["path"]), _hint(store.uri)
    name = entry["table"]
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ProfileFormatError(f"`{url}` is damaged ({str(exc).splitlines()[0]}); {hint}") from None
    if name not in TABLES or not table.schema.equals(TABLES[name].schema, check_metadata=False) \
            or table.num_rows != entry["rows"]:
        raise ProfileFormatError(f"`{url}` does not hold the run's `{name}` table; {hint}")
    return table


def _consistent(uri: str, read):
    """``read(store, rows)`` over the run list; again, once, if an object it lists was missing and
    the run list has changed meanwhile (a concurrent remove or replace)."""
    store, data = open_catalog(uri)
    try:
        return read(store, check_runs(uri, _runs_table(store, data)))
    except _Gone as gone:
        if store.read(RUNS) == data:
            raise ProfileFormatError(str(gone)) from None
    store, data = open_catalog(uri)
    try:
        return read(store, check_runs(uri, _runs_table(store, data)))
    except _Gone as gone:
        raise ProfileFormatError(str(gone)) from None


def _fetch_all(store: ObjectStore, entries: list[dict]) -> list[pa.Table]:
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda e: _fetch(store, e), entries))


def run_profile(uri: str, run: str, rank: int | None = None) -> Profile:
    """Run ``run`` of the catalog at ``uri`` (rank ``rank`` of a job's run) as a ``Profile``."""
    check_name(run)

    def read(store: ObjectStore, rows: list[dict]) -> Profile:
        mine = [r for r in rows if r["run"] == run]
        if not mine:
            names = [r["run"] for r in rows]
            raise OptionError(f"no run `{run}` in the catalog `{uri}`; runs: {', '.join(names) or 'none'}")
        entries = {f["table"]: f for f in rank_files(mine[0], rank) if f["table"] in TABLES}
        tables = dict(zip(entries, _fetch_all(store, list(entries.values()))))
        return Profile(tables, source=mine[0]["format"])

    return _consistent(uri, read)


def run_tables(uri: str, wanted: list[str] | None = None) -> dict[str, pa.Table]:
    """Tables ``wanted`` (every table when None) over every run, each with the partition
    columns run, host, worker and rank last (NULL where a run has no such tag), and ``runs``: what
    SQL over the catalog reads (``tfprof.catalog.read.with_run_column`` gives the schema)."""
    names = list(TABLES) if wanted is None else wanted

    def read(store: ObjectStore, rows: list[dict]) -> dict[str, pa.Table]:
        out: dict[str, pa.Table] = {}
        for name in names:
            parts = [(r, f) for r in rows for f in r["files"] if f["table"] == name]
            tables = _fetch_all(store, [f for _r, f in parts])
            pieces = [_with_levels(t, row, f, name) for (row, f), t in zip(parts, tables)]
            out[name] = pa.concat_tables(pieces) if pieces else with_run_column(name).empty_table()
        return out

    out = _consistent(uri, read)
    out["runs"] = runs(uri)
    return out


def download(uri: str, wanted: list[str], dest: Path, names: list[str] | None = None
             ) -> tuple[dict[str, list[Path]], pa.Table]:
    """Copy the partitions of tables ``wanted`` of every run (of runs ``names``) into ``dest`` (the catalog's
    layout; each object checked: size, tail, CRC-32), for an engine that reads Parquet files;
    returns the files per table and the runs table they belong to."""

    def read(store: ObjectStore, rows: list[dict]) -> dict[str, list[Path]]:
        out: dict[str, list[Path]] = {name: [] for name in TABLES}
        entries = [f for r in rows if names is None or r["run"] in names for f in r["files"] if f["table"] in wanted]
        with ThreadPoolExecutor(max_workers=8) as pool:
            for entry, data in zip(entries, pool.map(lambda e: _fetch_bytes(store, e), entries)):
                file = dest / entry["path"]  # (checked by check_runs: relative, no `..`)
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_bytes(data)
                out[entry["table"]].append(file)
        return out

    files = _consistent(uri, read)
    return files, runs(uri)


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
    read through pyarrow (each partition checked) and handed to DuckDB as Arrow tables."""
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

    from tfprof.catalog.trust import row_problems, shown

    store, data = open_catalog(uri)
    report: dict = {"catalog": uri, "problems": [], "runs": []}
    try:
        rows = _runs_table(store, data).to_pylist()
    except ProfileFormatError as exc:
        return {**report, "problems": [str(exc)], "runs": None}
    seen: dict[str, str] = {}
    names: set[str] = set()
    for row in rows:
        found = row_problems(row, seen, names)
        entries = row["files"] if not found else []
        if entries and not checksums:
            with store.errors("list"):
                infos = store.fs.get_file_info([store.path(e["path"]) for e in entries])
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

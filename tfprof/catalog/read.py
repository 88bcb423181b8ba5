"""Reading a catalog: its runs, one run as a ``Profile``, and every run at once for SQL.

Partition files are named by the runs table (``tfprof.catalog.layout``), never found by listing
folders. The runs table's names and paths are checked first (``tfprof.catalog.trust``), and
each file against it before it is read: reached without a link, its size, that it ends as a
Parquet file, its CRC-32 (once per process: ``tfprof.manifest.verify_files``), its schema.
SQL checks the CRC-32s of the tables a query names. Readers hold the catalog's shared lock
meanwhile, so a concurrent remove cannot take a file from under them.

A run whose row or partitions fail these checks never stops the others from being read: the
listing, SQL over every run and ``match_runs`` skip it with one ``CatalogWarning`` naming it
(``tfprof.catalog.trust.usable_rows``); a command that names it is refused with its problem.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tfprof.catalog.layout import (
    UntrustedCatalog,
    check_name,
    locked,
    rank_files,
    read_runs,
    require_catalog,
    run_ranks,
    with_run_column,
)
from tfprof.catalog.storage import object_uri
from tfprof.catalog.trust import (
    no_links,
    repair_hint,
    run_row,
    shown,
    usable_rows,
    usable_table,
    warn_skipped,
)
from tfprof.errors import OptionError, ProfileFormatError
from tfprof.manifest import verify_files
from tfprof.output import PathLike, input_paths
from tfprof.profile import Profile, tables_read
from tfprof.schema import TABLES


def runs(catalog: PathLike) -> pa.Table:
    """The catalog's runs table (``tfprof.catalog.layout.RUNS_SCHEMA``), one row per run by name;
    a run that cannot be read is left out with a ``CatalogWarning`` (``trust.usable_rows``).

    >>> import tempfile, tfprof
    >>> from tfprof.catalog import add_run, runs
    >>> cat = tempfile.mkdtemp() + "/cat"
    >>> _ = add_run(cat, "a", tags=["host=h1"], profile_path=tfprof.sample_path())
    >>> runs(cat).select(["run", "format", "nodes"]).to_pylist()
    [{'run': 'a', 'format': 'profile', 'nodes': 467}]
    """
    if uri := object_uri(catalog):
        from tfprof.catalog import remote

        return usable_table(uri, remote.runs(uri))
    root = require_catalog(catalog)
    with locked(root, shared=True):
        return usable_table(root, read_runs(root))


def job_ranks(catalog: PathLike, run: str) -> list[int]:
    """The ranks run ``run`` of ``catalog`` holds (a job's), sorted; [] for a run that is no job,
    an ``OptionError`` where there is no such run."""
    if uri := object_uri(catalog):
        from tfprof.catalog import remote

        return run_ranks(_row(uri, usable_rows(uri, remote.runs(uri), [run]), run))
    root = require_catalog(catalog)
    with locked(root, shared=True):
        return run_ranks(_row(root, usable_rows(root, read_runs(root), [run]), run))


def match_runs(catalog: PathLike, pattern: str) -> list[str]:
    """The names of the runs matching glob ``pattern`` (``*``, ``?``, ``[...]``), sorted; an
    ``OptionError`` when none does."""
    names = runs(catalog).column("run").to_pylist()
    hit = sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))
    if not hit:
        raise OptionError(f"no run of the catalog `{catalog}` matches `{shown(pattern)}`; runs: "
                          f"{shown(', '.join(names), 400) or 'none'}")
    return hit


def readable_runs(catalog: PathLike, names: list[str]) -> list[str]:
    """Those of runs ``names`` (matched by a pattern: ``match_runs``) whose partition files pass
    every check a read makes (no link, size, Parquet tail, CRC-32: each file read once per
    process, as the read that follows would); each other one is left out with a
    ``CatalogWarning`` naming it, so that one damaged run does not stop an aggregate of the rest.
    A catalog in object storage reads each object of those runs whole to check it
    (``remote.readable_runs``), so an aggregate downloads them twice."""
    if uri := object_uri(catalog):
        from tfprof.catalog import remote

        root, (out, skipped) = uri, remote.readable_runs(uri, names)
    else:
        root = require_catalog(catalog)
        with locked(root, shared=True):
            out, skipped = _readable(root, names)
    warn_skipped(root, skipped)
    if not out:
        raise OptionError(f"no run of the catalog `{root}` that matches can be read; `tfprof check {root}` says why")
    return out


def _readable(root: Path, names: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """``readable_runs`` for a local catalog (its shared lock held): the runs that pass, and
    each other one with its problem."""
    out, skipped = [], []
    rows = usable_rows(root, read_runs(root), names)
    for run in names:
        entries = [e for e in _row(root, rows, run)["files"] if e["table"] in TABLES]
        try:
            checked: set[Path] = set()
            for entry in entries:
                partition_file(root, entry, checked)
            verify_partitions(root, entries)
        except UntrustedCatalog:
            raise
        except ProfileFormatError as exc:
            skipped.append((run, str(exc)))
            continue
        out.append(run)
    return out, skipped


def _row(root: PathLike, rows: list[dict], run: str) -> dict:
    return run_row(root, rows, run)


def _entries(root: Path, rows: list[dict], run: str, rank: int | None = None) -> tuple[dict, dict[str, dict]]:
    """Run ``run``'s row and its files by table: of rank ``rank`` for a job's run (which needs
    one), else its only ones."""
    row = _row(root, rows, run)
    return row, {f["table"]: f for f in rank_files(row, rank)}


def _hint(root: Path) -> str:
    return repair_hint(root)


def partition_file(root: Path, entry: dict, checked: set[Path] | None = None) -> Path:
    """The partition file of ``entry`` (of rows ``check_runs`` passed), reached without a link,
    its size and tail checked against the runs table."""
    file = no_links(root, entry["path"], checked=checked)
    hint = _hint(root)
    try:
        size = os.stat(file).st_size
    except FileNotFoundError:
        raise ProfileFormatError(f"`{file}` is missing from the catalog `{root}`; {hint}") from None
    if size != entry["bytes"]:
        raise ProfileFormatError(f"`{file}` is damaged ({size:,} bytes where the catalog wrote {entry['bytes']:,}); "
                                 f"{hint}")
    with open(file, "rb") as f:
        f.seek(max(size - 4, 0))
        if f.read(4) != b"PAR1":
            raise ProfileFormatError(f"`{file}` is damaged (not a complete Parquet file); {hint}")
    return file


def verify_partitions(root: Path, entries: list[dict]) -> None:
    """The CRC-32 of each entry's file (found by ``partition_file``), once per process."""
    verify_files([(root / e["path"], int(e["crc32"], 16)) for e in entries], lambda file: ProfileFormatError(
        f"`{file}` is damaged (its checksum differs from the one the catalog recorded); {_hint(root)}"))


def _read(file: Path, name: str, entry: dict) -> pa.Table:
    """Partition ``file`` (checked: ``partition_file``, ``verify_partitions``) as table ``name``."""
    try:
        table = pq.ParquetFile(file, memory_map=True).read()  # the file alone: no partition column
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ProfileFormatError(f"`{file}` is damaged ({exc})") from None
    if not table.schema.equals(TABLES[name].schema, check_metadata=False) or table.num_rows != entry["rows"]:
        raise ProfileFormatError(f"`{file}` does not hold the run's `{name}` table")
    return table


def run_profile(catalog: PathLike, run: str, rank: int | None = None) -> Profile:
    """Run ``run`` of ``catalog`` (rank ``rank`` of a job's run) as a ``Profile``: the same
    tables, hence the same views, as the profile it was ingested from.

    >>> import tempfile, tfprof
    >>> from tfprof.catalog import add_run, run_profile
    >>> cat = tempfile.mkdtemp() + "/cat"
    >>> _ = add_run(cat, "a", profile_path=tfprof.sample_path())
    >>> run_profile(cat, "a").row_counts()["nodes"]
    467
    """
    [prof] = member_profiles(catalog, [(run, rank)])
    return prof


def member_profiles(catalog: PathLike, members: list[tuple[str, int | None]]) -> Iterator[Profile]:
    """``run_profile(catalog, run, rank)`` for each (run, rank) of ``members``, one at a time,
    the runs table read and checked once (a job's row lists every rank's files: checking it per
    rank made a 1,000-rank job's ranks quadratic to read)."""
    for run, _ in members:
        check_name(run)
    if uri := object_uri(catalog):
        from tfprof.catalog import remote

        for run, rank in members:
            yield remote.run_profile(uri, run, rank)
        return
    root = require_catalog(catalog)
    with locked(root, shared=True):
        rows = usable_rows(root, read_runs(root), {run for run, _ in members})
        for run, rank in members:
            row, entries = _entries(root, rows, run, rank)
            checked: set[Path] = set()
            files = {name: partition_file(root, entries[name], checked) for name in TABLES if name in entries}
            verify_partitions(root, [entries[name] for name in files])  # all at once: on several threads when large
            tables = {name: _read(file, name, entries[name]) for name, file in files.items()}
            prof = Profile(tables, source=row["format"])
            prof.inputs = input_paths(profile_path=root)  # no output may land in the catalog
            yield prof


def partition_files(catalog: PathLike, names: list[str] | None = None) -> tuple[dict[str, list[Path]], dict]:
    """Per table, the partition files of runs ``names`` (every run that can be read when None:
    one whose row or partition files fail the checks is skipped with a warning), checked (not
    their CRC-32s: ``verify_tables``), and the entries of the runs table naming them; the
    caller holds the shared lock while it reads them."""
    root = require_catalog(catalog)
    rows = usable_rows(root, read_runs(root), names or ())
    chosen = [r["run"] for r in rows] if names is None else names
    out: dict[str, list[Path]] = {name: [] for name in TABLES}
    listed: dict[str, list[dict]] = {name: [] for name in TABLES}
    checked: set[Path] = set()
    skipped: list[tuple[str, str]] = []
    for run in chosen:
        entries = [e for e in _row(root, rows, run)["files"] if e["table"] in out]  # every rank's, for a job
        try:
            files = [partition_file(root, entry, checked) for entry in entries]
        except ProfileFormatError as exc:
            if names is not None or isinstance(exc, UntrustedCatalog):  # named, or a link: not one run's problem
                raise
            skipped.append((run, str(exc)))
            continue
        for entry, file in zip(entries, files):
            out[entry["table"]].append(file)
            listed[entry["table"]].append(entry)
    warn_skipped(root, skipped)
    return out, listed


def verify_tables(catalog: PathLike, listed: dict[str, list[dict]], con, query: str) -> None:
    """The CRC-32s of the partitions (``partition_files``' entries) of the tables ``query``
    names, before it runs on ``con``."""
    verify_partitions(Path(catalog), [e for name in tables_read(con, query) for e in listed[name]])


def sql(catalog: PathLike, query: str) -> pa.Table:
    """Run one read-only DuckDB query over every run of ``catalog``: each table is a view of its
    name over all runs' partitions with ``run``, ``host``, ``worker`` and ``rank`` columns (NULL
    where a run has no such tag or is no job), and ``runs`` is the runs table. The
    query goes through the SQL sandbox (``tfprof.sqlbox``): one statement, no file functions,
    and the connection reads only the catalog's listed files.

    >>> import tempfile, tfprof
    >>> from tfprof.catalog import add_run, sql
    >>> cat = tempfile.mkdtemp() + "/cat"
    >>> for r in ("a", "b"): _ = add_run(cat, r, profile_path=tfprof.sample_path())
    >>> sql(cat, "select run, count(*) n from nodes group by run order by run").to_pylist()
    [{'run': 'a', 'n': 467}, {'run': 'b', 'n': 467}]
    """
    from tfprof import sqlbox

    if uri := object_uri(catalog):
        from tfprof.catalog import remote

        return remote.sql(uri, query)
    root = require_catalog(catalog)
    with locked(root, shared=True):
        files, listed = partition_files(root)
        con = sqlbox.connect(_sources(root, files, listed))
        try:
            damaged = _damaged_runs(root, listed, tables_read(con, query))
            if damaged:  # read again without them: one damaged run never stops the others
                con.close()
                warn_skipped(root, list(damaged.items()))
                files, listed = _without(files, listed, set(damaged))
                con = sqlbox.connect(_sources(root, files, listed))
            rows = sqlbox.query(con, query)
        finally:
            con.close()
    return rows if rows is not None else pa.table({})


def _sources(root: Path, files: dict[str, list[Path]], listed: dict[str, list[dict]]) -> dict[str, object]:
    """What SQL over a catalog reads: each table over the partitions ``files`` (an empty table
    with the partition columns where there is none), and ``runs``: the rows of the runs read."""
    sources: dict[str, object] = {name: files[name] or with_run_column(name).empty_table() for name in TABLES}
    read = {_run_of(e["path"]) for entries in listed.values() for e in entries}
    table = read_runs(root)
    sources["runs"] = table.filter(pa.array([run in read for run in table.column("run").to_pylist()], pa.bool_()))
    return sources


def _damaged_runs(root: Path, listed: dict[str, list[dict]], names: list[str]) -> dict[str, str]:
    """The runs whose partitions of tables ``names`` fail their CRC-32 (``verify_partitions``),
    each with the first problem; the sound partitions are checked once per process as before."""
    entries = [e for name in names for e in listed.get(name, [])]
    try:
        verify_partitions(root, entries)  # all at once: on several threads when large
        return {}
    except ProfileFormatError:
        pass
    by_run: dict[str, list[dict]] = {}
    for entry in entries:
        by_run.setdefault(_run_of(entry["path"]), []).append(entry)
    damaged = {}
    for run, mine in by_run.items():
        try:
            verify_partitions(root, mine)
        except ProfileFormatError as exc:
            damaged[run] = str(exc)
    return damaged


def _run_of(rel: str) -> str:
    """The run a partition path (checked: ``<table>/run=<run>/...``) belongs to."""
    return Path(rel).parts[1].removeprefix("run=")


def _without(files: dict[str, list[Path]], listed: dict[str, list[dict]], runs: set[str]) -> tuple[dict, dict]:
    """``files`` and ``listed`` without the partitions of ``runs``."""
    out_files: dict[str, list[Path]] = {name: [] for name in files}
    out_listed: dict[str, list[dict]] = {name: [] for name in listed}
    for name in listed:
        for file, entry in zip(files[name], listed[name]):
            if _run_of(entry["path"]) not in runs:
                out_files[name].append(file)
                out_listed[name].append(entry)
    return out_files, out_listed

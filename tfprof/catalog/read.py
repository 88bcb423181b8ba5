"""Reading a catalog: its runs, one run as a ``Profile``, and every run at once for SQL.

Partition files are named by the runs table (``tfprof.catalog.layout``), never found by listing
folders. The runs table's names and paths are checked first (``tfprof.catalog.trust``), and
each file against it before it is read: reached without a link, its size, that it ends as a
Parquet file, its CRC-32 (once per process: ``tfprof.manifest.verify_files``), its schema.
SQL checks the CRC-32s of the tables a query names. Readers hold the catalog's shared lock
meanwhile, so a concurrent remove cannot take a file from under them.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tfprof.catalog.layout import check_name, locked, rank_files, read_runs, require_catalog, run_ranks, with_run_column
from tfprof.catalog.storage import object_uri
from tfprof.catalog.trust import check_runs, no_links, shown
from tfprof.errors import OptionError, ProfileFormatError
from tfprof.manifest import verify_files
from tfprof.output import PathLike, input_paths
from tfprof.profile import Profile, tables_read
from tfprof.schema import TABLES


def runs(catalog: PathLike) -> pa.Table:
    """The catalog's runs table (``tfprof.catalog.layout.RUNS_SCHEMA``), one row per run by name.

    >>> import tempfile, tfprof
    >>> from tfprof.catalog import add_run, runs
    >>> cat = tempfile.mkdtemp() + "/cat"
    >>> _ = add_run(cat, "a", tags=["host=h1"], profile_path=tfprof.sample_path())
    >>> runs(cat).select(["run", "format", "nodes"]).to_pylist()
    [{'run': 'a', 'format': 'profile', 'nodes': 467}]
    """
    if uri := object_uri(catalog):
        from tfprof.catalog import remote

        return remote.runs(uri)
    root = require_catalog(catalog)
    with locked(root, shared=True):
        return read_runs(root)


def job_ranks(catalog: PathLike, run: str) -> list[int]:
    """The ranks run ``run`` of ``catalog`` holds (a job's), sorted; [] for a run that is no job,
    an ``OptionError`` where there is no such run."""
    return run_ranks(_row(catalog, runs(catalog).to_pylist(), run))


def match_runs(catalog: PathLike, pattern: str) -> list[str]:
    """The names of the runs matching glob ``pattern`` (``*``, ``?``, ``[...]``), sorted; an
    ``OptionError`` when none does."""
    names = runs(catalog).column("run").to_pylist()
    hit = sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))
    if not hit:
        raise OptionError(f"no run of the catalog `{catalog}` matches `{shown(pattern)}`; runs: "
                          f"{shown(', '.join(names), 400) or 'none'}")
    return hit


def _row(root: PathLike, rows: list[dict], run: str) -> dict:
    mine = [r for r in rows if r["run"] == run]
    if not mine:
        names = [r["run"] for r in rows]
        raise OptionError(f"no run `{run}` in the catalog `{root}`; runs: {', '.join(names) or 'none'}")
    return mine[0]


def _entries(root: Path, rows: list[dict], run: str, rank: int | None = None) -> tuple[dict, dict[str, dict]]:
    """Run ``run``'s row and its files by table: of rank ``rank`` for a job's run (which needs
    one), else its only ones."""
    row = _row(root, rows, run)
    return row, {f["table"]: f for f in rank_files(row, rank)}


def _hint(root: Path) -> str:
    return f"remove the run (`tfprof runs {root} --remove NAME`) and add it again"


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
        rows = check_runs(root, read_runs(root))
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
    """Per table, the partition files of runs ``names`` (every run when None), checked (not
    their CRC-32s: ``verify_tables``), and the entries of the runs table naming them; the
    caller holds the shared lock while it reads them."""
    root = require_catalog(catalog)
    rows = check_runs(root, read_runs(root))
    chosen = [r["run"] for r in rows] if names is None else names
    out: dict[str, list[Path]] = {name: [] for name in TABLES}
    listed: dict[str, list[dict]] = {name: [] for name in TABLES}
    checked: set[Path] = set()
    for run in chosen:
        for entry in _row(root, rows, run)["files"]:  # every rank's, for a job
            if entry["table"] in out:
                out[entry["table"]].append(partition_file(root, entry, checked))
                listed[entry["table"]].append(entry)
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
        sources: dict[str, object] = {
            name: files[name] if files[name] else with_run_column(name).empty_table() for name in TABLES
        }
        sources["runs"] = read_runs(root)
        con = sqlbox.connect(sources)
        try:
            verify_tables(root, listed, con, query)
            rows = sqlbox.query(con, query)
        finally:
            con.close()
    return rows if rows is not None else pa.table({})

"""Checking a whole catalog (``tfprof check CATALOG``): the catalog's own entries, every row of
its runs table (``tfprof.catalog.trust``), and every partition file a run lists: reached
without a link, its size, its CRC-32 (read in full, not remembered), that it decodes with its
table's schema and the row count recorded. Every problem is named; nothing is changed.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tfprof.catalog.layout import STAGING, locked, read_runs, require_catalog
from tfprof.catalog.read import partition_file
from tfprof.catalog.storage import object_uri
from tfprof.catalog.trust import no_links, row_problems, shown, unlisted_files
from tfprof.errors import ProfileFormatError
from tfprof.manifest import crc32_of
from tfprof.output import PathLike
from tfprof.schema import TABLES


def check_catalog(catalog: PathLike, *, checksums: bool = True) -> dict:
    """What a full check of ``catalog`` finds: ``{"catalog", "problems", "runs": [{"run",
    "files", "errors", "warnings", "problems"}]}``, the catalog's own problems (its entries,
    links in its partition directories) and each run's (empty lists when all is well; "runs"
    is None when the run list cannot be read). With ``checksums`` off, files are checked by
    size only.

    >>> import tempfile, tfprof
    >>> from tfprof.catalog import add_run, check_catalog
    >>> cat = tempfile.mkdtemp() + "/cat"
    >>> _ = add_run(cat, "a", profile_path=tfprof.sample_path())
    >>> report = check_catalog(cat)
    >>> report["problems"], [(r["run"], r["problems"]) for r in report["runs"]]
    ([], [('a', [])])
    """
    if uri := object_uri(catalog):
        from tfprof.catalog import remote

        return remote.check_catalog(uri, checksums)
    root = require_catalog(catalog)
    report: dict = {"catalog": str(root), "problems": [], "runs": []}
    for name in (STAGING, *TABLES):
        _collect(report["problems"], lambda: no_links(root, name, directory=True))
    try:
        with locked(root, shared=True):  # (.lock and runs.parquet: no link either)
            rows = read_runs(root).to_pylist()
            seen: dict[str, str] = {}  # the paths listed so far, by run
            names: set[str] = set()
            report["runs"] = [_check_row(root, row, seen, names, checksums) for row in rows]
            _collect(report["problems"], lambda: unlisted_files(root, set(seen), list(TABLES)))  # links found on disk
    except ProfileFormatError as exc:
        report["problems"].append(getattr(exc, "problem", str(exc)))
        report["runs"] = None
    return report


def _check_row(root: Path, row: dict, seen: dict[str, str], names: set[str], checksums: bool) -> dict:
    """One run's entry of the report: the problems of its row (``seen`` and ``names``: what
    the rows above listed; updated), then of each of its partition files."""
    found = row_problems(row, seen, names)
    checked: set[Path] = set()
    for entry in row["files"] if not found else []:
        _collect(found, lambda: _check_partition(root, entry, checked, checksums))
    return {"run": shown(str(row["run"])), "files": len(row["files"] or []), "errors": row["errors"],
            "warnings": row["warnings"], "problems": found}


def _collect(problems: list[str], check) -> None:
    try:
        check()
    except ProfileFormatError as exc:
        problems.append(getattr(exc, "problem", str(exc)))


def _check_partition(root: Path, entry: dict, checked: set[Path], checksums: bool) -> None:
    """One partition file of a checked row: everything ``run_profile`` checks, its CRC-32 read
    in full, and its data decoded and validated."""
    file = partition_file(root, entry, checked)
    if not checksums:
        return
    if crc32_of(file) != int(entry["crc32"], 16):
        raise ProfileFormatError(f"`{file}` is damaged (its checksum differs from the one the catalog recorded)")
    name = entry["table"]
    try:
        table = pq.read_table(file, memory_map=True)
        table.validate(full=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ProfileFormatError(f"`{file}` is damaged ({shown(first)})") from None
    schema = TABLES[name].schema if name in TABLES else None
    if schema is None or not table.schema.equals(schema, check_metadata=False) or table.num_rows != entry["rows"]:
        raise ProfileFormatError(f"`{file}` does not hold the run's `{name}` table")
    del table


def damaged_runs(report: dict) -> list[str]:
    """The names of the runs with a problem."""
    return [r["run"] for r in report["runs"] if r["problems"]]


"""Adding a run to a catalog and removing one (``tfprof.catalog.layout`` says where the files go).

An add ingests the profile into a store under ``.staging/`` with no lock held (two adds ingest
at the same time), then, holding the catalog's exclusive lock, moves each table's file to its
partition under a fresh name and replaces the runs table: the commit. Until then nothing a
reader sees has changed; a writer that dies earlier leaves only unlisted files, which the next
writer deletes. An existing run name is refused unless ``force``; then the old partitions are
deleted after the new run list is in place.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import secrets
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tfprof.catalog.layout import (RUNS_SCHEMA, STAGING, check_levels, check_name, is_catalog, locked,
                                   partition_dir, read_runs, remove_files, remove_stale_staging, remove_unlisted,
                                   upgrade_layout, write_runs)
from tfprof.errors import OptionError, OutputError
from tfprof.ingest import Progress, iter_inputs
from tfprof.output import PathLike, input_paths
from tfprof.profile import Profile
from tfprof.schema import TABLES
from tfprof.store import read_manifest, write_store


def parse_tags(tags: list[str] | dict[str, str] | None) -> dict[str, str]:
    """``["k=v", ...]`` (the CLI's ``--tag``) or a dict as a dict of strings."""
    if isinstance(tags, dict):
        return {str(k): str(v) for k, v in tags.items()}
    out = {}
    for item in tags or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise OptionError(f"bad --tag `{item}`; the format is KEY=VALUE")
        out[key] = value
    return out


def _open_catalog(root: Path) -> None:
    """Create ``root`` as an empty catalog if it does not exist; refuse a directory that holds
    other things than a catalog (a catalog is never written into someone else's folder)."""
    if root.exists():
        if not root.is_dir():
            raise OutputError(f"`{root}` is a file, not a catalog directory")
        if not is_catalog(root) and any(p.name not in (".lock", STAGING) for p in root.iterdir()):
            raise OutputError(f"`{root}` is a directory that is not a tfprof catalog; give a new or empty directory")
    root.mkdir(parents=True, exist_ok=True)


def add_run(
    catalog: PathLike, run: str, *, tags: list[str] | dict[str, str] | None = None, force: bool = False,
    progress: Progress | None = None, profile: Profile | None = None, **given,
) -> dict:
    """Add the profile given by tfprof's input options (``profile_path=...``, ``graph_path=...``),
    or a ``Profile`` in memory (``profile``), to ``catalog`` as run ``run``; returns its row of
    the runs table as a dict.

    >>> import tempfile, tfprof
    >>> from tfprof.catalog import add_run
    >>> add_run(tempfile.mkdtemp() + "/cat", "night-1", profile_path=tfprof.sample_path())["nodes"]
    467
    """
    root = Path(catalog)
    check_name(run)
    tag_map = parse_tags(tags)
    check_levels(tag_map)
    inputs = input_paths(**given)
    clash = inputs.clash(root, directory=True)
    if clash:
        raise OutputError(f"the catalog `{root}` {clash}; choose another directory")
    _open_catalog(root)
    with locked(root):
        _refuse_existing(root, run, force)
    staging = root / STAGING
    staging.mkdir(exist_ok=True)
    token = secrets.token_hex(6)
    lock_fd = os.open(staging / f"{token}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    store = staging / f"{run}-{token}"
    try:
        source = _ingest(store, progress, given, profile)
        manifest = read_manifest(store)
        with locked(root):
            runs = upgrade_layout(root, read_runs(root))
            old = _refuse_existing(root, run, force, runs)
            remove_unlisted(root, runs, list(TABLES))
            row = _place(root, store, run, token, manifest, source, tag_map, inputs)
            kept = runs.filter(pc.not_equal(runs.column("run"), run)) if old else runs
            write_runs(root, pa.concat_tables([kept, pa.Table.from_pylist([row], RUNS_SCHEMA)]))
            remove_files(root, old)  # the replaced run's files, now listed nowhere
    finally:
        shutil.rmtree(store, ignore_errors=True)
        os.close(lock_fd)
        (staging / f"{token}.lock").unlink(missing_ok=True)
        remove_stale_staging(root)
    return row


def _refuse_existing(root: Path, run: str, force: bool, runs: pa.Table | None = None) -> list[str]:
    """The files of run ``run`` if it exists and ``force`` allows replacing it ([] if it does
    not exist); an ``OutputError`` if it exists without ``force``."""
    runs = read_runs(root) if runs is None else runs
    rows = [r for r in runs.select(["run", "files"]).to_pylist() if r["run"] == run]
    if rows and not force:
        raise OutputError(f"run `{run}` is already in the catalog `{root}`; pass --force to replace it "
                          "(Python: force=True)")
    return [f["path"] for r in rows for f in r["files"]]


def _ingest(store: Path, progress: Progress | None, given: dict, profile: Profile | None) -> str:
    """Write the inputs as a store without indexes at ``store``; returns the source format."""
    from tfprof.api.inputs import _source, load

    src = given.get("profile_path")
    if profile is not None:
        batches, source = [profile.tables()], profile.source
    elif src and Path(src).is_dir():
        prof = load(**given)
        batches, source = [prof.tables()], prof.source
    else:
        batches, source = iter_inputs(**given, progress=progress), _source(src)
    write_store(store, batches, source=source, indexes=None, inputs=input_paths(**given))
    return source


def _place(root: Path, store: Path, run: str, token: str, manifest: dict, source: str, tags: dict[str, str],
           inputs) -> dict:
    """Move the staged store's table files into their partitions; the run's row."""
    import pyarrow.parquet as pq

    files = []
    for table in TABLES:
        dest_dir = partition_dir(root, table, run, tags)
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / f"part-{token}.parquet"
        entry = manifest["files"][f"{table}.parquet"]
        os.replace(store / f"{table}.parquet", dest)
        files.append({"table": table, "path": dest.relative_to(root).as_posix(), "bytes": entry["size"],
                      "crc32": entry["crc32"], "rows": manifest["tables"][table]})
    validation = pq.read_table(partition_dir(root, "validation", run, tags) / f"part-{token}.parquet",
                               columns=["severity", "count"]).to_pylist()
    counts = {s: sum(r["count"] for r in validation if r["severity"] == s) for s in ("error", "warning")}
    return {
        "run": run, "tags": list(tags.items()), "source_file": ",".join(os.path.abspath(p) for p in inputs.paths + inputs.prefixes),
        "format": source, "ingested_at": datetime.datetime.now(datetime.timezone.utc),
        "nodes": manifest["tables"]["nodes"], "steps": manifest["tables"]["steps"],
        "errors": counts["error"], "warnings": counts["warning"], "files": files,
    }


def remove_run(catalog: PathLike, run: str) -> None:
    """Remove run ``run``: its row of the runs table (the commit), then its partition files and
    their directories, and nothing else."""
    from tfprof.catalog.layout import require_catalog

    root = require_catalog(catalog)
    with locked(root):
        runs = read_runs(root)
        names = runs.column("run").to_pylist()
        if run not in names:
            raise OptionError(f"no run `{run}` in the catalog `{root}`; runs: {', '.join(names) or 'none'}")
        old = [f["path"] for r in runs.select(["run", "files"]).to_pylist() if r["run"] == run for f in r["files"]]
        write_runs(root, runs.filter(pc.not_equal(runs.column("run"), run)))
        remove_files(root, old)

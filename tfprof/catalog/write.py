"""Adding a run to a catalog and removing one (``tfprof.catalog.layout`` says where the files go).

An add ingests the profile into a store under ``.staging/`` with no lock held (two adds ingest
at the same time), then, holding the catalog's exclusive lock, moves each table's file to its
partition under a fresh name and replaces the runs table: the commit. Until then nothing a
reader sees has changed; a writer that dies earlier leaves only unlisted files, which the next
writer deletes. An existing run name is refused unless ``force``; then the old partitions are
deleted after the new run list is in place. What the catalog holds is checked first
(``tfprof.catalog.trust``: the run list's names and paths, no links on the way), once before
the ingest and again under the lock, before any file is changed.

A row of the run list that fails those checks (a damaged or crafted run) never blocks a writer:
it is kept as it is, with a warning, and nothing it lists is touched; while there is one, files
no row lists are not cleaned up either (the damaged row may be the one that lost them).
Removing or replacing such a run deletes only the files that are its own partitions
(``trust.own_files``).
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
import pyarrow.parquet as pq

from tfprof.catalog.layout import (
    LOCK,
    RUNS_SCHEMA,
    STAGING,
    check_name,
    combined_row,
    is_catalog,
    layout_moves,
    locked,
    partition_dir,
    read_runs,
    remove_files,
    remove_stale_staging,
    upgrade_layout,
    write_runs,
)
from tfprof.catalog.storage import object_uri
from tfprof.catalog.trust import check_tags, no_links, own_files, split_rows, unlisted_files, warn_skipped
from tfprof.errors import OptionError, OutputError
from tfprof.ingest import Progress, iter_inputs
from tfprof.output import PathLike, input_paths
from tfprof.profile import Profile
from tfprof.schema import TABLES
from tfprof.store import read_manifest, write_store


def parse_tags(tags: list[str] | dict[str, str] | None) -> dict[str, str]:
    """``["k=v", ...]`` (the CLI's ``--tag``) or a dict as a dict of strings, checked
    (``tfprof.catalog.trust.check_tags``)."""
    if isinstance(tags, dict):
        out = {str(k): str(v) for k, v in tags.items()}
    else:
        out = {}
        for item in tags or []:
            key, eq, value = item.partition("=")
            if not eq or not key:
                from tfprof.catalog.trust import shown

                raise OptionError(f"bad --tag `{shown(item)}`; the format is KEY=VALUE")
            out[key] = value
    check_tags(out)
    return out


def _open_catalog(root: Path) -> None:
    """Create ``root`` as an empty catalog if it does not exist; refuse a directory that holds
    other things than a catalog (a catalog is never written into someone else's folder)."""
    if root.exists():
        if not root.is_dir():
            raise OutputError(f"`{root}` is a file, not a catalog directory")
        if not is_catalog(root) and any(p.name not in (LOCK, STAGING) for p in root.iterdir()):
            raise OutputError(f"`{root}` is a directory that is not a tfprof catalog; give a new or empty directory")
    root.mkdir(parents=True, exist_ok=True)


def add_run(
    catalog: PathLike, run: str, *, tags: list[str] | dict[str, str] | None = None, force: bool = False,
    progress: Progress | None = None, profile: Profile | None = None, **given,
) -> dict:
    """Add the profile given by tfprof's input options (``profile_path=...``, ``graph_path=...``),
    or a ``Profile`` in memory (``profile``), to ``catalog`` (a directory, or ``s3://bucket/prefix``:
    ``tfprof.catalog.remote``) as run ``run``; returns its row of the runs table as a dict.

    >>> import tempfile, tfprof
    >>> from tfprof.catalog import add_run
    >>> add_run(tempfile.mkdtemp() + "/cat", "night-1", profile_path=tfprof.sample_path())["nodes"]
    467
    """
    check_name(run)
    tag_map = parse_tags(tags)
    if uri := object_uri(catalog):  # in object storage: tfprof.catalog.remote
        from tfprof.catalog import remote

        return remote.add_members(uri, run, tag_map, force, progress, [(given, profile)], input_paths(**given),
                                  stage_inputs)
    return _add(Path(catalog), run, tag_map, force, [(given, profile)], input_paths(**given), progress, job=False)


def add_job(catalog: PathLike, run: str, paths: list, *, tags: list[str] | dict[str, str] | None = None,
            force: bool = False, progress: Progress | None = None) -> dict:
    """Add a distributed job's traces (files, directories of traces, glob patterns: one trace a
    rank, ``tfprof.ingest.job``) to ``catalog`` as run ``run``, each rank in its own partition
    (``rank=N``); returns the run's row, its files those of every rank. The traces are ingested
    into ``.staging`` one after another with no lock held, then placed and listed in one commit,
    as ``add_run`` does for one profile."""
    from tfprof.ingest.job import job_files
    from tfprof.output import Inputs

    check_name(run)
    tag_map = parse_tags(tags)
    traces = job_files(paths)
    members = [({"profile_path": trace}, None) for trace in traces]
    if uri := object_uri(catalog):  # in object storage: tfprof.catalog.remote
        from tfprof.catalog import remote

        return remote.add_members(uri, run, tag_map, force, progress, members, Inputs(traces, []), stage_inputs,
                                  rank_staged)
    return _add(Path(catalog), run, tag_map, force, members, Inputs(traces, []), progress, job=True)


def _add(root: Path, run: str, tags: dict[str, str], force: bool, members: list[tuple[dict, Profile | None]], inputs,
         progress: Progress | None, job: bool) -> dict:
    """Add ``members`` (each tfprof's input options, or a ``Profile``) as run ``run``: one
    profile, or with ``job`` a job's traces, a rank each (``tfprof.ingest.job.assign_ranks``).
    Each is staged, then all are placed and the runs table replaced under the lock."""
    clash = inputs.clash(root, directory=True)
    if clash:
        raise OutputError(f"the catalog `{root}` {clash}; choose another directory")
    for path in inputs.paths + inputs.prefixes:  # the run list keeps them as text
        _text_path(path)
    _open_catalog(root)
    with locked(root):
        _plan(root, run, tags, force, read_runs(root), warn=False)  # refused before the ingest: nothing made yet
    staging = root / STAGING
    staging.mkdir(exist_ok=True)
    token = secrets.token_hex(6)
    lock_fd = os.open(staging / f"{token}.lock", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    stores: list[tuple[Path, str]] = []
    try:
        for k, (given, profile) in enumerate(members):
            store = staging / f"{run}-{token}-{k}"
            stores.append((store, stage_inputs(store, None if job else progress, given, profile)))
            if job and progress:
                progress(k + 1, len(members), str(given["profile_path"]))
        stores, ranks = rank_staged(members, stores) if job else (stores, [None])
        with locked(root):
            runs = read_runs(root)
            rows, unlisted, moves = _plan(root, run, tags, force, runs, tuple(ranks))
            # everything is checked: from here on, act
            runs = upgrade_layout(root, rows, moves) or runs  # (its rows now name the new places)
            old = own_files(runs.to_pylist(), run)
            remove_files(root, [f.relative_to(root).as_posix() for f in unlisted])
            placed: list[dict] = []
            try:
                for (store, source), rank in zip(stores, ranks):
                    placed.append(_place(root, store, run, token, read_manifest(store), source, tags, inputs, rank))
                row = combined_row(placed)
                kept = runs.filter(pc.not_equal(runs.column("run"), run))
                write_runs(root, pa.concat_tables([kept, pa.Table.from_pylist([row], RUNS_SCHEMA)]))
            except BaseException:  # not committed: what was placed goes, the catalog stays as it was
                remove_files(root, [f["path"] for p in placed for f in p["files"]])
                raise
            remove_files(root, old)  # the replaced run's files, now listed nowhere
    finally:
        for store, _ in stores:
            shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(staging / f"{run}-{token}-{len(stores)}", ignore_errors=True)  # one cut short while staged
        os.close(lock_fd)
        (staging / f"{token}.lock").unlink(missing_ok=True)
        remove_stale_staging(root)
    return row


def _text_path(path: Path) -> None:
    """Refuse an input path that is not UTF-8 text: the run list keeps it as a string."""
    try:
        os.path.abspath(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise OptionError(f"`{shown}`: the file's name is not UTF-8 text, which a catalog's run list keeps; "
                          "rename it") from None


def rank_staged(members: list[tuple[dict, Profile | None]], stores: list[tuple[Path, str]]) -> tuple[list, list]:
    """A job's staged stores (``members``' traces, staged in that order) in rank order, and their
    ranks (``tfprof.ingest.job.assign_ranks``, from each trace's ``info`` table and path)."""
    from tfprof.ingest.job import assign_ranks

    facts = []
    for (given, _), (store, _) in zip(members, stores, strict=True):
        info = pq.read_table(store / "info.parquet").to_pylist()[0]
        facts.append((Path(given["profile_path"]), info.get("rank"), info.get("world_size"), info.get("host")))
    index = {fact[0]: k for k, fact in enumerate(facts)}
    ranked = assign_ranks(facts)
    return [stores[index[src.path]] for src in ranked], [src.rank for src in ranked]


def _plan(root: Path, run: str, tags: dict[str, str], force: bool, runs: pa.Table, ranks: tuple = (None,), *,
          warn: bool = True):
    """Everything adding run ``run`` will touch, checked, before anything is: the runs table's
    rows (``trust.split_rows``: a damaged one is kept as it is, with a warning unless ``warn``
    is off) and the files the sound ones list (an existing run is an ``OutputError`` without
    ``force``), the unlisted files to delete, the moves of the run-only layout, and the
    new partitions' directories, ``.staging`` and ``.lock``, none of them reached through a link.
    ``ranks``: the job's ranks the run will hold (None: a run that is no job). Returns (rows,
    the unlisted files, the moves)."""
    rows, bad = split_rows(runs)
    if any(r["run"] == run for r in rows) and not force:
        raise OutputError(f"run `{run}` is already in the catalog `{root}`; pass --force to replace it "
                          "(Python: force=True)")
    if warn:
        warn_skipped(root, [(str(rows[k]["run"]), problem) for k, problem in bad.items()], kept=True)
    good = [row for k, row in enumerate(rows) if k not in bad]
    listed = {f["path"] for row in good for f in row["files"]}
    checked: set[Path] = set()
    for rel in sorted(listed | set(own_files(rows, run))):
        no_links(root, rel, checked=checked)
    no_links(root, STAGING, directory=True)
    no_links(root, LOCK)
    for table in TABLES:
        for rank in ranks:
            no_links(root, partition_dir(root, table, run, tags, rank).relative_to(root).as_posix(), directory=True,
                     checked=checked)
    moves = layout_moves(root, good)
    keep = listed | {new for _old, new in moves}  # a move's target left by an upgrade cut short is kept
    # with a damaged row, an unlisted file may be one it lost: nothing is cleaned up meanwhile
    return rows, ([] if bad else unlisted_files(root, keep, list(TABLES))), moves


def stage_inputs(store: Path, progress: Progress | None, given: dict, profile: Profile | None) -> str:
    """Write the inputs as a store without indexes at ``store``; returns the source format."""
    from tfprof.api.inputs import load, profile_source

    src = given.get("profile_path")
    if profile is not None:
        batches, source = [profile.tables()], profile.source
    elif src and Path(src).is_dir():
        prof = load(**given)
        batches, source = [prof.tables()], prof.source
    else:
        batches, source = iter_inputs(**given, progress=progress), profile_source(src)
    write_store(store, batches, source=source, indexes=None, inputs=input_paths(**given))
    return source


def _place(root: Path, store: Path, run: str, token: str, manifest: dict, source: str, tags: dict[str, str],
           inputs, rank: int | None = None) -> dict:
    """Move the staged store's table files into their partitions (of rank ``rank`` in a job);
    the run's row."""
    import pyarrow.parquet as pq

    files = []
    for table in TABLES:
        dest_dir = partition_dir(root, table, run, tags, rank)
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / f"part-{token}.parquet"
        entry = manifest["files"][f"{table}.parquet"]
        os.replace(store / f"{table}.parquet", dest)
        files.append({"table": table, "path": dest.relative_to(root).as_posix(), "bytes": entry["size"],
                      "crc32": entry["crc32"], "rows": manifest["tables"][table]})
    validation = pq.read_table(partition_dir(root, "validation", run, tags, rank) / f"part-{token}.parquet",
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

    check_name(run)
    if uri := object_uri(catalog):
        from tfprof.catalog import remote

        return remote.remove_run(uri, run)
    root = require_catalog(catalog)
    with locked(root):
        runs = read_runs(root)
        rows, _bad = split_rows(runs)  # a damaged run can be removed, and beside one any other
        names = [r["run"] for r in rows]
        if run not in names:
            from tfprof.catalog.trust import shown

            raise OptionError(f"no run `{run}` in the catalog `{root}`; runs: {shown(', '.join(names), 400) or 'none'}")
        old = own_files(rows, run)  # what a damaged row lists beyond its own partitions stays
        checked: set[Path] = set()
        for rel in old:
            no_links(root, rel, checked=checked)
        write_runs(root, runs.filter(pc.not_equal(runs.column("run"), run)))
        remove_files(root, old)

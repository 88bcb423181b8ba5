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
after the commit. Reading: ``tfprof.catalog.remote_read`` (its functions are importable from
here too).

A row of the run list that fails the local catalog's checks (``tfprof.catalog.trust``: a
damaged or crafted run, a name listed twice) never blocks a writer: it is kept as it is, with a
warning, and nothing it lists is deleted; while there is one, objects no row lists are not
cleaned up either (the damaged row may be the one that lost them). Removing or replacing such
a run deletes only the objects that are its own partitions (``trust.own_files``).
"""

from __future__ import annotations

import datetime
import os
import re
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tfprof.catalog.layout import RUNS, RUNS_SCHEMA, combined_row, partition_dir
from tfprof.catalog.remote_read import (  # noqa: F401 - the readers, also used as remote.*
    check_catalog,
    download,
    open_catalog,
    readable_runs,
    run_profile,
    run_tables,
    runs,
    runs_table,
    sql,
)
from tfprof.catalog.storage import LOCK_KEY, ObjectStore, PreconditionFailed
from tfprof.catalog.trust import own_files, shown, split_rows, warn_skipped
from tfprof.errors import InputNotFoundError, OptionError, OutputError
from tfprof.ingest import Progress
from tfprof.profile import Profile
from tfprof.schema import TABLES
from tfprof.store import read_manifest

# a partition object tfprof writes (the rank level's layout, or an older one): only these are
# ever deleted as a dead writer's leftovers
_PART_KEY = re.compile(r"[a-z][a-z0-9_]{0,63}/run=[^/]+(/host=[^/]+/worker=[^/]+(/rank=[^/]+)?)?"
                       r"/part-[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.parquet")


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
    _plan(store, run, force, runs_table(store, found and found[0]), warn=False)  # refused before the ingest
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
            table = runs_table(store, found and found[0])
            rows, listed = _plan(store, run, force, table)
            for key in store.list() if listed is not None else []:  # a dead writer's uploads: listed nowhere
                if _PART_KEY.fullmatch(key) and key.split("/", 1)[0] in TABLES and key not in listed:
                    store.delete(key)
            old = own_files(rows, run)  # what a damaged row lists beyond its own partitions stays
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


def _plan(store: ObjectStore, run: str, force: bool, table: pa.Table, *, warn: bool = True
          ) -> tuple[list[dict], set[str] | None]:
    """The run list ``table``'s rows (``trust.split_rows``: a damaged one is kept as it is, with a
    warning unless ``warn`` is off) and the objects the sound ones list, None while there is a
    damaged one (then nothing unlisted is deleted: it may be what that row lost); an existing
    run is an ``OutputError`` without ``force``."""
    rows, bad = split_rows(table)
    if any(r["run"] == run for r in rows) and not force:
        raise OutputError(f"run `{run}` is already in the catalog `{store.uri}`; pass --force to replace it "
                          "(Python: force=True)")
    if warn:
        warn_skipped(store.uri, [(str(rows[k]["run"]), problem) for k, problem in bad.items()], kept=True)
    return rows, None if bad else {f["path"] for r in rows for f in r["files"]}


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
        table = runs_table(store, found[0])
        rows, _bad = split_rows(table)  # a damaged run can be removed, and beside one any other
        names = [r["run"] for r in rows]
        if run not in names:
            raise OptionError(f"no run `{run}` in the catalog `{uri}`; runs: {shown(', '.join(names), 400) or 'none'}")
        old = own_files(rows, run)  # what a damaged row lists beyond its own partitions stays
        lock.confirm()
        try:
            store.put(RUNS, _serialise(table.filter(pc.not_equal(table.column("run"), run))), if_match=found[1])
        except PreconditionFailed:
            raise OutputError(f"the catalog `{uri}` was changed by another writer during this remove; nothing "
                              "was changed: run the command again") from None
        for key in old:
            store.delete(key)

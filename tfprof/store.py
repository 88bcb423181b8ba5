"""The Parquet store: one ``<table>.parquet`` per table, the indexes as Arrow IPC files under
``indexes/``, and a ``tfprof_store.json`` manifest listing every file with its size and CRC-32
(``tfprof.manifest``: reading it, checking sizes and checksums).

A store is written into a temporary sibling directory and swapped in when complete
(``tfprof.output.new_directory``): an interrupted write leaves nothing behind, an existing
store stays intact until then, and only a directory that is wholly a store is ever replaced.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tfprof.errors import OutputError, ProfileFormatError, TfprofError
from tfprof.malloc import trim_memory, tune_malloc  # noqa: F401 - also used as tfprof.store.*
from tfprof.manifest import (  # noqa: F401 - the constants and read_manifest are also used as tfprof.store.*
    INDEX_FORMAT,
    INDEX_SUFFIX,
    INDEXES_DIR,
    MANIFEST,
    STORE_FORMAT,
    Checksums,
    check_tails,
    checksum_error,
    crc32_of,
    has_checksums,
    listed_files,
    read_manifest,
    recreate_hint,
    store_files,
    stored_tables,
    table_file,
    undecodable,
    verify_store_files,
)
from tfprof.output import Inputs, PathLike, new_directory
from tfprof.schema import TABLES


@contextlib.contextmanager
def _system_allocator() -> Iterator[None]:
    """Arrow allocates from the C library's malloc meanwhile, and what malloc keeps free at the
    end goes back to the system: Arrow's default pool keeps the memory of dropped batches for
    reuse, which for a store written batch by batch holds on to the largest few batches' worth
    long after they are gone."""
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(previous)
        trim_memory()


# Writes a store's indexes into the folder of a store being written: (folder, the profile's
# source, the tables' row counts, a function to call with each file once it is closed) -> the
# manifest's entry (index name -> parts). ``tfprof.api.inputs.write_indexes`` is the one.
IndexWriter = Callable[[Path, str, dict[str, int], Callable[[Path], None]], dict[str, list[str]]]


def write_store(
    path: PathLike,
    batches: Iterable[dict[str, pa.Table]],
    *,
    source: str = "profile",
    indexes: IndexWriter | None = None,
    force: bool = False,
    inputs: Inputs | None = None,
) -> Path:
    """Write batches of tables (see ``tfprof.ingest.iter_inputs``) as a store at ``path``,
    with the indexes ``indexes`` writes (none without it: views then build them when used).

    Everything is written into a temporary sibling directory first and moved into place at the
    end (``tfprof.output.new_directory``), so an interrupted write never leaves a half-written
    store and an existing store stays intact until the new one is complete. An existing
    ``path`` is replaced only with ``force``, and only if it is a store holding nothing but its
    own files; ``inputs`` are never written over.
    """
    dest = Path(path)
    try:
        with new_directory(dest, force=force, inputs=inputs, owned=store_files, what="--out",
                           kind="tfprof store") as tmp:
            with _system_allocator():
                counts = _write_tables(tmp, batches)
            sums = Checksums(tmp)
            try:
                for name in TABLES:
                    sums.add(tmp / f"{name}.parquet")
                manifest = {"format": STORE_FORMAT, "source": source, "tables": counts}
                (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
                if indexes is not None:
                    with _system_allocator():
                        manifest["indexes"] = indexes(tmp, source, counts, sums.add)
                    manifest["index_format"] = INDEX_FORMAT
            finally:
                sums.close()
            manifest["files"] = sums.result()
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")  # last: the store is complete
    except TfprofError:  # already said as it should be (a missing input is an OSError too)
        raise
    except OSError as exc:
        raise OutputError(f"cannot write the store `{dest}`: {exc.strerror or exc}") from None
    return dest


def verify_store(path: PathLike, *, checksums: bool) -> None:
    """Check store ``path``: the manifest and every file's size (as opening does) and, with
    ``checksums``, every file's CRC-32, then that every table decodes with its schema and row
    count and every index part decodes to valid Arrow. Raises ``ProfileFormatError`` naming the
    first damaged file; returns None when all is well. A store written before checksums were
    recorded (``has_checksums`` false) gets the decoding checks only."""
    path = Path(path)
    manifest = read_manifest(path)
    if not checksums:
        return
    for rel, (_size, crc) in sorted(listed_files(path, manifest).items()):
        if crc32_of(path / rel) != crc:
            raise checksum_error(path, path / rel)
    for name in stored_tables(manifest):
        file = path / f"{name}.parquet"
        try:
            table = pq.read_table(table_file(path, name), memory_map=True)
            table.validate(full=True)
        except (pa.ArrowException, OSError, ValueError) as exc:  # ValueError: e.g. a footer's text not UTF-8
            raise undecodable(path, file, exc) from None
        fields = [(f.name, f.type) for f in table.schema]
        if fields != [(f.name, f.type) for f in TABLES[name].schema] or table.num_rows != manifest["tables"][name]:
            raise ProfileFormatError(f"`{file}` does not hold the store's `{name}` table; {recreate_hint(path)}")
        del table
    if manifest.get("index_format") == INDEX_FORMAT:
        for name, parts in manifest.get("indexes", {}).items():
            for part in parts:
                _read_ipc(path, path / INDEXES_DIR / name / f"{part}{INDEX_SUFFIX}", validate=True)


def read_index(path: Path, name: str) -> dict | None:
    """Index ``name`` of store ``path`` as {part: polars DataFrame}, or None if it has none (or
    has it in an older layout); its files' checksums are checked first (once per process)."""
    import polars as pl

    manifest = read_manifest(path)
    parts = manifest.get("indexes", {}).get(name)
    if parts is None or manifest.get("index_format", 1) != INDEX_FORMAT:
        return None
    verify_store_files(path, [f"{INDEXES_DIR}/{name}/{part}{INDEX_SUFFIX}" for part in parts])
    return {part: pl.from_arrow(_read_ipc(path, path / INDEXES_DIR / name / f"{part}{INDEX_SUFFIX}")) for part in parts}


def _read_ipc(store: Path, file: Path, *, validate: bool = False) -> pa.Table:
    """An index part (memory-mapped: no copy); a file that does not decode is named as damaged."""
    try:
        with pa.memory_map(str(file)) as source:
            table = pa.ipc.open_file(source).read_all()
        if validate:
            table.validate(full=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise undecodable(store, file, exc) from None
    return table


def write_ipc(path: Path, table: pa.Table) -> None:
    """``table`` as an uncompressed Arrow IPC file."""
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _writer(folder: Path, name: str) -> pq.ParquetWriter:
    """A Parquet writer for table ``name``: lz4, dictionary encoding only for dictionary columns
    (trying it on every int64 column doubles the encoding time for nothing), min/max statistics
    only for numeric columns (what a scan can skip row groups on; over strings they cost as much
    as the encoding itself)."""
    schema = TABLES[name].schema
    dict_cols = [f.name for f in schema if pa.types.is_dictionary(f.type)]
    stats = [f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
             or pa.types.is_boolean(f.type)]
    return pq.ParquetWriter(folder / f"{name}.parquet", schema, compression="lz4", use_dictionary=dict_cols,
                            write_statistics=stats)


def _write_tables(folder: Path, batches: Iterable[dict[str, pa.Table]]) -> dict[str, int]:
    """Write each batch's tables as row groups, on a second thread while the next batch decodes.

    Parquet encoding releases the GIL, so decoding batch i+1 and writing batch i overlap; the
    queue holds at most two batches, which bounds memory.
    """
    writers: dict[str, pq.ParquetWriter] = {}
    counts = dict.fromkeys(TABLES, 0)
    pending: queue.Queue = queue.Queue(maxsize=2)
    failure: list[BaseException] = []

    def write_all() -> None:
        try:
            while (batch := pending.get()) is not None:
                for name, table in batch.items():
                    w = writers.get(name)
                    if w is None:
                        w = writers[name] = _writer(folder, name)
                    w.write_table(table)
                    counts[name] += table.num_rows
        except BaseException as exc:  # surfaced in the caller's thread below
            failure.append(exc)
            while pending.get() is not None:  # drain so the producer never blocks
                pass

    writer = threading.Thread(target=write_all, name="tfprof-store-writer", daemon=True)
    writer.start()
    try:
        for batch in batches:
            if failure:
                break
            pending.put(batch)
    finally:
        pending.put(None)
        writer.join()
        try:
            if not failure:
                for name in TABLES:
                    if name not in writers:
                        writers[name] = _writer(folder, name)
        finally:
            for w in writers.values():
                w.close()
    if failure:
        raise failure[0]
    return counts

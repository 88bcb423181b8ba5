"""The Parquet store: one ``<table>.parquet`` per table, the indexes as Arrow IPC files under
``indexes/``, and a ``tfprof_store.json`` manifest."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tfprof.errors import InputNotFoundError, OutputError, ProfileFormatError, TfprofError
from tfprof.ingest import PathLike, Progress, iter_inputs
from tfprof.schema import TABLES

MANIFEST = "tfprof_store.json"
INDEXES_DIR = "indexes"  # sub-directory of a store holding frames derived at ingest
STORE_FORMAT = 1
# Version of the indexes' layout: a store whose indexes have another version has them rebuilt
# on first use (the tables are unchanged, so the store stays readable).
INDEX_FORMAT = 3  # 3: Arrow IPC files (2: Parquet)
# Index parts are uncompressed Arrow IPC files: a view maps them and reads them without a copy
# (a few ms where Parquet took 10-20 at 70k nodes; 0.3 GB less at the peak of a 7M-node code
# view than Parquet, 0.4 GB less than lz4-compressed IPC), for about three times the disk.
INDEX_SUFFIX = ".arrow"


def read_manifest(path: Path) -> dict:
    """The manifest of store ``path``; a one-line error if ``path`` is not a store."""
    if not path.exists():
        raise InputNotFoundError(f"`{path}` does not exist; check the path")
    if not path.is_dir():
        raise ProfileFormatError(f"`{path}` is not a store directory")
    mf = path / MANIFEST
    if not mf.is_file():
        raise ProfileFormatError(
            f"`{path}` is a directory but not a tfprof store (no {MANIFEST}); "
            "create one with `tfprof ingest ... --out DIR`"
        )
    try:
        manifest = json.loads(mf.read_text())
        tables = manifest["tables"]
        fmt = manifest["format"]
    except (ValueError, KeyError, TypeError):
        raise ProfileFormatError(f"`{mf}` is damaged; re-create the store with `tfprof ingest`") from None
    if fmt != STORE_FORMAT:
        raise ProfileFormatError(f"`{path}` is a store of format {fmt}; this tfprof reads format {STORE_FORMAT}")
    missing = [name for name in TABLES if name not in tables or not (path / f"{name}.parquet").is_file()]
    if missing:
        raise ProfileFormatError(f"`{path}` is an incomplete store (missing {', '.join(missing)}); re-create it")
    return manifest


@contextlib.contextmanager
def _system_allocator() -> Iterator[None]:
    """Arrow allocates from the C library's malloc meanwhile, and what malloc keeps free at the
    end goes back to the system: Arrow's default pool keeps the memory of dropped batches for
    reuse, which for a store written batch by batch holds on to the largest few batches' worth
    long after they are gone."""
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    _map_large_blocks()
    try:
        yield
    finally:
        pa.set_memory_pool(previous)
        _trim()


def _libc():
    """glibc (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 - both must exist
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number
_MMAP_THRESHOLD = 4 << 20


def _map_large_blocks() -> None:
    """Have malloc serve every block of 4 MiB or more with its own mapping, unmapped when freed.
    By default glibc raises that threshold to the size of the largest block freed so far (up to
    32 MiB), after which a batch's columns come from the heap, and their memory stays with the
    process when they are dropped (about 15 MB more peak RSS for a 70k-node profile). A lower
    threshold saves a little more memory but costs more time in page faults."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)


def _trim() -> None:
    """Return the free memory malloc holds (in every thread's arena) to the system: batches
    decoded on several threads leave tens of MB there otherwise."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def write_store(
    path: PathLike, batches: Iterable[dict[str, pa.Table]], *, source: str = "profile", indexes: bool = True
) -> Path:
    """Write batches of tables (see ``tfprof.ingest.iter_inputs``) as a store at ``path``,
    with the profile's indexes (``tfprof.queries.indexes``) unless ``indexes`` is false.

    Everything is written into a temporary sibling directory first and moved into place at the
    end, so an interrupted write never leaves a half-written store, and an existing directory is
    only replaced when it is itself a store.
    """
    dest = Path(path)
    if dest.exists():
        if not dest.is_dir():
            raise OutputError(f"`{dest}` exists and is not a directory; choose another --out")
        if any(dest.iterdir()) and not (dest / MANIFEST).is_file():
            raise OutputError(f"`{dest}` is a non-empty directory that is not a tfprof store; choose another --out")
    parent = dest.absolute().parent
    if not parent.is_dir():
        raise OutputError(f"`{parent}` does not exist; create it first or choose another --out")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=parent))
    except OSError as exc:
        raise OutputError(f"cannot write in `{parent}`: {exc.strerror or exc}") from None
    try:
        with _system_allocator():
            counts = _write_tables(tmp, batches)
        manifest = {"format": STORE_FORMAT, "source": source, "tables": counts}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if indexes:
            with _system_allocator():
                manifest["indexes"] = _write_indexes(tmp, source, counts)
            manifest["index_format"] = INDEX_FORMAT
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=parent))
            os.replace(dest, old / "store")
            os.replace(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dest)
    except TfprofError:  # already said as it should be (a missing input is an OSError too)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OutputError(f"cannot write the store `{dest}`: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


# Below this many rows of the tables the indexes read most, they are built on two threads at
# once; above, one after the other (each then has all the memory: a 7M-node profile's code trie
# alone needs a few GB).
_PARALLEL_INDEX_ROWS = 20_000_000


def _write_indexes(folder: Path, source: str, counts: dict[str, int]) -> dict[str, list[str]]:
    """Build the indexes of the tables just written to ``folder`` and save them under
    ``indexes/<name>/<part>.arrow`` (Arrow IPC); returns the manifest entry (index name → parts).

    Each index is written and let go as soon as it is built. A small profile's are built on two
    threads (their kernels release the GIL): the code trie on one, the others on the other.
    """
    from concurrent.futures import ThreadPoolExecutor

    from tfprof.profile import Profile
    from tfprof.queries.indexes import INDEXES

    prof = Profile(store=folder, source=source)

    def build(names: list[str]) -> dict[str, list[str]]:
        written = {}
        for name in names:
            parts = INDEXES[name](prof)
            if parts is None:
                continue
            (folder / INDEXES_DIR / name).mkdir(parents=True)
            for part, table in parts.items():
                _write_ipc(folder / INDEXES_DIR / name / f"{part}{INDEX_SUFFIX}", table)
            written[name] = list(parts)
            del parts, table  # one index per thread in memory at a time
            _trim()
        return written

    if sum(counts.get(t, 0) for t in ("nodes", "execs", "memory", "code_frames")) > _PARALLEL_INDEX_ROWS:
        done = build(list(INDEXES))
    else:
        with ThreadPoolExecutor(2, thread_name_prefix="tfprof-index") as pool:
            jobs = [pool.submit(build, ["code_trie"]), pool.submit(build, [n for n in INDEXES if n != "code_trie"])]
            done = {}
            for job in jobs:
                done.update(job.result())
    return {name: done[name] for name in INDEXES if name in done}


def warm_up() -> None:
    """Load the compiled kernels an ingest runs (the decoder's and the indexes') from numba's
    cache, by ingesting the bundled sample profile in memory: numba's start in a process takes
    about 0.3 s, then a few milliseconds per kernel."""
    from tfprof import sample_path
    from tfprof.profile import Profile
    from tfprof.queries.indexes import INDEXES

    prof = Profile.from_inputs(profile_path=sample_path())
    for build in INDEXES.values():
        build(prof)


def read_index(path: Path, name: str) -> dict | None:
    """Index ``name`` of store ``path`` as {part: polars DataFrame}, or None if it has none (or
    has it in an older layout)."""
    import polars as pl

    manifest = read_manifest(path)
    parts = manifest.get("indexes", {}).get(name)
    if parts is None or manifest.get("index_format", 1) != INDEX_FORMAT:
        return None
    out = {}
    for part in parts:
        with pa.memory_map(str(path / INDEXES_DIR / name / f"{part}{INDEX_SUFFIX}")) as source:
            out[part] = pl.from_arrow(pa.ipc.open_file(source).read_all())
    return out


def _write_ipc(path: Path, table: pa.Table) -> None:
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


def ingest_to_store(out: PathLike, *, progress: Progress | None = None, **inputs) -> tuple[Path, dict[str, int]]:
    """Ingest tfprof inputs straight into a store, batch by batch; returns (path, row counts)."""
    src = inputs.get("profile_path")
    if src and Path(src).is_dir():
        from tfprof.profile import Profile

        prof = Profile.from_inputs(**inputs)
        batches, source = [prof.tables()], prof.source
    else:
        batches = iter_inputs(**inputs, progress=progress)
        source = "profile" if src else "run_metadata"
    dest = write_store(out, batches, source=source)
    return dest, read_manifest(dest)["tables"]


def write_text(path: PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (a temporary sibling renamed into place)."""
    return write_bytes(path, text.encode())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_bytes(path: PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: a failed write leaves no partial file behind."""
    dest = Path(path)
    parent = dest.absolute().parent
    if not parent.is_dir():
        raise OutputError(f"`{parent}` does not exist; create it first or choose another outfile")
    if dest.is_dir():
        raise OutputError(f"`{dest}` is a directory; choose a file name for outfile")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=parent)
    except OSError as exc:
        raise OutputError(f"cannot write in `{parent}`: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a plain open() would follow the umask
        os.replace(tmp, dest)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(f"cannot write `{dest}`: {exc.strerror or exc}") from None
    return dest

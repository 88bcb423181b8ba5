"""A store's manifest (``tfprof_store.json``): reading it, the files it lists, and checking the
store's files against it.

The manifest's ``files`` entry records each file of the store (tables, index parts, anything
written there) with its size in bytes and its CRC-32. Opening a store checks every size (one
``stat`` a file); ``tfprof.store.verify_store(path, checksums=True)`` (``tfprof check``) also
recomputes the checksums. Damage of any kind (a file missing, truncated or resized, a checksum
that differs, a file that does not decode, a damaged manifest) is a ``ProfileFormatError``
naming the file and saying how to re-create the store. A store written before files were
listed (no ``files`` entry) opens as before: it cannot be verified, which is not damage.

Why CRC-32 (``zlib.crc32``): the checksum is there to catch accidents (a truncated copy, a
disk or transfer error, a file replaced by another), not an adversary, and for that a 32-bit
CRC beside the exact size is enough. It is also the fastest hash the standard library offers
everywhere: over the 43 MB of a 70k×5 store, 33 ms against 38 for SHA-256 (and that only with
the CPU's SHA instructions; two to three times slower without them) and 71 for BLAKE2b. The
store writer computes it on a thread of its own while the indexes are built, each file read
back through a memory map right after it is closed (still in the page cache).

Ownership: a directory is a store, ours to replace, only if it has a manifest and holds no
file the manifest does not list (``store_files``).
"""

from __future__ import annotations

import json
import mmap
import os
import queue
import stat
import threading
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from tfprof.errors import InputNotFoundError, ProfileFormatError, TfprofError
from tfprof.schema import TABLES

MANIFEST = "tfprof_store.json"
INDEXES_DIR = "indexes"  # sub-directory of a store holding frames derived at ingest
STORE_FORMAT = 1
# Version of the indexes' layout: a store whose indexes have another version has them rebuilt
# on first use (the tables are unchanged, so the store stays readable).
INDEX_FORMAT = 4  # 4: foreign time means in ns; 3: Arrow IPC files (2: Parquet)
# Index parts are uncompressed Arrow IPC files: a view maps them and reads them without a copy
# (a few ms where Parquet took 10-20 at 70k nodes; 0.3 GB less at the peak of a 7M-node code
# view than Parquet, 0.4 GB less than lz4-compressed IPC), for about three times the disk.
INDEX_SUFFIX = ".arrow"


def recreate_hint(path: Path) -> str:
    return f"re-create the store with `tfprof ingest <inputs> --out {path} --force`"


def missing_file(store: Path, file: Path) -> ProfileFormatError:
    """The error for a file of ``store`` that is not there."""
    return ProfileFormatError(f"`{file}` is missing from the store `{store}`; {recreate_hint(store)}")


# Manifests already read and checked in this process, by the manifest file's identity: a view
# reads the manifest several times (open, row counts, each index), and its files' sizes need
# checking once. A store written again has a new manifest file (another inode, which the file
# system may give a new file once the old one is deleted: the ctime, which nobody sets, tells
# them apart).
_CHECKED: dict[tuple, dict] = {}


# Tables the schema gained after stores of this format were first written. A store whose
# manifest does not list one was written before it existed: it reads as empty, not as damaged
# (``tfprof check`` says so; ingesting again fills it).
LATER_TABLES = ("validation", "trace_events", "counters", "flows", "node_flops", "kernels")


def stored_tables(manifest: dict) -> list[str]:
    """The tables store ``manifest`` holds files of: every table but those it predates."""
    return [n for n in TABLES if n in manifest["tables"] or n not in LATER_TABLES]


def read_manifest(path: Path) -> dict:
    """The manifest of store ``path`` (a copy: do not rely on changing it); a one-line error if
    ``path`` is not a store, or if a file the manifest lists is missing or has another size
    than it says (checked on the first read in a process)."""
    path = Path(path)
    try:
        st = os.stat(path / MANIFEST)
        key = (str(path.absolute()), st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    except OSError:
        key = None
    if key in _CHECKED:
        return dict(_CHECKED[key])
    manifest = _check_manifest(path)
    if key is not None:
        if len(_CHECKED) > 64:
            _CHECKED.clear()
        _CHECKED[key] = manifest
    return dict(manifest)


def identity(path: str | os.PathLike) -> tuple | None:
    """What tells one generation of a profile's files at ``path`` from any other, in a few cheap
    calls (two ``stat`` and one read of a few KB for a store, one ``stat`` for a file); None when
    nothing is there. A store: its directory's device, inode and modification time (files added,
    removed or renamed there change it) and its manifest's device, inode, size, modification and
    change times and CRC-32 (the manifest lists every file with its checksum, so it names the
    store's contents). A file (a trace, a ProfileProto): its device, inode, size, modification
    and change times. A store written again, moved away with another put in its place, or a file
    rewritten in place gives another value; reading gives the same one."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # unreadable now: not the generation that was read
        return ("unreadable", exc.errno)
    if not stat.S_ISDIR(st.st_mode):
        return ("file", st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    try:  # (os.open, not open(): this runs before every read from a store, so it is kept short)
        fd = os.open(os.path.join(path, MANIFEST), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ("store", st.st_dev, st.st_ino, st.st_mtime_ns, None)
    try:
        m = os.fstat(fd)
        crc = 0
        while chunk := os.read(fd, 1 << 16):
            crc = zlib.crc32(chunk, crc)
    except OSError:
        return ("store", st.st_dev, st.st_ino, st.st_mtime_ns, None)
    finally:
        os.close(fd)
    manifest = (m.st_dev, m.st_ino, m.st_size, m.st_mtime_ns, m.st_ctime_ns, crc)
    return ("store", st.st_dev, st.st_ino, st.st_mtime_ns, manifest)


def _check_manifest(path: Path) -> dict:
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
        manifest = json.loads(mf.read_bytes())
        tables = manifest["tables"]
        fmt = manifest["format"]
        if not isinstance(tables, dict) or not all(isinstance(n, int) for n in tables.values()):
            raise TypeError
    except (ValueError, KeyError, TypeError):  # UnicodeDecodeError is a ValueError
        # without a manifest nothing says which files are the store's: --force would refuse it
        raise ProfileFormatError(
            f"`{mf}` is damaged; remove `{path}` and re-create the store with `tfprof ingest <inputs> --out {path}`"
        ) from None
    except OSError as exc:
        raise ProfileFormatError(f"`{mf}` cannot be read: {exc.strerror or exc}") from None
    if fmt != STORE_FORMAT:
        raise ProfileFormatError(f"`{path}` is a store of format {fmt}; this tfprof reads format {STORE_FORMAT}")
    listed = listed_files(path, manifest)
    missing = [name for name in stored_tables(manifest) if name not in tables or
               (f"{name}.parquet" not in listed and not (path / f"{name}.parquet").is_file())]
    if missing:
        if "files" in manifest and all(f"{name}.parquet" in manifest["files"] for name in missing):
            raise missing_file(path, path / f"{missing[0]}.parquet")
        raise ProfileFormatError(
            f"`{path}` is an incomplete store (missing {', '.join(missing)}); {recreate_hint(path)}"
        )
    for rel, (size, _crc) in listed.items():
        try:
            actual = os.stat(path / rel).st_size
        except FileNotFoundError:
            raise missing_file(path, path / rel) from None
        except OSError as exc:
            raise ProfileFormatError(f"`{path / rel}` cannot be read: {exc.strerror or exc}") from None
        if actual != size:
            raise ProfileFormatError(
                f"`{path / rel}` is damaged ({actual:,} bytes where the store wrote {size:,}); {recreate_hint(path)}"
            )
    return manifest


def listed_files(path: Path, manifest: dict) -> dict[str, tuple[int, int]]:
    """The manifest's ``files`` as {relative path: (size, crc32)}; {} for a store written
    before files were listed. Entries that cannot be right make the manifest damaged."""
    files = manifest.get("files")
    if files is None:
        return {}
    damaged = ProfileFormatError(f"`{path / MANIFEST}` is damaged (its file list); {recreate_hint(path)}")
    if not isinstance(files, dict):
        raise damaged
    out = {}
    for rel, entry in files.items():
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts or not pure.parts or rel == MANIFEST:
            raise damaged
        try:
            size, crc = entry["size"], int(entry["crc32"], 16)
        except (KeyError, TypeError, ValueError):
            raise damaged from None
        if not isinstance(size, int) or size < 0:
            raise damaged
        out[rel] = (size, crc)
    expected = [f"{t}.parquet" for t in manifest["tables"]]  # (a table added since is not damage)
    if manifest.get("index_format") == INDEX_FORMAT:
        expected += [_index_part(name, part) for name, parts in manifest.get("indexes", {}).items() for part in parts]
    if any(rel not in out for rel in expected):
        raise damaged
    return out


def _index_part(name: str, part: str, suffix: str = INDEX_SUFFIX) -> str:
    return f"{INDEXES_DIR}/{name}/{part}{suffix}"


def store_files(path: Path) -> set[str] | None:
    """The files (relative POSIX paths) that make up store ``path``, manifest included, or None
    if ``path`` has no readable manifest (it is not a store): those its manifest lists, and the
    tables and index parts it names, in any layout a store has had (a store written before
    files were listed has only those)."""
    try:
        manifest = json.loads((path / MANIFEST).read_bytes())
        tables = manifest["tables"]
        listed = manifest.get("files")
        indexes = manifest.get("indexes", {})
        files = {MANIFEST} | (set(listed) if isinstance(listed, dict) else set())
        # and what a store of any version writes, should the file list be absent or damaged
        files |= {f"{name}.parquet" for name in tables}
        files |= {_index_part(n, p, sfx) for n, parts in indexes.items() for p in parts
                  for sfx in (".arrow", ".parquet")}
        return {f for f in files if isinstance(f, str)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def has_checksums(path: str | os.PathLike) -> bool:
    """Whether store ``path`` records its files' checksums (stores written before did not)."""
    return isinstance(read_manifest(Path(path)).get("files"), dict)


def undecodable(store: Path, file: Path, exc: BaseException) -> ProfileFormatError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, FileNotFoundError):
        return missing_file(store, file)
    return ProfileFormatError(f"`{file}` is damaged ({first}); {recreate_hint(store)}")


def table_file(store: Path, name: str) -> Path:
    """The Parquet file of table ``name`` in ``store``, after a cheap check that it ends as a
    Parquet file does (``check_tail``)."""
    file = store / f"{name}.parquet"
    check_tail(store, file)
    return file


# The last bytes of a complete file of each kind: Parquet ends with its footer's length and
# "PAR1", an Arrow IPC file with "ARROW1".
_TAILS = {".parquet": b"PAR1", ".arrow": b"ARROW1"}


def check_tail(store: Path, file: Path) -> None:
    """One read of the last bytes of ``file``: a file cut short or replaced by other bytes of
    the same size is reported by name here, not as a decoding error deep inside a query."""
    magic = _TAILS[file.suffix]
    try:
        with open(file, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(size - 8, 0))
            tail = f.read(8)
    except OSError as exc:
        raise undecodable(store, file, exc) from None
    ok = tail.endswith(magic)
    if ok and magic == b"PAR1":
        ok = 0 < int.from_bytes(tail[:4], "little") <= size - 12
    if not ok:
        kind = "Parquet" if magic == b"PAR1" else "Arrow IPC"
        raise ProfileFormatError(f"`{file}` is damaged (not a complete {kind} file); {recreate_hint(store)}")


def check_tails(path: Path, manifest: dict) -> None:
    """``check_tail`` of every table and index part of store ``path`` (about 20 small reads)."""
    files = [path / f"{name}.parquet" for name in stored_tables(manifest)]
    if manifest.get("index_format") == INDEX_FORMAT:
        files += [path / _index_part(n, p) for n, parts in manifest.get("indexes", {}).items() for p in parts]
    for file in files:
        check_tail(path, file)


def checksum_error(store: Path, file: Path) -> ProfileFormatError:
    return ProfileFormatError(f"`{file}` is damaged (its checksum differs from the one written); {recreate_hint(store)}")


def verify_store_files(path: Path, rels: Iterable[str]) -> None:
    """Check files ``rels`` (relative paths) of store ``path`` against the CRC-32s its manifest
    records, each once per process (``verify_files``); a file the manifest does not list (a
    store written before checksums were recorded) is not checked."""
    listed = listed_files(path, read_manifest(path))
    verify_files([(path / rel, listed[rel][1]) for rel in rels if rel in listed], lambda f: checksum_error(path, f))


# Files whose CRC-32 was found as recorded in this process: (path, device, inode, size, mtime,
# ctime, crc). A file written again, even in place, has another mtime and ctime.
_VERIFIED: set[tuple] = set()
_PARALLEL_BYTES = 32 << 20  # below this in all, the files are checked on the calling thread


def verify_files(files: list[tuple[Path, int]], damaged: Callable[[Path], TfprofError]) -> None:
    """Raise ``damaged(file)`` for the first ``(file, crc32)`` of ``files`` whose CRC-32 is not
    ``crc32``. Files already found as recorded in this process are skipped; the others are read
    on up to 8 threads at once (``zlib.crc32`` releases the GIL)."""
    todo = []
    for file, crc in files:
        try:
            st = os.stat(file)
        except OSError:
            raise damaged(file) from None
        key = (str(Path(file).absolute()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, crc)
        if key not in _VERIFIED:
            todo.append((file, key, st.st_size))
    if not todo:
        return
    workers = min(len(todo), os.cpu_count() or 1, 8)
    if workers > 1 and sum(size for *_, size in todo) > _PARALLEL_BYTES:
        with ThreadPoolExecutor(workers, thread_name_prefix="tfprof-verify") as pool:
            sums = list(pool.map(lambda item: _crc_or_none(item[0]), todo))
    else:
        sums = [_crc_or_none(file) for file, *_ in todo]
    for (file, key, _size), crc in zip(todo, sums):
        if crc != key[-1]:
            raise damaged(file)
        if len(_VERIFIED) > 100_000:  # a long-lived process (the resident server) forgets, and checks again
            _VERIFIED.clear()
        _VERIFIED.add(key)


def _crc_or_none(file: Path) -> int | None:
    try:
        return crc32_of(file)
    except OSError:
        return None


def crc32_of(file: Path) -> int:
    """CRC-32 of a file, read through a memory map (no copy; zlib releases the GIL)."""
    with open(file, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return 0
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return zlib.crc32(m)


class Checksums:
    """Sizes and CRC-32s of files, computed on a thread of their own as files are handed in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: dict[str, dict] = {}
        self._queue: queue.Queue = queue.Queue()
        self._failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="tfprof-store-checksums", daemon=True)
        self._thread.start()

    def add(self, file: Path) -> None:
        self._queue.put(file)

    def _run(self) -> None:
        while (file := self._queue.get()) is not None:
            try:
                rel = file.relative_to(self.root).as_posix()
                self.done[rel] = {"size": file.stat().st_size, "crc32": f"{crc32_of(file):08x}"}
            except BaseException as exc:  # raised in the caller's thread by result()
                self._failure.append(exc)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def result(self) -> dict[str, dict]:
        """Every file under the root (those not handed in are done now), by relative path."""
        self.close()
        if self._failure:
            raise self._failure[0]
        for file in sorted(self.root.rglob("*")):
            rel = file.relative_to(self.root).as_posix()
            if file.is_file() and rel != MANIFEST and rel not in self.done:
                self.done[rel] = {"size": file.stat().st_size, "crc32": f"{crc32_of(file):08x}"}
        return dict(sorted(self.done.items()))

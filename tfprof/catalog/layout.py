"""A catalog's files on disk: where each run's partitions live, the ``runs`` table that lists
them, and the lock that serialises writers.

::

    DIR/
      runs.parquet                          one row per run (RUNS_SCHEMA); the commit point
      nodes/run=<name>/host=<h>/worker=<w>/rank=<r>/part-<token>.parquet
                                            one Parquet dataset per table, hive-partitioned by
      execs/run=<name>/host=<h>/worker=<w>/rank=<r>/part-<token>.parquet   run, host, worker
      ...                                                                   and rank
      .lock                                 flock: writers exclusive, readers shared
      .staging/                             runs being ingested (each with a flocked <token>.lock)

Host and worker come from the run's ``host`` and ``worker`` tags; a run without one has
Hive's default partition there (``host=__HIVE_DEFAULT_PARTITION__``), which DuckDB and Spark
read as NULL, so every table has the same levels and partition discovery works on both. A run
of a distributed job holds one set of files per rank (``rank=0``, ``rank=1``, ...); any other
run has the default partition as its rank.
What a catalog holds is exactly what ``runs.parquet`` lists: every reader takes the file names
from it (never from a directory listing), so a partition written but not yet listed, or one
left behind by a writer that died, is invisible. ``runs.parquet`` is replaced atomically
(temporary sibling and rename), so an add or a remove becomes visible at once or not at all.
Each partition's file name carries a random token, so a run replaced with ``--force`` gets new
files beside the old ones and the old ones are deleted only after the new list is in place.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pyarrow as pa
import pyarrow.parquet as pq

from tfprof.errors import InputNotFoundError, OptionError, ProfileFormatError
from tfprof.output import PathLike, write_file
from tfprof.schema import TABLES

RUNS = "runs.parquet"
LOCK = ".lock"
STAGING = ".staging"
PARTITION = "run"  # the first hive partition key: every cross-run table gains it, and host, worker and rank
LEVELS = ("run", "host", "worker", "rank")  # the partition keys, in directory order
NO_VALUE = "__HIVE_DEFAULT_PARTITION__"  # a level a run has no value for (read as NULL)

RUNS_SCHEMA = pa.schema([
    pa.field("run", pa.string(), False, metadata={"doc": "the run's name (unique in the catalog)"}),
    pa.field("tags", pa.map_(pa.string(), pa.string()), metadata={"doc": "the --tag k=v pairs given when it was added"}),
    pa.field("source_file", pa.string(), metadata={"doc": "the input paths it was ingested from, comma-separated"}),
    pa.field("format", pa.string(), metadata={"doc": "profile, run_metadata, kineto or xspace"}),
    pa.field("ingested_at", pa.timestamp("us", tz="UTC"), metadata={"doc": "when it was added"}),
    pa.field("nodes", pa.int64(), metadata={"doc": "rows of its nodes table"}),
    pa.field("steps", pa.int64(), metadata={"doc": "rows of its steps table"}),
    pa.field("errors", pa.int64(), metadata={"doc": "validation findings of severity error"}),
    pa.field("warnings", pa.int64(), metadata={"doc": "validation findings of severity warning"}),
    pa.field("files", pa.list_(pa.struct([
        pa.field("table", pa.string()), pa.field("path", pa.string()),
        pa.field("bytes", pa.int64()), pa.field("crc32", pa.string()), pa.field("rows", pa.int64()),
    ])), metadata={"doc": "its partitions: table, path relative to the catalog, size, CRC-32, row count"}),
])

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_TOKEN_LOCK = re.compile(r"[0-9a-f]{6,64}\.lock")  # a writer's lock in .staging (its token: hex digits)


def check_name(name: str, what: str = "run name") -> str:
    """``name`` if it can name a run, host or worker (a hive partition directory), else an
    ``OptionError`` (the name shown with control characters escaped)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        from tfprof.ingest.sources import one_line

        raise OptionError(f"bad {what} `{one_line(str(name))}`: use letters, digits, `.`, `_` and `-` (at most 128, "
                          "not starting with `.`, `_` or `-`)")
    return name


def partition_dir(root: Path, table: str, run: str, tags: dict[str, str] | None = None, rank: int | None = None) -> Path:
    """Where table ``table`` of run ``run`` (its rank ``rank`` in a job) lives:
    ``run=/host=/worker=/rank=`` (host and worker from ``tags``, the default partition where
    absent or not a job)."""
    tags = {**(tags or {}), "rank": NO_VALUE if rank is None else str(rank)}
    return root.joinpath(table, f"{PARTITION}={run}", *(f"{k}={tags.get(k, NO_VALUE)}" for k in LEVELS[1:]))


def run_ranks(row: dict) -> list[int]:
    """The ranks a run of the runs table holds (a job's), sorted; [] for a run that is no job."""
    return sorted({r for f in row["files"] if (r := rank_of(f["path"])) is not None})


def rank_files(row: dict, rank: int | None) -> list[dict]:
    """The files of run ``row`` to read: rank ``rank``'s of a job (which needs one), else all
    of them; an ``OptionError`` saying which ranks there are."""
    run, ranks = row["run"], run_ranks(row)
    if rank is None and len(ranks) > 1:
        raise OptionError(f"run `{run}` is a job of {len(ranks)} ranks ({ranks[0]}-{ranks[-1]}): give --rank R for one "
                          "of them, or --aggregate sum|mean|max for all")
    if rank is not None and rank not in ranks:
        raise OptionError(f"run `{run}` has no rank {rank}; its ranks: "
                          f"{', '.join(map(str, ranks)) if ranks else 'none (it is no job)'}")
    return row["files"] if rank is None else [f for f in row["files"] if rank_of(f["path"]) == rank]


def combined_row(placed: list[dict]) -> dict:
    """One run's row of the runs table from the rows of its members (a job's ranks): the
    first's, with every member's files and their counts summed."""
    return {**placed[0], "files": [f for p in placed for f in p["files"]],
            **{k: sum(p[k] for p in placed) for k in ("nodes", "steps", "errors", "warnings")}}


def rank_of(rel: str) -> int | None:
    """The rank in a partition file's path (``.../rank=3/part-...``), None where it has none."""
    for part in PurePosixPath(rel).parts:
        if part.startswith("rank=") and part[5:].isdigit():
            return int(part[5:])
    return None


def with_run_column(name: str) -> pa.Schema:
    """Table ``name``'s schema with the partition columns (run, host, worker, rank) last, as a
    dataset of runs reads."""
    schema = TABLES[name].schema
    for level in LEVELS:
        schema = schema.append(pa.field(level, pa.string()))
    return schema


class UntrustedCatalog(ProfileFormatError):
    """What makes a catalog unusable (``tfprof.catalog.trust``): ``problem`` says what, the
    message also what to do."""

    def __init__(self, root: Path, problem: str) -> None:
        super().__init__(f"the catalog `{root}` cannot be used: {problem}; nothing was changed (restore the "
                         f"catalog from a copy you trust; `tfprof check {root}` lists every problem)")
        self.problem = problem


LINKED = "is a symbolic link (a catalog holds none: it could lead outside it)"


def no_links(root: Path, rel: str, *, directory: bool = False, checked: set[Path] | None = None) -> Path:
    """``root / rel`` once no part of it below ``root`` is found to be a symbolic link, and it
    is a regular file (with ``directory``, a directory) or absent; ``checked`` remembers the
    directories already looked at. A violation is a ``ProfileFormatError`` naming the entry."""
    checked = set() if checked is None else checked
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).is_absolute() or ".." in parts:  # (the run list's paths are checked before)
        raise UntrustedCatalog(root, f"`{rel}` is not a path inside the catalog")
    path = root
    for i, part in enumerate(parts):
        path = path / part
        last = i == len(parts) - 1
        if not last and path in checked:
            continue
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return root / rel
        except OSError as exc:
            raise ProfileFormatError(f"`{path}` in the catalog `{root}` cannot be read: {exc.strerror or exc}") from None
        if stat.S_ISLNK(mode):
            raise UntrustedCatalog(root, f"`{path}` {LINKED}")
        if not (stat.S_ISDIR(mode) if not last or directory else stat.S_ISREG(mode)):
            kind = "directory" if not last or directory else "file"
            raise UntrustedCatalog(root, f"`{path}` is not a {kind}")
        if not last:
            checked.add(path)
    return root / rel


def layout_moves(root: Path, rows: list[dict]) -> list[tuple[str, str]]:
    """For a catalog written before host, worker or rank were partition levels
    (``run=<name>/part-*``, ``run=/host=/worker=/part-*``): each such file's (old, new) path,
    relative; datasets of mixed depths cannot be read as one. ``rows`` were checked
    (``tfprof.catalog.trust.check_runs``); the new places are checked here."""
    moves = []
    for row in rows:
        tags = dict(row["tags"] or [])
        for entry in row["files"]:
            if "/rank=" not in entry["path"]:
                new = partition_dir(root, entry["table"], row["run"], tags) / Path(entry["path"]).name
                moves.append((entry["path"], no_links(root, new.relative_to(root).as_posix()).relative_to(root).as_posix()))
    return moves


def upgrade_layout(root: Path, rows: list[dict], moves: list[tuple[str, str]]) -> pa.Table | None:
    """Apply ``moves`` (``layout_moves``): each file is linked at its new place, the new runs
    table written (the commit), then the old names unlinked; returns the new table (None when
    there was nothing to move). Called with the exclusive lock held."""
    if not moves:
        return None
    new_of = dict(moves)
    for old, new in moves:
        (root / new).parent.mkdir(parents=True, exist_ok=True)
        if not (root / new).exists():
            os.link(root / old, root / new)
    for row in rows:
        for entry in row["files"]:
            entry["path"] = new_of.get(entry["path"], entry["path"])
    table = pa.Table.from_pylist(rows, RUNS_SCHEMA)
    write_runs(root, table)
    remove_files(root, list(new_of))
    return table


def is_catalog(root: Path) -> bool:
    return os.path.lexists(root / RUNS)  # (a link there is refused when read)


def require_catalog(root: PathLike) -> Path:
    """``root`` as a Path if it is a catalog, else a one-line error saying how to make one."""
    root = Path(root)
    if not root.exists():
        raise InputNotFoundError(f"`{root}` does not exist; add a run with `tfprof ingest --catalog {root} --run NAME P`")
    if not is_catalog(root):
        raise ProfileFormatError(f"`{root}` is not a tfprof catalog (no {RUNS}); add a run with "
                                 f"`tfprof ingest --catalog {root} --run NAME PROFILE`")
    return root


def read_runs(root: Path) -> pa.Table:
    """The runs table (empty with its schema where the catalog has none yet); its rows are not
    checked here (``tfprof.catalog.trust.check_runs`` does)."""
    file = no_links(root, RUNS)
    if not file.exists():
        return RUNS_SCHEMA.empty_table()
    try:
        table = pq.ParquetFile(file).read()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ProfileFormatError(f"`{file}` is damaged ({exc}); the catalog's run list cannot be read") from None
    if not table.schema.equals(RUNS_SCHEMA, check_metadata=False):
        raise ProfileFormatError(f"`{file}` is not a tfprof runs table")
    return table


def write_runs(root: Path, table: pa.Table) -> None:
    """Replace the runs table atomically (a temporary sibling renamed over it)."""
    buffer = io.BytesIO()
    pq.write_table(table.cast(RUNS_SCHEMA).sort_by("run"), buffer, compression="zstd")
    write_file(root / RUNS, buffer.getvalue(), force=True, what="runs table")


@contextlib.contextmanager
def locked(root: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold the catalog's lock: exclusive for a writer, shared for a reader (a reader then
    never sees a partition removed under it)."""
    if shared and not os.path.lexists(root / LOCK):  # a catalog nobody has written yet through this version
        yield
        return
    flags = os.O_RDONLY if shared else os.O_RDWR | os.O_CREAT  # (a reader's flock needs no write access)
    try:  # never through a link: the lock must be the catalog's own
        fd = os.open(root / LOCK, flags | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UntrustedCatalog(root, f"`{root / LOCK}` {LINKED}") from None
        raise ProfileFormatError(f"`{root / LOCK}` cannot be opened: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def listed_files(runs: pa.Table) -> set[str]:
    """Every partition path (relative) that ``runs`` lists."""
    return {f["path"] for files in runs.column("files").to_pylist() for f in files}


def remove_files(root: Path, paths: list[str]) -> None:
    """Unlink the partition files at ``paths`` (relative to ``root``, listed nowhere now, and
    checked: ``tfprof.catalog.trust``; a replaced or removed run's, or those a writer that died
    left unlisted: ``trust.unlisted_files``) and the directories they leave empty; called with
    the exclusive lock held."""
    for rel in paths:
        (root / rel).unlink(missing_ok=True)
        remove_empty_dirs((root / rel).parent, root / Path(rel).parts[0])


def remove_empty_dirs(leaf: Path, top: Path) -> None:
    """Remove ``leaf`` and its parents below ``top`` while they are empty."""
    while leaf != top and top in leaf.parents:
        try:
            leaf.rmdir()
        except OSError:  # not empty (or gone)
            return
        leaf = leaf.parent


def remove_stale_staging(root: Path) -> None:
    """Delete what writers that died left in ``.staging``: a writer holds ``<token>.lock`` while
    it ingests, so a lock that can be taken at once belongs to nobody, and so do the entries
    named with its token. Nothing is followed: a ``.staging`` that is a link is left alone,
    as is any link in it."""
    import shutil

    staging = root / STAGING
    if not staging.is_dir() or staging.is_symlink():
        return
    for lock in staging.glob("*.lock"):
        if not _TOKEN_LOCK.fullmatch(lock.name):
            continue
        try:
            fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        token = lock.stem
        for leftover in staging.iterdir():
            if f"-{token}" in leftover.name and leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
        lock.unlink(missing_ok=True)
        os.close(fd)


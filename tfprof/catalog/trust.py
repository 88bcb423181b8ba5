"""What a catalog may name. A catalog is shared and synced between people, so what is read from
it is data, never trusted: every path ``runs.parquet`` lists must be a partition file of its own
run (``<table>/run=<run>/host=<h>/worker=<w>/rank=<r>/part-<token>.parquet``, or the older
layouts' ``<table>/run=<run>/host=<h>/worker=<w>/part-<token>.parquet`` and
``<table>/run=<run>/part-<token>.parquet``), relative, without ``..``, listed once, and reached
without a symbolic link; the catalog's own entries (``runs.parquet``, ``.lock``, ``.staging``,
the table folders and partition directories) are never symbolic links either
(``tfprof.catalog.layout.no_links``). A violation is a ``ProfileFormatError`` naming the entry.
Writers check everything first and then act, so a violation leaves every file as it was.

Run names, tag keys and tag values with a control character are refused when given, and what
is read back is shown with control characters escaped (``shown``), so an error stays one line
and a listing one row per run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

import pyarrow as pa

from tfprof.catalog.layout import LEVELS, LINKED, NO_VALUE, RUNS, UntrustedCatalog, check_name, no_links, partition_dir
from tfprof.errors import OptionError
from tfprof.ingest.sources import one_line as shown

_TABLE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_PART = re.compile(r"part-[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.parquet")
_CRC = re.compile(r"[0-9a-f]{8}")
_RANK = re.compile(rf"rank=(\d{{1,9}}|{NO_VALUE})")


def check_text(value: object, what: str) -> str:
    """``value`` if it is a string without control characters, else an ``OptionError``."""
    if not isinstance(value, str) or not value.isprintable():
        raise OptionError(f"bad {what} `{shown(str(value))}`: control characters are not allowed")
    return value


def check_tags(tags: dict[str, str]) -> None:
    """Refuse a tag whose key is empty or whose key or value holds a control character, and a
    ``host`` or ``worker`` tag that cannot name a partition directory."""
    for key, value in tags.items():
        if not key:
            raise OptionError(f"bad --tag `={shown(value)}`: the format is KEY=VALUE")
        check_text(key, "--tag key")
        check_text(value, f"--tag {shown(key)}")
        if key == "rank":
            raise OptionError("--tag rank: a run's ranks come from a job's traces (tfprof ingest --catalog DIR --run JOB "
                              "TRACES_DIR), not from a tag")
        if key in LEVELS[1:]:
            check_name(value, f"--tag {key}")


def row_problems(row: dict, seen: dict[str, str], names: set[str]) -> list[str]:
    """What is wrong with one row of the runs table (``seen``: the paths listed so far, by the
    run listing them; ``names``: the runs named so far; both updated); [] when it may be used."""
    found = _entry_problems(row, seen)
    if not found and row["run"] in names:
        found = [f"{RUNS} lists run `{row['run']}` twice"]
    names.add(row["run"])
    return found


def _entry_problems(row: dict, seen: dict[str, str]) -> list[str]:
    run = row.get("run")
    try:
        check_name(run)
    except OptionError:
        return [f"{RUNS} lists a run named `{shown(str(run))}`, which no run may be named"]
    tags = dict(row.get("tags") or [])
    try:
        check_tags(tags)
    except OptionError as exc:
        return [f"run `{run}` has a {str(exc).removeprefix('bad ')}"]
    out = []
    for entry in row.get("files") or []:
        rel = entry.get("path") if isinstance(entry, dict) else None
        if not _is_partition(rel, entry.get("table") if rel else None, run, tags):
            out.append(f"run `{run}` lists `{shown(str(rel))}`, which is not one of its partition files in the catalog")
        elif rel in seen:
            out.append(f"run `{run}` lists `{rel}`, which run `{seen[rel]}` lists too")
        elif not (isinstance(entry.get("bytes"), int) and entry["bytes"] >= 0 and isinstance(entry.get("rows"), int)
                  and isinstance(entry.get("crc32"), str) and _CRC.fullmatch(entry["crc32"])):
            out.append(f"run `{run}` has a damaged entry for `{rel}` (its size, rows or CRC-32)")
        else:
            seen[rel] = run
    return out


def _is_partition(rel: object, table: object, run: str, tags: dict[str, str]) -> bool:
    """Whether ``rel`` is a path of a partition file of table ``table`` of run ``run`` (with
    its host and worker tags, or in the run-only layout)."""
    if not isinstance(rel, str) or not isinstance(table, str) or not _TABLE.fullmatch(table):
        return False
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).as_posix() != rel or len(parts) not in (3, 5, 6) or not _PART.fullmatch(parts[-1]):
        return False
    folder = partition_dir(Path(), table, run, tags).parts  # table, run=, host=, worker=, rank=
    if len(parts) == 6:  # any rank of the run
        return list(parts[:4]) == list(folder[:4]) and _RANK.fullmatch(parts[4]) is not None
    return list(parts[:-1]) == list(folder[:4] if len(parts) == 5 else folder[:2])


def check_runs(root: Path, runs: pa.Table) -> list[dict]:
    """The rows of the runs table ``runs`` as dicts, once every name, tag and listed path is
    found usable (``row_problems``); the first problem is a ``ProfileFormatError``."""
    rows = runs.to_pylist()
    seen: dict[str, str] = {}
    names: set[str] = set()
    for row in rows:
        if problems := row_problems(row, seen, names):
            raise UntrustedCatalog(root, problems[0])
    return rows


def unlisted_files(root: Path, listed: set[str], tables: list[str]) -> list[Path]:
    """The partition files on disk that no run lists (a writer died after placing them): only
    ``part-*.parquet`` files in ``run=*/host=*/worker=*/rank=*`` (and the older layouts'
    ``run=*/host=*/worker=*`` and ``run=*``) directories of the
    table folders. Symbolic links there are a ``ProfileFormatError``; nothing is followed."""
    found = []
    for table in tables:
        folder = no_links(root, table, directory=True)
        if not folder.is_dir():
            continue
        for path in _walk(root, folder, LEVELS):
            if path.relative_to(root).as_posix() not in listed:
                found.append(path)
    return found


def _walk(root: Path, folder: Path, levels: tuple[str, ...]) -> list[Path]:
    """The ``part-*.parquet`` files under ``folder`` in directories named ``<level>=*``, level
    by level (a file may sit above the last level: the run-only layout)."""
    out = []
    with os.scandir(folder) as entries:
        for entry in entries:
            path = Path(entry.path)
            is_part = entry.name.startswith("part-") and entry.name.endswith(".parquet")
            wanted = bool(levels) and entry.name.startswith(f"{levels[0]}=")
            if not (is_part or wanted):
                continue
            if entry.is_symlink():
                raise UntrustedCatalog(root, f"`{path}` {LINKED}")
            if wanted and entry.is_dir(follow_symlinks=False):
                out += _walk(root, path, levels[1:])
            elif is_part and len(levels) in (0, 1, 3) and entry.is_file(follow_symlinks=False):
                out.append(path)  # in a rank= directory, or a worker= or run= one (the older layouts)
    return out

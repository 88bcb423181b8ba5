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

One run never makes another unreadable: readers take the rows that pass (``usable_rows``) and
skip each other one with a ``CatalogWarning`` naming it and its problem (the command line prints
it as one ``Warning:`` line); only a command that names such a run is refused. Writers keep
such rows as they are and never act on what they list (``tfprof.catalog.write``).
"""

from __future__ import annotations

import os
import re
import warnings
from collections import Counter
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

import pyarrow as pa

from tfprof.catalog.layout import LEVELS, LINKED, NO_VALUE, RUNS, UntrustedCatalog, check_name, no_links, partition_dir
from tfprof.errors import CatalogWarning, OptionError, ProfileFormatError
from tfprof.ingest.sources import one_line as shown

_TABLE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_PART = re.compile(r"part-[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.parquet")
_CRC = re.compile(r"[0-9a-f]{8}")
_RANK = re.compile(rf"rank=(0|[1-9]\d{{0,9}}|{NO_VALUE})")  # a rank below MAX_WORLD (2**31), checked by _is_rank


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
    if PurePosixPath(rel).as_posix() != rel or len(parts) not in (3, 5, 6) or not _PART.fullmatch(parts[-1]) \
            or ".." in parts:
        return False
    folder = partition_dir(Path(), table, run, tags).parts  # table, run=, host=, worker=, rank=
    if len(parts) == 6:  # any rank of the run
        return list(parts[:4]) == list(folder[:4]) and _is_rank(parts[4])
    return list(parts[:-1]) == list(folder[:4] if len(parts) == 5 else folder[:2])


def _is_rank(part: str) -> bool:
    """Whether ``part`` is a ``rank=`` partition a job can have (``tfprof.ingest.job.MAX_WORLD``)."""
    from tfprof.ingest.job import MAX_WORLD

    match = _RANK.fullmatch(part)
    return match is not None and (match[1] == NO_VALUE or int(match[1]) < MAX_WORLD)


class DamagedRun(UntrustedCatalog):
    """A run a command names whose row cannot be used (``usable_rows``); the others still read."""

    def __init__(self, root: object, run: str, problem: str) -> None:
        ProfileFormatError.__init__(self, f"run `{shown(run)}` of the catalog `{root}` cannot be read: {problem}; "
                                    f"`tfprof check {root}` lists every problem, `tfprof runs {root} --remove "
                                    f"{shown(run)}` removes it")
        self.problem = problem


def split_rows(runs: pa.Table) -> tuple[list[dict], dict[int, str]]:
    """The rows of the runs table ``runs`` as dicts, and the problem of each one that may not be
    used, by its index (``row_problems``; every row of a name listed twice)."""
    rows = runs.to_pylist()
    seen: dict[str, str] = {}
    names: set[str] = set()
    bad = {k: found[0] for k, row in enumerate(rows) if (found := row_problems(row, seen, names))}
    counts = Counter(str(row["run"]) for row in rows)
    for k, row in enumerate(rows):
        if counts[str(row["run"])] > 1:  # which of them is the run cannot be told
            bad[k] = f"{RUNS} lists run `{shown(str(row['run']))}` twice"
    return rows, bad


def usable_rows(root: object, runs: pa.Table, wanted: Iterable[str] = ()) -> list[dict]:
    """The rows of ``runs`` a reader may use: every other one is skipped, unless it is one of
    ``wanted`` (the runs a command names), which is a ``DamagedRun`` error. A reader of every
    run (no ``wanted``) is told of those it skips: a ``CatalogWarning`` naming each with its
    problem; one that names its runs reads as if the others were not there."""
    rows, bad = split_rows(runs)
    wanted = set(wanted)
    for k in bad:
        if rows[k]["run"] in wanted:
            raise DamagedRun(root, str(rows[k]["run"]), bad[k])
    if not wanted:
        warn_skipped(root, [(str(rows[k]["run"]), problem) for k, problem in bad.items()])
    return [row for k, row in enumerate(rows) if k not in bad]


def usable_table(root: object, runs: pa.Table) -> pa.Table:
    """The runs table ``runs`` without the rows ``usable_rows`` skips (warned about as it does)."""
    rows, bad = split_rows(runs)
    warn_skipped(root, [(str(rows[k]["run"]), problem) for k, problem in bad.items()])
    return runs.filter(pa.array([k not in bad for k in range(len(rows))], pa.bool_())) if bad else runs


def run_row(root: object, rows: list[dict], run: str) -> dict:
    """The row of run ``run`` among ``rows`` (those a reader may use: ``usable_rows``); an
    ``OptionError`` naming the runs there are when there is none."""
    for row in rows:
        if row["run"] == run:
            return row
    names = [r["run"] for r in rows]
    raise OptionError(f"no run `{run}` in the catalog `{root}`; runs: {', '.join(names) or 'none'}")


def repair_hint(root: object) -> str:
    """What to do about a damaged partition of a run of catalog ``root``."""
    return f"remove the run (`tfprof runs {root} --remove NAME`) and add it again"


def warn_skipped(root: object, skipped: list[tuple[str, str]], *, kept: bool = False) -> None:
    """One ``CatalogWarning`` naming the runs ``skipped`` (each with its problem), if any; with
    ``kept``, a writer's: the runs are kept as they are, untouched."""
    if not skipped:
        return
    said = "; ".join(f"`{shown(name)}` ({shown(problem.split('; ')[0], 300)})" for name, problem in skipped[:5])
    more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
    noun = "a run" if len(skipped) == 1 else f"{len(skipped)} runs"
    what = f"keeps {noun} it cannot read as {'it is' if len(skipped) == 1 else 'they are'}" if kept else \
        f"skips {noun} it cannot read"
    warnings.warn(f"the catalog `{root}` {what}: {said}{more}; `tfprof check {root}` lists every problem, "
                  f"`tfprof runs {root} --remove NAME` removes a run", CatalogWarning, stacklevel=3)


def own_files(rows: list[dict], run: str) -> list[str]:
    """The partition files that the rows named ``run`` list and that are theirs: a path of one
    of that run's partitions (``_is_partition``, its tags well formed) that no other row lists.
    Removing or replacing the run deletes these and nothing else: whatever else a damaged row
    lists is left where it is."""
    others = {e.get("path") for r in rows if r.get("run") != run for e in r.get("files") or [] if isinstance(e, dict)}
    out: set[str] = set()
    for row in rows:
        if row.get("run") != run:
            continue
        tags = dict(row.get("tags") or [])
        try:
            check_tags(tags)
        except OptionError:
            continue
        for entry in row.get("files") or []:
            rel = entry.get("path") if isinstance(entry, dict) else None
            if _is_partition(rel, entry.get("table") if rel else None, run, tags) and rel not in others:
                out.add(rel)
    return sorted(out)


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

"""A distributed job's traces: which files belong to it and which rank each one is.

A job is given as files, directories (every trace below them: ``*.json``, ``*.json.gz``,
``*.xplane.pb``, as PyTorch's profiler and TensorBoard's profile plugin write them) or glob
patterns. Each file is one rank. Its rank is, first, what the trace records (Kineto's
``distributedInfo.rank``, kept in the ``info`` table); else a number in its file name after
``rank`` (``rank-3.pt.trace.json``, ``trace_rank03.json``); else, for traces that name their
host (XSpace), the host's place among the job's hosts in name order; else the file's place among
the job's files in name order. How each rank was found is kept beside it, and two files that
claim one rank, or a rank beyond the recorded world size, are errors naming both; so are files
that cannot be one job's: some recording their rank and others none, two recording different
world sizes, a store (one profile, already ingested) among the traces.

Every rank must satisfy ``0 <= rank < world size <= 2**31`` (``MAX_WORLD``: what NCCL, Gloo and
MPI can number) before anything uses it: a rank of 1000000000 in a file name is an error naming
the file, never a catalog partition ``rank=1000000000`` that readers would refuse. A file whose
name is not UTF-8 text is an error naming it too (Parquet, JSON and the web page hold text).
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass
from pathlib import Path

from tfprof.errors import InputNotFoundError, OptionError, ProfileFormatError

MAX_WORLD = 2**31  # the most ranks a job may have: ranks are 0 .. MAX_WORLD - 1 (int32, as the collectives number them)
TRACE_SUFFIXES = (".json", ".json.gz", ".xplane.pb")
_RANK_IN_NAME = re.compile(r"rank[-_.]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class RankSource:
    """One file of a job: its ``path``, ``rank`` and ``how`` the rank was found (``recorded``,
    ``file name``, ``host order``, ``file order``); ``host`` and ``world_size`` as recorded (or None)."""

    rank: int
    path: Path
    how: str
    host: str | None = None
    world_size: int | None = None


def job_files(paths: list[str | Path]) -> list[Path]:
    """The trace files ``paths`` name (files as given; directories searched for traces below
    them; glob patterns expanded), each once, in name order; an ``InputNotFoundError`` naming
    what matched nothing."""
    from tfprof.manifest import MANIFEST  # (a store's: no trace of a job)

    found: dict[Path, None] = {}
    for item in paths:
        text = str(item)
        if glob.has_magic(text):
            matches = sorted(Path(m) for m in glob.glob(text, recursive=True) if Path(m).is_file())
        elif Path(text).is_dir():
            if (Path(text) / MANIFEST).exists():
                raise OptionError(f"`{text}` is a store (one profile, ingested), not a job's traces: give each rank's "
                                  "trace file, or their directory")
            matches = sorted(p for p in Path(text).rglob("*") if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
        elif Path(text).is_file():
            matches = [Path(text)]
        else:
            raise InputNotFoundError(f"`{text}`: no such file or directory (a job is given as its trace files, "
                                     "their directory or a glob pattern)")
        if not matches:
            raise InputNotFoundError(f"`{text}` holds no trace file ({', '.join(TRACE_SUFFIXES)}); give the job's "
                                     "per-rank traces")
        found.update(dict.fromkeys(matches))
    for path in found:
        _utf8_name(path)
    return sorted(found, key=str)


def _utf8_name(path: Path) -> None:
    """Refuse a path that is not UTF-8 text (``os.fsdecode`` keeps such bytes as surrogates,
    which no Parquet string, JSON answer or terminal line can hold)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        import os

        shown = os.fsencode(path).decode("utf-8", "backslashreplace")  # the bytes that are not UTF-8 as \xff
        raise InputNotFoundError(f"`{shown}`: the file's name is not UTF-8 text; rename it (a job's trace "
                                 "names are kept in the catalog and shown in reports)") from None


def rank_in_name(path: Path) -> int | None:
    """The number after ``rank`` in the file's name (the last such), or None; any size (a file
    name is short): ``assign_ranks`` refuses one beyond ``MAX_WORLD``."""
    found = _RANK_IN_NAME.findall(path.name)
    return int(found[-1]) if found else None


def assign_ranks(files: list[tuple[Path, int | None, int | None, str | None]]) -> list[RankSource]:
    """The ranks of a job's files, each given as (path, recorded rank, recorded world size,
    recorded host), sorted by rank (module docstring)."""
    if all(rank is not None for _, rank, _, _ in files):
        ranked = [(rank, "recorded") for _, rank, _, _ in files]
    elif all(rank_in_name(path) is not None for path, *_ in files):
        ranked = [(rank_in_name(path), "file name") for path, *_ in files]
    elif all(host is not None for *_, host in files) and len({h for *_, h in files}) == len(files):
        order = {h: k for k, h in enumerate(sorted(h for *_, h in files))}
        ranked = [(order[host], "host order") for *_, host in files]
    else:
        ranked = [(k, "file order") for k in range(len(files))]
    out = [RankSource(rank, path, how, host, world) for (path, _, world, host), (rank, how) in zip(files, ranked)]
    seen: dict[int, Path] = {}
    for src in out:
        _check_rank(src)
        if src.rank in seen:
            raise OptionError(f"`{seen[src.rank]}` and `{src.path}` are both rank {src.rank} ({src.how}); a job has one "
                              "trace per rank")
        seen[src.rank] = src.path
    _one_job(files)
    return sorted(out, key=lambda s: s.rank)


def _one_job(files: list[tuple[Path, int | None, int | None, str | None]]) -> None:
    """Refuse files that cannot be one job's traces: some record their rank and others none (one
    job's traces are written alike), or two record different world sizes; the error names two."""
    recorded = [path for path, rank, _, _ in files if rank is not None]
    if recorded and len(recorded) < len(files):
        other = next(path for path, rank, _, _ in files if rank is None)
        raise OptionError(f"`{recorded[0]}` records its rank and `{other}` records none: they are not one job's "
                          "traces (give the traces of one run, a rank each)")
    worlds: dict[int, Path] = {}
    for path, _, world, _ in files:
        if world is not None:
            worlds.setdefault(world, path)
    if len(worlds) > 1:
        (a, first), (b, second) = list(worlds.items())[:2]
        raise OptionError(f"`{first}` records a job of {a} ranks and `{second}` one of {b}: they are not one job's "
                          "traces (give the traces of one run, a rank each)")


def looks_like_one_job(files: list[tuple[Path, int | None, int | None, str | None]]) -> bool:
    """Whether ``files`` (as ``assign_ranks`` takes them), not given as one job (a directory or
    a glob pattern of its traces), say themselves that they are one: two or more, each recording
    its rank or each named with one (``rank-3``), the ranks distinct and within one recorded
    world size. Profiles that happen to be opened together (no rank, or ranks of other jobs) are
    not."""
    if len(files) < 2:
        return False
    ranks = [rank for _, rank, _, _ in files]
    if any(rank is not None for rank in ranks):
        if any(rank is None for rank in ranks):
            return False
    else:
        ranks = [rank_in_name(path) for path, *_ in files]
    worlds = {world for _, _, world, _ in files if world is not None}
    return (None not in ranks and len(set(ranks)) == len(ranks) and len(worlds) <= 1
            and all(0 <= rank < min(worlds, default=MAX_WORLD) for rank in ranks))


def _check_rank(src: RankSource) -> None:
    """Refuse a rank or world size outside ``0 <= rank < world size <= MAX_WORLD``, naming the file."""
    world = src.world_size
    if world is not None and not (isinstance(world, int) and 0 < world <= MAX_WORLD):
        raise ProfileFormatError(f"`{src.path}` records a world size of {_number(world)}; a job has 1 to {MAX_WORLD:,} "
                                 "ranks: the trace is damaged")
    if not (isinstance(src.rank, int) and 0 <= src.rank < MAX_WORLD):
        where = "its file name" if src.how == "file name" else "the trace"
        raise ProfileFormatError(f"`{src.path}` is rank {_number(src.rank)} ({src.how}); a rank is 0 to "
                                 f"{MAX_WORLD - 1:,} (fix {where}, or give the job's traces with names rank-0, rank-1, ...)")
    if world is not None and src.rank >= world:
        raise OptionError(f"`{src.path}` is rank {src.rank} of a job of {world} ranks; the trace is damaged")


def _number(value: object) -> str:
    text = str(value)
    return text if len(text) <= 20 else f"{text[:20]}…"

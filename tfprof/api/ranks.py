"""``ranks(job)``: a distributed job across its ranks — each rank's steps, the stragglers and by
how much, the communication each waits in, the ops whose time differs between ranks, and what
the cross-rank checks found (``tfprof.queries.ranks``; ``tfprof ranks`` prints it).

>>> import tfprof
>>> job = ranks(tfprof.sample_path("job"))
>>> [(s.rank, s.how) for s in job.sources][:2], job.ranks["rank"][0]  # rank 2 does extra work
([(0, 'recorded'), (1, 'recorded')], 2)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from tfprof.errors import OptionError
from tfprof.ingest.job import RankSource, assign_ranks, job_files, looks_like_one_job
from tfprof.profile import Profile


@dataclass
class JobReport:
    """A job across its ranks: ``sources`` (each rank's file and how its rank was found),
    ``steps`` (per rank and step), ``ranks`` (per rank, the latest first, ``straggler`` marked),
    ``ops`` (per op and metric across ranks, the widest spread first), ``findings`` (the
    cross-rank checks'); ``str()`` is ``tfprof ranks``'s report."""

    sources: list[RankSource]
    steps: pl.DataFrame
    ranks: pl.DataFrame
    ops: pl.DataFrame
    findings: pl.DataFrame

    def __str__(self) -> str:
        return self.text()

    def text(self, top: int = 10) -> str:
        """``tfprof ranks``'s report, listing ``top`` of the ops that differ most."""
        from tfprof.views.ranks_text import render_job

        return render_job(self.sources, self.steps, self.ranks, self.ops, self.findings, top)

    def finding_lines(self) -> list[str]:
        """Each finding as a sentence."""
        from tfprof.views.ranks_text import finding_lines

        basis = "collective_ns" if self.steps["collective_ns"].fill_null(0).sum() > 0 else "window_ns"
        return finding_lines(self.findings, self.ranks, self.ops, self.steps["window_ns"].median(), basis)


def job_paths(paths: list) -> list[Path]:
    """The trace files a job is given as (``tfprof.ingest.job.job_files``): files, directories of
    traces, glob patterns."""
    return job_files(paths)


PARALLEL_FROM = 8  # a job of more traces than this is read on a thread per core


def rank_fact(path: str | Path, prof: Profile | None = None) -> tuple:
    """What a job keeps of one trace (read from ``path`` unless ``prof`` is given): (path, its
    recorded rank, world size and host, its ``RankFacts``); the profile itself is let go."""
    from tfprof.api.inputs import load
    from tfprof.queries.ranks import rank_facts

    prof = load(path) if prof is None else prof
    return Path(path), *_recorded(prof), rank_facts(prof)


def _recorded(prof: Profile) -> tuple:
    """(rank, world size, host) as the profile's ``info`` table records them (None where not)."""
    info = prof.frame("info")  # (older stores lack the columns)
    return tuple(info[c][0] if c in info.columns and info.height else None for c in ("rank", "world_size", "host"))


def is_one_job(pairs: list[tuple]) -> bool:
    """Whether loaded profiles ``[(path, Profile), ...]``, not given as one job, say they are
    one job's ranks (``tfprof.ingest.job.looks_like_one_job``: each records its rank, or each
    path's name carries one)."""
    return looks_like_one_job([(Path(path), *_recorded(prof)) for path, prof in pairs])


def load_job(paths: list, progress: Callable[[int, int, str], None] | None = None, workers: int | None = None) -> dict:
    """Each rank's ``(RankSource, RankFacts)``, read from the job's trace files
    (``tfprof.ingest.job``) one at a time, or on ``workers`` threads (default: one per core
    when the job has more than ``PARALLEL_FROM`` traces), in rank order; ``progress(done,
    total, path)`` after each."""
    from concurrent.futures import ThreadPoolExecutor

    files = job_files(paths)
    workers = workers or (os.cpu_count() or 1 if len(files) > PARALLEL_FROM else 1)
    facts = []
    # threads: the readers' heavy parts (the scan, Arrow and polars) run without the GIL
    with ThreadPoolExecutor(workers) as pool:
        for k, fact in enumerate((pool.map if workers > 1 else map)(rank_fact, files)):
            facts.append(fact)
            if progress:
                progress(k + 1, len(files), str(fact[0]))
    return _ranked(facts)


def job_members(pairs: list[tuple]) -> dict:
    """Each rank's ``(RankSource, RankFacts)`` of loaded profiles ``[(path, Profile), ...]``, ranked
    as files are (``tfprof.ingest.job.assign_ranks``: an error naming the files where two claim
    one rank or a rank lies beyond the job)."""
    return _ranked([rank_fact(path, prof) for path, prof in pairs])


def job_report(members: dict, threshold: float = 0.05) -> JobReport:
    """The report of ``members`` (``job_members``, ``load_job``): an ``OptionError`` where they
    are fewer than two or record no step."""
    return _report(members, threshold)


def _ranked(facts: list[tuple]) -> dict:
    by_path = {f[0]: f[4] for f in facts}
    return {src.rank: (src, by_path[src.path]) for src in assign_ranks([f[:4] for f in facts])}


def ranks(job, *, threshold: float = 0.05, progress: Callable[[int, int, str], None] | None = None,
          workers: int | None = None, **unknown) -> JobReport:
    """The report (module docstring) of ``job``: its trace files (a list of paths, directories or
    glob patterns, or one of them; read on ``workers`` threads, ``load_job``),
    ``{rank: Profile}``, or ``[(path, Profile), ...]`` (ranked as files are). A rank is a
    straggler when the other ranks wait for it more than ``threshold`` of the median step."""
    from tfprof.queries.ranks import rank_facts

    if unknown:
        raise OptionError("ranks() takes a job's traces: paths, a directory or a glob pattern, or {rank: Profile}; "
                          f"{', '.join(unknown)} is not an option")
    if isinstance(job, dict):
        members = {int(r): (RankSource(int(r), Path(f"rank {r}"), "given"), rank_facts(p)) for r, p in sorted(job.items())}
    elif isinstance(job, (list, tuple)) and job and all(isinstance(m, tuple) and len(m) == 2 for m in job):
        members = job_members(job)
    else:
        members = load_job(list(job) if isinstance(job, (list, tuple)) else [job], progress, workers)
    return _report(members, threshold)


def _report(members: dict, threshold: float) -> JobReport:
    from tfprof.queries.ranks import job_findings, job_frames, op_spread, per_rank_step, rank_summary

    if len(members) < 2:
        raise OptionError(f"a job needs the traces of two ranks or more; {len(members)} given")
    steps, ops = job_frames({r: facts for r, (_, facts) in members.items()})
    if steps.height == 0:
        raise OptionError("no rank of this job records a step: the cross-rank analysis compares steps")
    per = per_rank_step(steps)
    summary = rank_summary(per, threshold)
    spread = op_spread(ops, sorted(members))
    return JobReport([src for src, _ in members.values()], per, summary, spread, job_findings(per, summary, spread))

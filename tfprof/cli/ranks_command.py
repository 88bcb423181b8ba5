"""``tfprof ranks``: a distributed job across its ranks (``tfprof.api.ranks``)."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Annotated, Optional

import typer

from tfprof.cli.app import FORMAT_HELP, Force, app, emit, progress_bar

TABLES = ("ranks", "steps", "ops", "findings")


@app.command()
def ranks(
    paths: Annotated[Optional[list[str]], typer.Argument(help="The job's per-rank traces: files, their directory or "
                                                              "a glob pattern (quoted).", show_default=False)] = None,
    catalog: Annotated[Optional[Path], typer.Option("--catalog", help="A catalog holding the job as a run "
                                                    "(tfprof ingest --catalog DIR --run JOB TRACES_DIR).")] = None,
    run: Annotated[Optional[str], typer.Option("--run", help="The job's run in --catalog.")] = None,
    threshold: Annotated[float, typer.Option("--threshold", min=0.0, help="A rank the others wait for longer than "
                                             "this share of the median step is a straggler.")] = 0.05,
    top: Annotated[int, typer.Option("--top", min=1, help="Ops listed among those that differ most.")] = 10,
    workers: Annotated[Optional[int], typer.Option("--workers", min=1, help="Threads reading the traces (default: one "
                                                   "per core for more than 8 traces).")] = None,
    table: Annotated[str, typer.Option("--table", help=f"The rows --format writes: {', '.join(TABLES)}.")] = "ranks",
    fmt: Annotated[str, typer.Option("--format", "-f", help=FORMAT_HELP)] = "table",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the rows to this file, not stdout.")] = None,
    force: Force = False,
) -> None:
    """A distributed job across its ranks: each rank's step time, the time it spends in
    collectives and how late it joins them, the stragglers the others wait for and by how much,
    and the ops whose time differs most between ranks.

    Each trace is one rank: the rank its trace records (PyTorch's `distributedInfo`), else the
    number after `rank` in its file name, else its host's or file's place in name order. A
    GPU rank's steps are also split into compute, communication, memcpy and idle as
    `tfprof steps` splits them. `--format csv|json|parquet` writes the rows of `--table`
    (ranks, steps, ops or findings), times in ns.

    Examples:

      tfprof ranks traces/              # every trace below a directory

      tfprof ranks 'run1/rank-*.pt.trace.json.gz' --threshold 0.1

      tfprof ranks traces/ --table ops --format csv --out ops.csv

      tfprof ranks --catalog runs/ --run job-0412     # a job ingested into a catalog
    """
    from tfprof.cli.app import require_paths

    require_paths(paths or [])  # a mistyped trace is named before the readers load
    from tfprof.api.ranks import ranks as analyse
    from tfprof.errors import OptionError
    from tfprof.output import Inputs, check_target

    if table not in TABLES:
        raise OptionError(f"--table {table}: give one of {', '.join(TABLES)}")
    if (catalog is None) == (not paths) or (catalog is None) != (run is None):
        raise OptionError("give the job's traces, or --catalog DIR --run JOB, not both")
    # no output over a trace of the job (nor a link to one), nor inside a directory of them (or the catalog)
    given = [str(catalog)] if catalog is not None else paths
    protect = Inputs([Path(m) for p in given for m in (glob.glob(p, recursive=True) if glob.has_magic(p) else [p])], [])
    if catalog is None:
        from tfprof.api.ranks import job_paths

        protect = protect + Inputs(job_paths(paths), [])
    if out is not None:
        check_target(out, force=force, inputs=protect, what="--out")
    if catalog is not None:
        from tfprof.catalog import job_ranks, member_profiles
        from tfprof.catalog.storage import location

        catalog = location(catalog)  # an s3:// URI stays one
        ranks = job_ranks(catalog, run)
        if not ranks:
            raise OptionError(f"`{run}` is no job's run in the catalog `{catalog}` (tfprof runs {catalog} lists the runs "
                              "and their ranks)")
        report = analyse(dict(zip(ranks, member_profiles(catalog, [(run, r) for r in ranks]), strict=True)),
                         threshold=threshold)
    else:
        report = analyse(paths, threshold=threshold, progress=progress_bar(), workers=workers)
    if fmt == "table" and out is None:
        typer.echo(report.text(top), nl=False)
        return
    emit(getattr(report, table), fmt, out, force=force, inputs=protect)

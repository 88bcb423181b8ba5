"""Catalogs on the command line: ``tfprof runs DIR`` (list, ``--remove``), and what ``ingest``,
``sql`` and the views take to work on a catalog (``--catalog DIR`` with ``--run NAME``, or
``--runs PATTERN --aggregate sum|mean|max``, and ``--engine spark``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from tfprof.catalog.uri import location, object_uri
from tfprof.cli.app import app, progress_bar

CatalogOption = Annotated[
    Optional[Path], typer.Option("--catalog", help="A catalog of runs: a directory, or s3://BUCKET/PREFIX (tfprof runs DIR lists them).")
]
RunOption = Annotated[Optional[str], typer.Option("--run", help="The run's name in the catalog (with --catalog).")]
TagOption = Annotated[
    Optional[list[str]], typer.Option("--tag", help="KEY=VALUE recorded with the run (repeatable; with --catalog); host= and "
                                         "worker= are also partition levels.")
]
EngineOption = Annotated[
    str, typer.Option("--engine", help="local (DuckDB, the default) or spark (pip install 'tfprof[spark]').")
]
MasterOption = Annotated[
    Optional[str], typer.Option("--master", help="Spark master URL (default local[*]; SPARK_REMOTE for Spark Connect).")
]

# The flags a view takes besides tfprof's options, each with a value.
VIEW_FLAGS = ("--catalog", "--run", "--rank", "--runs", "--aggregate", "--engine", "--master")
CATALOG_HELP = """\b
Many runs (docs/SCALE.md):
  --catalog DIR --run NAME       one run of a catalog (the same report as its profile alone)
  --catalog DIR --run JOB --rank R   one rank of a job's run (--aggregate: all its ranks)
  --catalog DIR --runs PATTERN   runs matching a glob, aggregated per node: --aggregate sum|mean|max
  --engine spark [--master URL]  run the view's reference SQL on Spark (tfprof[spark]); runs
                                 aggregated stay there (not for code), only printed rows return
"""


def add_to_catalog(catalog: Path | None, run: str | None, tags: list[str] | None, inputs: dict, force: bool,
                   job: list[str] | None = None) -> None:
    """``tfprof ingest --catalog DIR --run NAME [--tag k=v] PROFILE`` (``job``: a job's traces
    given as several paths or a glob pattern, ``cli.app.job_paths``)."""
    from tfprof.catalog import add_run
    from tfprof.errors import OptionError

    if catalog is None and job:
        raise OptionError("several paths, or a glob pattern, are a distributed job's traces (a rank each): they go "
                          "into a catalog as one run, --catalog DIR --run NAME (--out writes one profile's store)")
    if catalog is None:
        raise typer.BadParameter("give --out DIR (a store) or --catalog DIR --run NAME (a run of a catalog)")
    if not run:
        raise OptionError("--catalog needs --run NAME: the name the profile gets in the catalog")
    catalog = location(catalog)  # an s3:// or gs:// URI stays one
    given = inputs.get("profile_path")
    if given is not None and _is_job(str(given)) and not any(v for k, v in inputs.items() if k != "profile_path"):
        job = [given]
    if job:
        from tfprof.catalog import add_job, run_ranks

        row = add_job(catalog, run, job, tags=tags, force=force, progress=progress_bar())
        typer.echo(f"added job {run} to {catalog}: {len(run_ranks(row))} ranks ({row['nodes']:,} nodes, "
                   f"{row['steps']:,} steps in all)")
    else:
        row = add_run(catalog, run, tags=tags, force=force, progress=progress_bar(), **inputs)
        typer.echo(f"added run {run} to {catalog} ({row['nodes']:,} nodes, {row['steps']:,} steps)")
    if row["errors"] or row["warnings"]:
        typer.echo(f"Warning: run {run} has {row['errors']} errors and {row['warnings']} warnings in its data; "
                   f"tfprof sql \"select * from validation where run = '{run}'\" --catalog {catalog} lists them",
                   err=True)


def _is_job(given: str) -> bool:
    """Whether an ingest's input names a distributed job's traces: a glob pattern, or a directory
    that is not a store."""
    import glob

    from tfprof.store import MANIFEST

    return glob.has_magic(given) or (Path(given).is_dir() and not (Path(given) / MANIFEST).exists())


def catalog_sql(catalog: Path | None, query: str, engine: str, master: str | None, *, fmt: str, out: Path | None,
                force: bool, inputs) -> None:
    """``tfprof sql QUERY --catalog DIR [--engine spark]``: the rows written as ``tfprof sql``
    writes them; no output may land on the catalog (or the command's inputs)."""
    from tfprof.cli.app import emit
    from tfprof.errors import OptionError
    from tfprof.output import check_target, input_paths

    _check_engine(engine)
    if catalog is None:
        raise OptionError("--engine spark runs SQL over a catalog: give --catalog DIR")
    catalog = location(catalog)
    if not object_uri(catalog):
        inputs = inputs + input_paths(profile_path=catalog)
    if out is not None:
        check_target(out, force=force, inputs=inputs, what="--out")  # before the query runs
    if engine == "spark":
        from tfprof.catalog.spark import spark_sql

        rows = spark_sql(catalog, query, master=master)
    else:
        from tfprof.catalog import sql

        rows = sql(catalog, query)
    emit(rows, fmt, out, force=force, inputs=inputs)


def _check_engine(engine: str) -> None:
    if engine not in ("local", "spark"):
        from tfprof.errors import OptionError

        raise OptionError(f"unknown --engine `{engine}`; valid: local, spark")


def take_view_flags(tokens: list[str]) -> tuple[dict, list[str]]:
    """Split a view's extra arguments into the many-runs flags ({name: value}) and the rest."""
    flags: dict[str, str] = {}
    rest: list[str] = []
    it = iter(tokens)
    for tok in it:
        name, eq, value = tok.partition("=")
        if name in VIEW_FLAGS:
            if not eq:
                value = next(it, None)
                if value is None:
                    raise typer.BadParameter(f"{name} needs a value")
            flags[name[2:]] = value
        else:
            rest.append(tok)
    return flags, rest


def view_profile(flags: dict, opts, inputs: dict, cmd: str = "scope"):
    """The profile view ``cmd`` with ``flags`` runs on: one run, or runs aggregated (None: no
    catalog, the view's inputs say which profile). With ``--engine spark``, runs aggregated for a
    scope, graph or group view stay on Spark (``tfprof.catalog.spark_members``); the code view
    aggregates here and runs its SQL there."""
    from tfprof.errors import OptionError

    _check_engine(flags.get("engine", "local"))
    if "catalog" not in flags:
        if {"run", "runs", "aggregate", "rank"} & flags.keys():
            raise OptionError("--run, --rank, --runs and --aggregate need --catalog DIR")
        return None
    if any(v is not None for v in inputs.values()):
        raise OptionError("give either a profile or --catalog DIR, not both")
    catalog = location(flags["catalog"])
    if ("run" in flags) == ("runs" in flags):
        raise OptionError("with --catalog give one of --run NAME or --runs PATTERN")
    from tfprof.catalog import aggregate_profile, match_runs, run_profile

    rank = _rank(flags)
    if "run" in flags and "aggregate" not in flags:
        return run_profile(catalog, flags["run"], rank)
    if rank is not None:
        raise OptionError("--rank picks one rank of --run JOB; it goes without --runs and --aggregate")
    if opts.step >= 0 or opts.output.kind == "timeline":
        raise OptionError("runs or ranks aggregated with --aggregate have no steps: drop -step and -output timeline "
                          "(or look at one run with --run NAME, one rank with --rank R)")
    if "run" in flags:  # a job's ranks aggregated
        from tfprof.catalog import job_ranks

        if not job_ranks(catalog, flags["run"]):
            raise OptionError(f"--aggregate with --run aggregates a job's ranks, and run `{flags['run']}` is no job; "
                              "--runs PATTERN aggregates runs")
        names, how = [flags["run"]], flags["aggregate"]
    else:
        from tfprof.catalog.read import readable_runs

        # a damaged run matched is left out with a warning: it never stops the aggregate of the rest
        names, how = readable_runs(catalog, match_runs(catalog, flags["runs"])), flags.get("aggregate", "sum")
    from tfprof.api.options import VIEWS

    if flags.get("engine") == "spark" and VIEWS[cmd].layout in ("scope", "graph", "groups", "code"):
        from tfprof.catalog.spark_members import spark_aggregate

        return spark_aggregate(catalog, names, how, master=flags.get("master"))
    return aggregate_profile(catalog, names, how)


def _rank(flags: dict) -> int | None:
    from tfprof.errors import OptionError

    value = flags.get("rank")
    if value is None:
        return None
    if not value.isdigit():
        raise OptionError(f"--rank {value}: give a rank number (0, 1, ...)")
    from tfprof.schema.bounds import INT64_MAX, out_of_range

    if problem := out_of_range("--rank", int(value), 0, INT64_MAX):
        raise OptionError(problem)
    return int(value)


def view_engine(flags: dict):
    """Where a view's work runs: here (the default), or with ``--engine spark`` its reference
    SQL on Spark (``tfprof.catalog.spark``)."""
    import contextlib

    if flags.get("engine", "local") != "spark":
        return contextlib.nullcontext()
    from tfprof.catalog.spark import on_spark

    return on_spark(flags.get("master"))


@app.command()
def runs(
    catalog: Annotated[Path, typer.Argument(metavar="CATALOG", help="A catalog directory, or s3://BUCKET/PREFIX.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="text (the default) or json.")] = "text",
    remove: Annotated[Optional[str], typer.Option("--remove", help="Remove this run (its partitions and row).")] = None,
) -> None:
    """List the runs of a catalog (name, format, size, validation, tags, source), or remove one.

    Examples:

      tfprof ingest --catalog runs/ --run nightly-0412 --tag host=w3 profile_100

      tfprof runs runs/ --format json

      tfprof runs runs/ --remove nightly-0412
    """
    from tfprof.catalog import remove_run
    from tfprof.catalog import runs as list_runs
    from tfprof.errors import OptionError

    if fmt not in ("text", "json"):
        raise OptionError(f"unknown --format `{fmt}`; valid: text, json")
    catalog = location(catalog)
    if remove is not None:
        remove_run(catalog, remove)
        typer.echo(f"removed run {remove} from {catalog}")
        return
    from tfprof.catalog import run_ranks

    rows = list_runs(catalog).to_pylist()
    for row in rows:
        row["ranks"] = run_ranks(row)  # a job's (a run of one trace: none)
        row["tags"] = dict(row["tags"])
        row["ingested_at"] = row["ingested_at"].isoformat(timespec="seconds")
    if fmt == "json":
        typer.echo(json.dumps(rows, indent=1))
        return
    typer.echo(runs_text(rows), nl=False)


def runs_text(rows: list[dict]) -> str:
    """The runs as an aligned text table, one line per run: what the runs table holds is shown
    with control characters escaped (it may have been written by anyone)."""
    from tfprof.catalog.trust import shown

    head = ("run", "format", "ranks", "nodes", "steps", "errors", "warnings", "ingested_at", "tags", "source_file")
    cells = [head] + [
        tuple(shown(str(c), 1000) for c in (
            r["run"], r["format"], len(r.get("ranks") or []) or "-", f"{r['nodes']:,}", f"{r['steps']:,}", r["errors"],
            r["warnings"],
            r["ingested_at"], ",".join(f"{k}={v}" for k, v in r["tags"].items()) or "-", r["source_file"]))
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells]
    return "\n".join(lines) + "\n" + f"{len(rows)} runs\n"


def check_directory(path: Path, fmt: str, checksums: bool) -> bool:
    """The files of ``tfprof check DIR``. A store's are checked (``verify_store``) and False
    returned: its data's check follows. A catalog is checked whole (``check_catalog``) and True
    returned: a line per run (its files, and its data's findings as ingest counted them) and
    one per problem; exit code 2 (one ``Error:`` line) when there is any."""
    import sys

    from tfprof.catalog import check_catalog
    from tfprof.catalog.layout import is_catalog
    from tfprof.errors import ProfileFormatError
    from tfprof.store import MANIFEST, read_manifest, recreate_hint, verify_store

    if not object_uri(path) and (not is_catalog(path) or os.path.lexists(path / MANIFEST)):
        verify_store(path, checksums=checksums)
        if "validation" not in read_manifest(path)["tables"]:
            print(f"Warning: `{path}` was written before tfprof validated the data it ingests, so "
                  f"its checks are not in it; {recreate_hint(path)}", file=sys.stderr)
        return False
    report = check_catalog(path, checksums=checksums)
    if fmt == "json":
        typer.echo(json.dumps(report, indent=1))
    else:
        runs = report["runs"]
        lines = [f"catalog {report['catalog']}: " + (f"{len(runs)} runs" if runs is not None else "no run list read")]
        lines += [f"  problem: {p}" for p in report["problems"]]
        for r in runs or []:
            state = "damaged" if r["problems"] else f"{r['files']} files ok"
            lines.append(f"run {r['run']}: {state}; its data: {r['errors']} errors, {r['warnings']} warnings")
            lines += [f"  problem: {p}" for p in r["problems"]]
        typer.echo("\n".join(lines))
    bad = [r["run"] for r in report["runs"] or [] if r["problems"]]
    if report["problems"] or bad:
        first = (report["problems"] or [p for r in report["runs"] for p in r["problems"]])[0]
        runs = f" (runs {', '.join(bad)})" if bad else ""
        raise ProfileFormatError(f"the catalog `{path}` is damaged{runs}: {first}")
    return True

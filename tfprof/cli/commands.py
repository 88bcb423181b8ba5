"""The ``tfprof`` commands: the four views, ``ingest``, ``tables``, ``sql``, ``check``, ``advise``,
``demo``, and with inputs but no command the interactive shell. Each turns its flags into a call
of the same functions the Python API calls (``tfprof.api``, ``tfprof.store``, ``Profile.sql``).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Optional

import typer

from tfprof.cli.app import (
    FORMAT_HELP,
    Force,
    app,
    cli_inputs,
    emit,
    load_plugins,
    load_profile,
    progress_bar,
    protected,
    spelled,
    takes_inputs,
    warn_if_invalid,
)
from tfprof.cli.catalog_command import CATALOG_HELP, CatalogOption, EngineOption, MasterOption, RunOption, TagOption


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"tfprof {version('tfprof')}")
        raise typer.Exit()



# no_args_is_help=False: `tfprof` alone reaches _root, which prints the help with exit code 0
# (click's own no-args help is an error under standalone_mode=False).
@app.callback(invoke_without_command=True, no_args_is_help=False, epilog=(
    "With inputs and no command, tfprof opens its interactive shell (tfprof> prompt; `help` there lists "
    "its commands): tfprof run.tfprof --max_depth 4"))
@takes_inputs(path=False)
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks on errors.")] = False,
    inputs: dict | None = None,
) -> None:
    given = any(v is not None for v in inputs.values())
    if ctx.invoked_subcommand is not None:
        if given:
            sub = ctx.invoked_subcommand
            raise typer.BadParameter(f"give the inputs after the command: tfprof {sub} --profile_path P")
        return
    shell_tokens = (ctx.obj or {}).get("shell_options", [])
    if not given:
        if shell_tokens:
            raise typer.BadParameter("view options need a profile: tfprof PROFILE --max_depth 3, or tfprof scope ...")
        typer.echo(ctx.get_help())
        raise typer.Exit()
    from tfprof.cli.interactive import initial_options, run_shell

    options = initial_options(shell_tokens)
    runner = functools.partial(_run_view, inputs=protected(inputs))
    raise typer.Exit(run_shell(load_profile(**inputs), options, runner, debug=debug))



@app.command()
@takes_inputs(job=True)
def ingest(
    inputs: dict, job: list[str] | None,
    out: Annotated[
        Optional[Path],
        typer.Option("--out", "-o", help="Store directory to write; an existing store is replaced only with --force."),
    ] = None,
    catalog: CatalogOption = None, run: RunOption = None, tag: TagOption = None,
    force: Force = False,
) -> None:
    """Ingest tfprof inputs into a Parquet store that later commands open without re-parsing.

    Examples:

      tfprof ingest --profile_path profile_100 --out run.tfprof

      tfprof ingest --graph_path graph.pbtxt --run_meta_path rm0.pb,rm1.pb --op_log_path tfprof_log --out run.tfprof
    """
    from tfprof.api import ingest_to_store

    if catalog is not None or out is None or job:  # a run of a catalog (docs/SCALE.md), a job's a rank each
        from tfprof.cli.catalog_command import add_to_catalog
        return add_to_catalog(catalog, run, tag, inputs, force, job)
    dest, counts = ingest_to_store(out, progress=progress_bar(), force=force, inputs=protected(inputs), **inputs)
    typer.echo(f"wrote {dest} ({counts['nodes']:,} nodes, {counts['steps']:,} steps)")
    if counts.get("validation"):  # what the ingest found, said as every command that loads it will
        from tfprof.profile import Profile

        warn_if_invalid(Profile.open(dest), {"profile_path": dest})


@app.command()
@takes_inputs()
def tables(inputs: dict) -> None:
    """List the tables of a profile with their row counts.

    Examples:

      tfprof tables run.tfprof

      tfprof tables --graph_path graph.pbtxt --run_meta_path run_meta
    """
    prof = load_profile(**inputs)
    from tfprof.api.summary import table_sizes

    typer.echo(table_sizes(prof))



@app.command()
@takes_inputs()
def sql(
    query: Annotated[str, typer.Argument(metavar="QUERY", help="A DuckDB SQL query over the profile's tables (see `tfprof tables`).")],
    inputs: dict,
    fmt: Annotated[str, typer.Option("--format", "-f", help=FORMAT_HELP)] = "table",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the result to this file, not stdout.")] = None,
    force: Force = False,
    catalog: CatalogOption = None, engine: EngineOption = "local", master: MasterOption = None,
) -> None:
    """Run a SQL query (DuckDB) over a profile's tables; every table is a view of the same name.

    Examples:

      tfprof sql "select op, count(*) n from nodes group by op order by n desc limit 10" run.tfprof

      tfprof sql "select step, sum(duration_micros) us from execs group by step order by step" run.tfprof --format csv

      tfprof sql "select * from nodes" --graph_path graph.pbtxt --format parquet --out nodes.parquet

    The tables and their columns are listed in docs/SCHEMA.md.
    """
    protect = protected(inputs)
    if catalog is not None or engine != "local":  # every run of a catalog: run, host, worker columns
        from tfprof.cli.catalog_command import catalog_sql
        return catalog_sql(catalog, query, engine, master, fmt=fmt, out=out, force=force, inputs=protect)
    if out is not None:
        from tfprof.output import check_target

        check_target(out, force=force, inputs=protect, what="--out")  # before the query runs
    prof = load_profile(**inputs)
    emit(prof.sql(query), fmt, out, force=force, inputs=protect)



@app.command()
@takes_inputs()
def check(
    inputs: dict,
    fmt: Annotated[str, typer.Option("--format", "-f", help="text (the default) or json.")] = "text",
    checksums: Annotated[
        bool,
        typer.Option("--checksums/--no-checksums", help="For a store or catalog: compare every file with its checksum (reads them all)."),
    ] = True,
) -> None:
    """Check a profile's data: negative or absurd times and sizes, totals that would wrap,
    names and inputs that point nowhere (docs/COMPATIBILITY.md), and for a store its files
    (for a catalog, every run's files and the paths its run list names).

    Prints a summary line per severity, then what each check found; `--format json` gives
    {"profile", "counts", "entries"}. Other commands print one warning line on stderr when
    there are warnings or errors. The exit code is 0 whatever was found; 2 when the input
    cannot be read (or a store or catalog file is damaged).

    Examples:

      tfprof check run.tfprof

      tfprof check --graph_path graph.pbtxt --run_meta_path rm0.pb,rm1.pb --format json

      tfprof check runs/     # a catalog: every run's files, and the paths its run list names
    """
    from tfprof.api.shell import ops_without_flops_rule, render_json, render_text, report
    from tfprof.catalog.storage import location, object_uri
    from tfprof.cli.catalog_command import check_directory
    from tfprof.errors import OptionError

    if fmt not in ("text", "json"):
        raise OptionError(f"unknown --format `{fmt}`; valid: text, json")
    profile_path = inputs.get("profile_path")
    if profile_path is not None and (object_uri(profile_path) or Path(profile_path).is_dir()) and check_directory(
            location(profile_path), fmt, checksums):  # (an object-store catalog: an s3:// URI)
        return  # a catalog: every run's files and the paths its run list names were checked, and said
    prof = load_profile(warn=False, **inputs)
    data = report(prof.table("validation"), spelled(inputs), ops_without_flops_rule(prof))
    typer.echo(render_json(data) if fmt == "json" else render_text(data), nl=False)



@app.command()
def demo() -> None:
    """Ingest the sample profile bundled with tfprof, summarise it and show two tfprof views."""
    import tfprof
    from tfprof.api import run_view, summarize

    path = tfprof.sample_path()
    prof = load_profile(profile_path=path)
    typer.echo(f"sample profile: {path}\n")
    typer.echo(summarize(prof).text())
    shown = [
        ("scope", "--account_type_regexes _trainable_variables --select params --max_depth 4",
         {"account_type_regexes": ["_trainable_variables"], "select": ["params"], "max_depth": 4}),
        ("op", "--max_depth 7 --order_by micros --select micros,occurrence",
         {"max_depth": 7, "order_by": "micros", "select": ["micros", "occurrence"]}),
    ]
    for cmd, flags, options in shown:
        text = run_view(prof, cmd, options).text
        typer.echo(f"\n$ tfprof {cmd} {path.name} {flags}")
        typer.echo(text[text.index("node name |"):], nl=False)



_ADVISE_EPILOG = """\b
Built-in checkers (tfprof's; all run by default, OperationChecker on TensorFlow's profiles only):
  AcceleratorUtilizationChecker  busy share of each GPU (a trace: over its profiled steps)
  OperationChecker               unfused batch norm; NHWC convolutions on GPU
  ExpensiveOperationChecker      top op types, graph nodes and code paths by time
  JobChecker                     internal to Google: never reports

\b
A checker of your own is a .sql file holding one DuckDB SELECT over the profile's tables
(see `tfprof tables`); each row it returns is one report, its text in a column named
`report`; the checker is named after the file. Options are named parameters ($name),
declared with defaults by comment lines `-- option name = default`. See docs/ADVISOR.md.

\b
Examples:
  tfprof advise run.tfprof
  tfprof advise --graph_path graph.pbtxt --run_meta_path rm.pb --op_log_path tfprof_log
  tfprof advise run.tfprof --checkers OperationChecker,checks/memcpy.sql
  tfprof advise run.tfprof --checker_dir checks --checker_option memcpy:min_share=0.3
"""



@app.command(epilog=_ADVISE_EPILOG)
@takes_inputs()
def advise(
    inputs: dict,
    checkers: Annotated[
        Optional[str],
        typer.Option("--checkers", help="Checkers to run, comma-separated: built-in names and .sql files (default: all built-in)."),
    ] = None,
    checker_dir: Annotated[
        Optional[Path], typer.Option("--checker_dir", "--checker-dir", help="Also run every *.sql checker file in this directory.")
    ] = None,
    checker_option: Annotated[
        Optional[list[str]],
        typer.Option("--checker_option", "--checker-option", help="CHECKER:NAME=VALUE, an option of one checker (repeatable)."),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="text (the default) or json (docs/schemas/advise.schema.json).")] = "text",
) -> None:
    """Auto-profile and advise, as tfprof's `advise`: GPU utilization, op choices, the most expensive ops."""
    from tfprof.api import advise as run_advice
    from tfprof.api import print_notes
    from tfprof.api.advice import advice_output

    selected = _checker_options(checkers, checker_option or [])
    prof = load_profile(**inputs)
    result = run_advice(prof, selected, checker_dir=checker_dir)
    print_notes(result)
    typer.echo(advice_output(result, fmt), nl=False)


def _checker_options(checkers: str | None, options: list[str]) -> dict | None:
    """`--checkers` and `--checker_option` as the advisor's {checker: {option: value}} (None: defaults)."""
    from tfprof.api.shell import DEFAULT_CHECKERS
    from tfprof.errors import OptionError

    if checkers is None and not options:
        return None
    chosen: dict = (
        {c: {} for c in DEFAULT_CHECKERS} if checkers is None else {c: {} for c in checkers.split(",") if c}
    )
    for item in options:
        target, _, value = item.partition("=")
        name, colon, key = target.rpartition(":")
        if not (colon and name and key and "=" in item):
            raise OptionError(f"Bad --checker_option `{item}`; the format is CHECKER:NAME=VALUE")
        chosen.setdefault(name, {})[key] = value
    return chosen



_VIEW_EPILOG = """\b
View options (tfprof's names, also as --name=value or -name value):
{options}

\b
Examples:
  tfprof scope run.tfprof --max_depth 3 --select params,micros
  tfprof op --profile_path profile_100 -order_by micros -max_depth 10
  tfprof code --graph_path graph.pbtxt --op_log_path tfprof_log --run_meta_path rm.pb
"""
_VIEW_EPILOG += CATALOG_HELP



def _view_command(cmd: str, summary: str):
    @takes_inputs(path=False)
    def command(
        ctx: typer.Context,
        inputs: dict,
        fmt: Annotated[
            str, typer.Option("--format", help="text (tfprof's report, the default), or the shown rows as " + FORMAT_HELP[15:])
        ] = "text",
        force: Force = False,
        fail_if: Annotated[Optional[list[str]], typer.Option("--fail-if", help="A gate, repeatable (docs/DIFF.md).")] = None,
    ) -> None:
        from tfprof.cli.catalog_command import take_view_flags, view_engine, view_profile
        from tfprof.cli.viewopts import parse_view_args

        many, view_args = take_view_flags(list(ctx.args))

        opts, rest = parse_view_args(view_args)
        if len(rest) > 1:
            raise typer.BadParameter(f"unexpected arguments {' '.join(rest[1:])}; options look like --max_depth 3")
        if rest:
            inputs = cli_inputs(Path(rest[0]), **inputs)
        if opts.output.outfile is not None:  # a kind that writes a file
            from tfprof.api import check_output

            check_output(cmd, opts, force=force, inputs=protected(inputs))  # before the profile loads
        prof = view_profile(many, opts, inputs, cmd) or load_profile(**inputs)
        with view_engine(many):
            _run_view(cmd, prof, opts, fmt=fmt, force=force, inputs=protected(inputs), gates=fail_if or ())

    command.__doc__ = summary
    return command


def _run_view(cmd: str, prof, opts, fmt: str = "text", *, force: bool = False, inputs=None, gates=()) -> None:
    """Run a view and carry out its -output (or --format): an existing output file is replaced
    only with ``force``; ``inputs`` (and the profile's own) are never written over; ``gates``: --fail-if texts."""
    from tfprof.api import emit_output, print_notes, run_view
    from tfprof.cli.diff_command import view_gates
    check_gates = view_gates(cmd, gates)  # parsed now: a bad one fails before the work

    if fmt != "text":
        from tfprof.api.shell import FORMATS

        if fmt not in FORMATS:
            from tfprof.errors import OptionError

            raise OptionError(f"unknown --format `{fmt}`; valid: text, {', '.join(FORMATS)}")
    kind = opts.output.kind
    if opts.output.outfile is not None:
        from tfprof.api import check_output

        check_output(cmd, opts, prof, force=force, inputs=inputs)  # fail before the work, as tfprof's pre-checks
    result = run_view(prof, cmd, opts, full_rows=fmt != "text" or bool(gates))
    print_notes(result)
    if fmt != "text" and kind in ("stdout", "file"):
        from tfprof.api.shell import view_table

        emit(view_table(result.layout, result.frame, result.options.select), fmt, Path(opts.output.outfile) if kind == "file" else None,
              out_hint="give --output file:outfile=FILE", force=force, inputs=prof.inputs + inputs)
    else:
        emit_output(prof, result, echo=lambda text: typer.echo(text, nl=False), force=force, inputs=inputs)
    check_gates(result)  # exit code 3 when one trips



def _register_views() -> None:
    """A command per view of the registry (``tfprof.api.options.VIEWS``: those registered before
    this module is imported included, and by the plugins, imported first)."""
    from tfprof.api.options import VIEWS, view_help
    from tfprof.cli.viewopts import options_help

    load_plugins()

    epilog = _VIEW_EPILOG.format(options=options_help())
    for cmd, spec in VIEWS.items():
        summary = view_help(spec)
        app.command(
            cmd,
            help=summary,
            epilog=epilog,
            context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            options_metavar="[PROFILE] [OPTIONS] [VIEW OPTIONS]",
        )(_view_command(cmd, summary))



_register_views()


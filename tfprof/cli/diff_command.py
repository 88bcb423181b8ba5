"""``tfprof diff A B [VIEW] [view options]``: a view of B against A, and the ``--fail-if`` gates
shared with the view commands (exit code 3 when one trips). See docs/DIFF.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from tfprof.cli.app import Force, app, emit

GATE_EXIT = 3
_DIFF_FORMATS = ("text", "json", "csv", "parquet", "table")

_EPILOG = """\b
PROFILEs are stores or ProfileProto files (with --catalog DIR, names of its runs); VIEW is scope (the default), graph, op or code. The
view options are the views' (see `tfprof scope --help`); the min_* thresholds keep a row
that passes them in A or in B. Rows are matched by path (node name; op type; frame path).

\b
Examples:
  tfprof diff base.tfprof new.tfprof scope --max_depth 4 --select micros,bytes
  tfprof diff base.tfprof new.tfprof op --order_by delta_pct --format json
  tfprof diff run.tfprof --step 3 --against 7
  tfprof diff --catalog runs/ nightly-41 nightly-42 op
  tfprof diff base.tfprof new.tfprof --fail-if "scope:model/encoder micros +5% significant"
  tfprof op new.tfprof --fail-if "op:MatMul micros > 2ms"
"""


def report_gates(lines: list[str]) -> None:
    """Print tripped gates on stderr and exit with ``GATE_EXIT``; nothing when none tripped."""
    if lines:
        for line in lines:
            print(line, file=sys.stderr)
        raise typer.Exit(GATE_EXIT)


def view_gates(cmd: str, texts):
    """``--fail-if`` on view ``cmd``: the gates parsed now (a bad one is an error before the
    work), and a function that checks them on the view's result (exit code 3 if one trips)."""
    if not texts:
        return lambda result: None
    from tfprof.api.gates import parse_gates, view_failures

    gates = parse_gates(texts)
    return lambda result: report_gates(view_failures(cmd, result, gates))


@app.command(
    "diff",
    epilog=_EPILOG,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    options_metavar="A [B] [VIEW] [OPTIONS] [VIEW OPTIONS]",
)
def diff(
    ctx: typer.Context,
    fmt: Annotated[str, typer.Option("--format", help="text (the default), json (docs/schemas/diff.schema.json), "
                                     "csv, parquet or table (the rows).")] = "text",
    order_by: Annotated[str, typer.Option("--order_by", "--order-by", help="delta (|Δ|, the default), delta_pct, "
                                          "name or tree; ORDER:FIELD picks the select field (delta_pct:bytes).")] = "delta",
    against: Annotated[Optional[int], typer.Option("--against", help="Compare --step S of A with this step "
                                                   "(of B, or of A when only one profile is given).")] = None,
    fail_if: Annotated[Optional[list[str]], typer.Option("--fail-if", "--fail_if", help="A gate (repeatable): exit "
                                                         "with code 3 when it trips (docs/DIFF.md).")] = None,
    no_noise: Annotated[bool, typer.Option("--no-noise", help="Skip the noise band.")] = False,
    sql: Annotated[Optional[str], typer.Option("--sql", help="A DuckDB query over the rows as table `diff`; "
                                               "prints its result instead (in --format).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the output to this file, not stdout.")] = None,
    catalog: Annotated[Optional[Path], typer.Option("--catalog", help="A and B are runs of this catalog "
                                                    "(tfprof runs DIR lists them).")] = None,
    force: Force = False,
) -> None:
    """Compare a view of profile B with the same view of profile A: A, B, Δ and Δ% per row."""
    from tfprof.api.options import VIEWS
    from tfprof.cli.app import load_profile, require_inputs
    from tfprof.cli.viewopts import parse_view_args
    from tfprof.errors import OptionError

    if fmt not in _DIFF_FORMATS:
        raise OptionError(f"unknown --format `{fmt}`; valid: {', '.join(_DIFF_FORMATS)}")
    opts, positionals = parse_view_args(list(ctx.args))
    cmd = "scope"
    if positionals and positionals[-1] in VIEWS and not Path(positionals[-1]).exists():
        cmd = positionals.pop()
    if not 1 <= len(positionals) <= 2:
        raise typer.BadParameter("give one or two profiles: tfprof diff A B [VIEW] (or A --step S --against T)")
    if catalog is None:
        for p in positionals:
            require_inputs(profile_path=p)
    from tfprof.api.diff import run_diff
    from tfprof.api.gates import diff_failures, parse_gates

    gates = parse_gates(fail_if or [], diff=True)
    if catalog is not None:  # runs of a catalog, by name (docs/SCALE.md)
        from tfprof.catalog import run_profile
        from tfprof.catalog.storage import location

        catalog = location(catalog)  # an s3:// URI stays one
        profiles = [run_profile(catalog, name) for name in positionals]
    else:
        profiles = [load_profile(profile_path=Path(p)) for p in positionals]
    result = run_diff(profiles[0], profiles[1] if len(profiles) > 1 else None, cmd, opts, against=against,
                      order_by=order_by, labels=(positionals[0], positionals[-1]), noise_band=not no_noise)
    from tfprof.output import input_paths

    if catalog is not None:  # no output lands on the catalog
        inputs = input_paths(profile_path=catalog)
    else:
        inputs = input_paths(profile_path=positionals[0]) + input_paths(profile_path=positionals[-1])
    if sql is not None:
        emit(result.sql(sql), "table" if fmt == "text" else fmt, out, force=force, inputs=inputs)
    elif fmt in ("text", "json"):
        # the text a block of rows at a time: a multi-million-row report is never held whole
        body = result.text_blocks() if fmt == "text" else [json.dumps(result.document(), indent=1) + "\n"]
        if out is not None:
            from tfprof.output import write_file

            write_file(out, body, force=force, inputs=inputs, what="output file")
        else:
            for piece in body:
                typer.echo(piece, nl=False)
    else:
        emit(result.frame, fmt, out, force=force, inputs=inputs)
    report_gates(diff_failures(result, gates))

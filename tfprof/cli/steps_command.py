"""``tfprof steps``: where each step's time goes on each accelerator (``tfprof.queries.breakdown``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from tfprof.cli.app import FORMAT_HELP, Force, app, emit, load_profile, protected, takes_inputs


@app.command()
@takes_inputs()
def steps(
    inputs: dict,
    fmt: Annotated[str, typer.Option("--format", "-f", help=FORMAT_HELP)] = "table",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the rows to this file, not stdout.")] = None,
    force: Force = False,
) -> None:
    """Where each step's time goes on each GPU: compute, communication not hidden by compute,
    copies and memsets, idle; how busy the GPU was, and how much of the communication compute hid.

    The parts add up to the step's time exactly (overlapping kernels count once). Steps run from
    one `ProfilerStep#N` to the next (a whole capture without them is one step); tfprof's own
    profiles use each step's executions. `--format csv|json|parquet` gives the rows in ns.

    Examples:

      tfprof steps trace.pt.trace.json.gz

      tfprof steps run.xplane.pb --format csv --out steps.csv
    """
    from tfprof.api.breakdown import steps as breakdown
    from tfprof.api.breakdown import steps_report

    protect = protected(inputs)
    if out is not None:
        from tfprof.output import check_target

        check_target(out, force=force, inputs=protect, what="--out")
    rows = breakdown(load_profile(**inputs))
    if fmt == "table" and out is None:
        typer.echo(steps_report(rows), nl=False)
        return
    emit(rows, fmt, out, force=force, inputs=protect)

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
    window: Annotated[str, typer.Option("--window", help="Where a step starts and ends: next (ours: from its "
                                        "marker to the next), marker (the marker's own span) or kernels (HTA's "
                                        "and XProf's GPU step: from its first device event to its last).")] = "next",
    drop_last_step: Annotated[bool, typer.Option("--drop-last-step", help="Leave the last step out, as HTA does "
                                                 "(a capture of one step keeps it).")] = False,
    total: Annotated[bool, typer.Option("--total", help="Add a row per GPU over the whole trace: from the first "
                                        "step's start to the last one's end.")] = False,
    unlinked: Annotated[bool, typer.Option("--unlinked", help="Add the time of GPU work no op launched, per reason: "
                                           "no correlation id, launched before the capture, launched outside any op.")] = False,
    force: Force = False,
) -> None:
    """Where each step's time goes on each GPU: compute, communication not hidden by compute,
    copies and memsets, idle; how busy the GPU was, and how much of the communication compute hid.

    The parts add up to the step's time exactly (overlapping kernels count once). Steps run from
    one `ProfilerStep#N` to the next (a whole capture without them is one step); tfprof's own
    profiles use each step's executions. `--format csv|json|parquet` gives the rows in ns.

    The peers' conventions on request: `--window kernels` (XProf's GPU step time), `--window
    kernels --drop-last-step --total` (HTA's temporal breakdown), `--window marker` (the step
    marker's own span); docs/FOREIGN.md says how and by how much the figures differ.

    Examples:

      tfprof steps trace.pt.trace.json.gz

      tfprof steps run.xplane.pb --format csv --out steps.csv

      tfprof steps trace.pt.trace.json.gz --window kernels --drop-last-step --total --unlinked
    """
    from tfprof.api.breakdown import WINDOWS, steps_report
    from tfprof.api.breakdown import steps as breakdown
    from tfprof.errors import OptionError

    if window not in WINDOWS:
        raise OptionError(f"--window {window}: give one of {', '.join(WINDOWS)}")

    protect = protected(inputs)
    if out is not None:
        from tfprof.output import check_target

        check_target(out, force=force, inputs=protect, what="--out")
    rows = breakdown(load_profile(**inputs), window, drop_last_step, total, unlinked)
    if fmt == "table" and out is None:
        typer.echo(steps_report(rows), nl=False)
        return
    emit(rows, fmt, out, force=force, inputs=protect)

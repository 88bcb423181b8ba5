"""``tfprof memory``: memory in use over time per allocator, each step's peak and the ops at it
(``tfprof.api.memory``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from tfprof.cli.app import FORMAT_HELP, Force, app, emit, load_profile, protected, takes_inputs


@app.command()
@takes_inputs()
def memory(
    inputs: dict,
    step: Annotated[Optional[int], typer.Option("--step", help="The step whose peak to break down (default: the highest peak).")] = None,
    allocator: Annotated[Optional[str], typer.Option("--allocator", help="The allocator (default: the one with the highest peak).")] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Ops listed at the peak.")] = 10,
    fmt: Annotated[str, typer.Option("--format", "-f", help=FORMAT_HELP)] = "table",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the rows to this file, not stdout.")] = None,
    force: Force = False,
) -> None:
    """Memory in use over time: for each allocator and step, the bytes in use before it, at its
    peak (and when), after it, and what was allocated and freed; then the ops that had allocated
    the most when the peak came.

    The levels are the allocator's own where the trace records them (PyTorch's `Total
    Allocated`, XSpace's `bytes_allocated`, a tfprof profile's GPU `allocator_bytes_in_use`, as
    tfprof's timeline draws it); elsewhere a running sum of the allocation events from the
    capture's first (marked *); on a device of a tfprof profile with neither (a CPU), an estimate
    from its ops' peak and residual bytes (marked ~). PyTorch's `Total Reserved` is shown beside
    them. `--format csv|json|parquet` gives the per-step rows.

    Examples:

      tfprof memory trace.pt.trace.json.gz

      tfprof memory run.xplane.pb --allocator GPU_0_bfc --step 3 --top 20

      tfprof memory trace.pt.trace.json.gz --format csv --out memory.csv
    """
    from tfprof.api.memory import memory as rows_of
    from tfprof.api.memory import memory_report

    protect = protected(inputs)
    if out is not None:
        from tfprof.output import check_target

        check_target(out, force=force, inputs=protect, what="--out")
    prof = load_profile(**inputs)
    if fmt == "table" and out is None:
        typer.echo(memory_report(prof, step, allocator, top), nl=False)
        return
    emit(rows_of(prof), fmt, out, force=force, inputs=protect)

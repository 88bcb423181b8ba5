"""``tfprof overview``: what to look at first in a profile (``tfprof.api.overview``)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tfprof.cli.app import app, load_profile, takes_inputs


@app.command()
@takes_inputs()
def overview(
    inputs: dict,
    fmt: Annotated[str, typer.Option("--format", "-f", help="text (the default) or json")] = "text",
) -> None:
    """What to look at first: the profile's facts, the op types that take the time (each with
    its share of all ops), each step's time and how busy its GPUs were, and the advisor's
    first finding of each checker. The web UI opens on the same page.

    Examples:

      tfprof overview run.tfprof

      tfprof overview trace.pt.trace.json.gz --format json
    """
    from tfprof.api.overview import findings, overview_report
    from tfprof.api.overview import overview as run
    from tfprof.errors import OptionError

    if fmt not in ("text", "json"):
        raise OptionError(f"Unknown --format `{fmt}`; valid: text, json")
    prof = load_profile(**inputs)
    found, said = run(prof), findings(prof)
    if fmt == "json":
        typer.echo(json.dumps({**found, "findings": said}, indent=1))
    else:
        typer.echo(overview_report(found, said), nl=False)

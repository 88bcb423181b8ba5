"""``tfprof ui``: serve the web UI (``tfprof.ui``) on the profiles given, until Ctrl-C."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tfprof.cli.app import app, load_profile


@app.command()
def ui(
    profiles: Annotated[
        list[Path] | None, typer.Argument(metavar="PROFILE", help="Profiles (files or store directories), or a "
                                          "distributed job's traces (a profile per rank): their directory or a glob "
                                          "pattern (quoted).")
    ] = None,
    catalog: Annotated[Path | None, typer.Option("--catalog", help="A catalog: with --run, its run's profile (a "
                                                 "job's run: a profile per rank).")] = None,
    run: Annotated[str | None, typer.Option("--run", help="The run of --catalog to open.")] = None,
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0: any free port).")] = 8765,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on; the default serves this machine only.")
    ] = "127.0.0.1",
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Do not open a browser.")] = False,
    query_timeout: Annotated[
        float, typer.Option("--query-timeout", metavar="SECONDS", help="Stop a SQL query after this long (0: no limit).")
    ] = 30.0,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", metavar="NAME", help="Also answer requests addressed to NAME (a DNS alias, "
                     "a proxy's name); repeatable. By default only this server's own address and localhost."),
    ] = None,
) -> None:
    """Explore profiles in the browser: the four views as tree-tables with every option, a flame
    graph, one step's timeline, the advisor and a SQL console; side by side for two profiles; a
    distributed job's ranks compared.

    Prints the URL and serves until Ctrl-C. Nothing is fetched from outside this server. It
    answers only requests addressed to it (127.0.0.1, localhost, the --host given; with --host
    0.0.0.0 also this machine's name and addresses) and API calls only from the page it served.

    Examples:

      tfprof ui run.tfprof

      tfprof ui before.tfprof after.tfprof --port 9000 --no-browser

      tfprof ui run.tfprof --host 0.0.0.0 --allow-host workstation.lan --query-timeout 120

      tfprof ui traces/                                  # a job: a profile per rank, the Ranks page

      tfprof ui traces/rank-*.pt.trace.json.gz           # the same: traces that record (or name) their ranks

      tfprof ui --catalog runs/ --run job-0412
    """
    from tfprof.cli.app import require_inputs
    from tfprof.errors import OptionError

    if not 0 <= port <= 65535:
        raise OptionError(f"--port takes 0 to 65535, not `{port}`")
    for p in (profiles or []) if catalog is None else ():
        require_inputs(profile_path=p)
    from tfprof.ui import checked_timeout, serve_until_interrupted, start

    checked_timeout(query_timeout)
    if (catalog is None) == (not profiles) or (catalog is None) != (run is None):
        raise OptionError("give profiles, or --catalog DIR --run NAME, not both")
    if catalog is not None:
        from tfprof.catalog import job_ranks, member_profiles
        from tfprof.catalog.storage import location

        catalog = location(catalog)  # an s3:// URI stays one
        ranks = job_ranks(catalog, run)
        loaded = list(member_profiles(catalog, [(run, r) for r in ranks] if ranks else [(run, None)]))
        labels = [f"{run}/rank-{r}" for r in ranks] if ranks else [run]
        job = bool(ranks)
    else:
        from tfprof.ui.profiles import expand_jobs, given_as_job

        # a directory that is not a store, or a glob pattern: a job's traces, a profile each
        paths, _ = expand_jobs(profiles, None)
        loaded = [load_profile(profile_path=p) for p in paths]
        labels = [str(p) for p in paths]
        job = given_as_job(profiles)
    running = start(loaded, host=host, port=port, labels=labels, query_timeout=query_timeout,
                    allow_hosts=allow_host or (), job=job)
    print(f"tfprof ui: serving {len(loaded)} profile{'s' if len(loaded) > 1 else ''} at {running.url}  (Ctrl-C stops)",
          flush=True)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"Warning: listening on {host}: anyone who can reach it can read these profiles", file=sys.stderr)
    if not no_browser:
        import webbrowser

        webbrowser.open(running.url)
    serve_until_interrupted(running)

"""``tfprof server status|stop``: shows or stops this user's resident tfprof server
(``tfprof.cli.server``), which one-shot commands go through to start fast."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from tfprof.cli import resident
from tfprof.cli.app import app
from tfprof.errors import OptionError


@app.command()
def server(
    action: Annotated[str, typer.Argument(help="status (the default) or stop.")] = "status",
) -> None:
    """Show or stop the resident server that one-shot commands (views, advise, sql, check,
    tables) go through: it keeps tfprof imported and its kernels loaded, so a command on a
    large store answers in about a tenth of a second instead of a second.

    The first such command starts it in the background; it serves only you, through a socket
    in a folder only you can enter, runs one command at a time in your working directory with
    your environment, and exits after TFPROF_SERVER_IDLE seconds (600) without a command or
    when tfprof or a library it uses is updated. A command with other resource limits (ulimit),
    TMPDIR or rights than the server's gets a server of its own; one under a CPU-time or memory
    ulimit runs in its own process. TFPROF_SERVER=0 turns it off (off by default where CI is set).

    Examples:

      tfprof server

      tfprof server stop
    """
    if action not in ("status", "stop"):
        raise OptionError(f"unknown server action `{action}`; valid: status, stop")
    if not resident.enabled():
        typer.echo("The tfprof server is off (TFPROF_SERVER=0, or CI is set).")
        return
    if action == "stop":
        typer.echo("Stopped the tfprof server." if resident.stop() else "No tfprof server is running.")
        return
    facts = resident.status()
    if facts is None:
        typer.echo(f"No tfprof server is running (it would listen on {resident.socket_path()}).")
        return
    up = time.time() - facts["started"]
    typer.echo(f"tfprof server: pid {facts['pid']}, up {up:.0f} s, {facts['served']} commands served, "
               f"exits after {facts['idle_s']:.0f} s idle\nsocket: {facts['socket']}")

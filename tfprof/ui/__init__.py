"""``tfprof ui``: the profiles in a browser — the four views as tree-tables, a flame graph, one
step's timeline, the advisor and a SQL console — served on this machine only.

The server is an ASGI app on Starlette, run by uvicorn. Why these: Starlette is a small
routing layer over the standard ASGI interface (no ORM, no templating, no build step), its
test client drives the app in-process for the API tests, and uvicorn is the reference ASGI
server. The page is our own HTML, CSS and JavaScript shipped as package data
(``tfprof/ui/static``): nothing to build, nothing fetched from a CDN, no request leaves the
server.

``start(items)`` runs it in a background thread and returns a ``Running`` server (its ``url``;
``stop()``), which is what ``tfprof.ui(...)`` does (in a notebook it shows the page in an
IFrame); ``tfprof ui`` then waits for Ctrl-C (``serve_until_interrupted``). It binds 127.0.0.1
unless told otherwise; the requests name profiles only by id (``tfprof.ui.profiles``). It answers
only requests that name it (``Host``), API calls only with the token of the page it served
(``Running.token``, sent as ``X-Tfprof-Token``; ``tfprof.ui.guard``), and stops a query whose
client went away or that ran past ``query_timeout`` seconds (``tfprof.ui.jobs``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfprof.profile import Profile

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_QUERY_TIMEOUT = 30.0


@dataclass
class Running:
    """A UI server running in a background thread."""

    url: str
    server: Any = field(repr=False)
    thread: threading.Thread = field(repr=False)
    # what the API takes in its X-Tfprof-Token header (the page carries it): never in a repr,
    # which a notebook's output cell would keep
    token: str = field(repr=False)

    def stop(self, timeout: float = 5.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)

    def _repr_html_(self) -> str:
        return (f'<iframe src="{self.url}" width="100%" height="720" style="border:1px solid #ccd"></iframe>'
                f'<p><a href="{self.url}" target="_blank">{self.url}</a></p>')

    def __str__(self) -> str:
        return self.url


def checked_timeout(seconds: float | None) -> float | None:
    """A query time limit in seconds, or None for none (``seconds`` 0 or None)."""
    from tfprof.errors import OptionError

    if seconds is not None and not 0 <= seconds < 10**9:
        raise OptionError(f"--query-timeout takes seconds, 0 for no limit, not `{seconds}`")
    return seconds or None


def _items(profile_or_paths: Any) -> list[str | Path | Profile]:
    if isinstance(profile_or_paths, (str, Path, Profile)):
        return [profile_or_paths]
    return list(profile_or_paths)


def make_server(items: Iterable[str | Path | Profile], host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                warm: bool = True, labels: list[str] | None = None, *,
                query_timeout: float | None = DEFAULT_QUERY_TIMEOUT, allow_hosts: Iterable[str] = (),
                job: bool | None = None):
    """A uvicorn server for the UI over ``items`` (profile paths or loaded profiles), its socket,
    the URL it serves and its API token. ``port`` 0 picks a free port. With ``warm`` the first
    profile's scope view is built before the server answers, so the page's first paint does not
    wait for it. ``allow_hosts``: more names the server answers to (``guard.host_names``);
    ``job``: whether the items were given as one job's traces (``Profiles.load``)."""
    import uvicorn

    from tfprof.api.options import Options
    from tfprof.errors import OptionError
    from tfprof.ui.app import make_app
    from tfprof.ui.guard import host_names, new_token
    from tfprof.ui.profiles import Profiles

    query_timeout = checked_timeout(query_timeout)
    profiles = Profiles.load(_items(items), labels, job=job)
    if warm:
        profiles.tree("0", "scope", Options())
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OptionError(f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port") from None
    port = sock.getsockname()[1]
    token = new_token()
    app = make_app(profiles, token=token, hosts=host_names(host, allow_hosts), query_timeout=query_timeout)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    shown = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(host, f"[{host}]" if ":" in host else host)
    return server, sock, f"http://{shown}:{port}/", token  # every interface: this machine's own address


def start(profile_or_paths: Any, host: str = DEFAULT_HOST, port: int = 0, labels: list[str] | None = None, *,
          query_timeout: float | None = DEFAULT_QUERY_TIMEOUT, allow_hosts: Iterable[str] = (),
          job: bool | None = None) -> Running:
    """Serve the UI in a background thread; returns once it answers (``Running.url``). A query
    stops after ``query_timeout`` seconds (0 or None: no limit); ``job``: as ``make_server``."""
    server, sock, url, token = make_server(_items(profile_or_paths), host, port, labels=labels,
                                           query_timeout=query_timeout, allow_hosts=allow_hosts, job=job)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="tfprof-ui")
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.02)
    return Running(url, server, thread, token)


def serve_until_interrupted(running: Running) -> None:
    """Wait in this (main) thread until Ctrl-C, then stop the server and let the interrupt go on."""
    try:
        while running.thread.is_alive():
            running.thread.join(0.2)
    except KeyboardInterrupt:
        running.stop()
        raise

"""A request's work in a worker thread, stopped when its client goes away or its query runs too long.

The profiles' lock lets one request work at a time (``tfprof.ui.profiles``), so a query left
running would hold the whole UI. ``run`` therefore watches the connection while the worker
thread works: once the client has gone, or the DuckDB query the request runs (``Job.query``)
has run ``timeout`` seconds, the query's connection is interrupted (``con.interrupt()``, which
``tfprof.sqlbox.query`` turns into KeyboardInterrupt), the worker raises ``Stopped`` and the
lock is free again. A request whose client left while it waited for the lock does no work.
The interrupt is repeated every ``TICK`` until the worker is done: one sent just before DuckDB
starts the query would be lost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread
import duckdb
from starlette.types import Receive

from tfprof.errors import TfprofError

T = TypeVar("T")
TICK = 0.1
GONE = "the client went away"


class Stopped(TfprofError):
    """The request's query was interrupted: its client went away, or it ran past the time limit."""


class Job:
    """One request's work, as the watcher sees it: the query running, if any, and why to stop."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.reason: str | None = None
        self._con: duckdb.DuckDBPyConnection | None = None
        self._since = 0.0
        self._lock = threading.Lock()

    def check(self) -> None:
        """Raise ``Stopped`` if the request is to stop (called by the worker before it works)."""
        if self.reason:
            raise Stopped(self.reason)

    def query(self, con: duckdb.DuckDBPyConnection, run: Callable[[], T]) -> T:
        """``run()``, a query on ``con``, interruptible by the watcher (worker thread)."""
        with self._lock:
            self.check()
            self._con, self._since = con, time.monotonic()
        try:
            return run()
        except BaseException as exc:  # noqa: BLE001 - whatever an interrupted query raised
            if self.reason or isinstance(exc, KeyboardInterrupt):
                raise Stopped(self.reason or "the query was interrupted") from None
            raise
        finally:
            with self._lock:
                self._con = None

    def stop(self, reason: str) -> None:
        """Stop the work for ``reason``: interrupt its query, if one runs (event loop)."""
        with self._lock:
            self.reason = self.reason or reason
            if self._con is not None:
                self._con.interrupt()

    def tick(self) -> None:
        """Interrupt a query past its time limit, and again one already stopped (event loop)."""
        with self._lock:
            running = self._con is not None
            late = running and self.timeout and time.monotonic() - self._since > self.timeout
        if late and not self.reason:
            self.stop(f"the query was stopped after {self.timeout:g} s, the UI's time limit "
                      "(tfprof ui --query-timeout SECONDS)")
        elif running and self.reason:
            self.stop(self.reason)


async def _until_gone(receive: Receive, job: Job) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass  # the request's body, already read or empty
    job.stop(GONE)


async def run(receive: Receive, work: Callable[[Job], T], timeout: float | None) -> T:
    """``work(job)`` in a worker thread, while ``receive`` (the request's ASGI channel) is watched
    for the client going away and the job's query for its time limit."""
    job = Job(timeout)

    async def watch() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_until_gone, receive, job)
            while True:
                await anyio.sleep(TICK)
                job.tick()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch)
        try:
            return await anyio.to_thread.run_sync(work, job)
        finally:
            tasks.cancel_scope.cancel()

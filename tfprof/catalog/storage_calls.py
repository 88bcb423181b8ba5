"""Calls to object storage (``tfprof.catalog.storage``): their time limits, the thread each runs
on, and what a call reports besides the service's own errors.

Every call has time limits: ``TFPROF_CATALOG_CONNECT_TIMEOUT`` (10 s) to connect and
``TFPROF_CATALOG_READ_TIMEOUT`` (30 s) without a byte, per attempt (``ATTEMPTS``); a
``gs://`` call, whose client takes no such limits, is abandoned after three times both. A
call runs on a thread of its own while the calling thread waits in short steps (``bounded``),
so that Ctrl-C and SIGTERM end a command at once even while the service does not answer (the
command line then exits without waiting for that thread: ``abandoned``).
"""

from __future__ import annotations

import os
import threading
import time

from tfprof.errors import InputError, OptionError, ProfileFormatError
from tfprof.ingest.sources import one_line as shown

ATTEMPTS = 3  # tries of a call (boto3's and pyarrow's retries)


class PreconditionFailed(Exception):
    """A conditional write or delete found another version than the one it named."""


class ObjectTooLarge(ProfileFormatError):
    """An object holds more bytes than may be read of it (``size``); none were read. ``etag`` and
    ``response`` are the first range's (for a damaged lock, replaced by that version)."""

    def __init__(self, url: str, size: int, limit: int, etag: str | None = None, response: dict | None = None):
        super().__init__(f"`{url}` holds {size:,} bytes, more than the {limit:,} it may; it was not downloaded")
        self.size, self.etag, self.response = size, etag, response or {}


class ObjectChanged(InputError):
    """An object was replaced while it was read in ranges."""



def timeouts() -> tuple[float, float]:
    """Seconds to connect and to wait for a byte, per attempt: ``TFPROF_CATALOG_CONNECT_TIMEOUT``
    (10) and ``TFPROF_CATALOG_READ_TIMEOUT`` (30)."""
    return (seconds_setting("TFPROF_CATALOG_CONNECT_TIMEOUT", "10", 0.1),
            seconds_setting("TFPROF_CATALOG_READ_TIMEOUT", "30", 0.1))


_STUCK: list[threading.Thread] = []  # calls given up on (a stop, a time limit) still on their threads


def abandoned() -> bool:
    """Whether a call to object storage that was given up on still runs on its thread: the
    command line then exits at once rather than wait for it at the interpreter's exit (and
    pyarrow's S3 shutdown would abort under it)."""
    _STUCK[:] = [t for t in _STUCK if t.is_alive()]
    return bool(_STUCK)



def bounded(work, limit: float | None):
    """``work()`` on a daemon thread, waited for at most ``limit`` seconds (a ``TimeoutError``
    beyond; None: as long as it takes). The wait is one a signal interrupts, so Ctrl-C and
    SIGTERM end the caller at once even while the call blocks in native code."""
    box: dict = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True, name="tfprof-storage-call")
    thread.start()
    end = None if limit is None else time.monotonic() + limit
    try:
        # in short waits: a signal the kernel hands to another thread (the one in recv) wakes
        # no wait of this one, and Python runs its handler only here, between two waits
        while not (finished := done.wait(0.05)) and (end is None or time.monotonic() < end):
            pass
    except BaseException:  # a stop: the call is left to its thread
        _STUCK.append(thread)
        raise
    if not finished:
        _STUCK.append(thread)
        raise TimeoutError(f"no answer within {limit:g} s")
    if "error" in box:
        raise box.pop("error")
    return box["value"]


def timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` (ours, botocore's, pyarrow's) says the service did not answer in time."""
    text = str(exc)
    return isinstance(exc, TimeoutError) or type(exc).__name__ in ("ConnectTimeoutError", "ReadTimeoutError") \
        or "curlCode: 28" in text or "Timeout was reached" in text or "timed out" in text



def seconds_setting(name: str, default: str, low: float) -> float:
    value = os.environ.get(name, default).strip() or default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1
    if not low <= seconds <= 86400:
        raise OptionError(f"{name}=`{shown(value)}` is not a number of seconds from {low:g} to 86400")
    return seconds

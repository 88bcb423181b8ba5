"""The writers' lock of a catalog in object storage (``tfprof.catalog.storage``), for a store
that has no flock.

The lock is the object ``PREFIX/.lock``, created with ``If-None-Match: *``: exactly one
writer's create succeeds. It holds the owner's token and a lifetime (``TFPROF_CATALOG_LOCK_TTL``
seconds, 60 by default); its owner renews it (``If-Match`` on its own version) every third of
that while it holds it. A lock not renewed within its lifetime, measured on the server's clock
(its Last-Modified against the Date of the response that read it), belongs to a writer that
died: the next writer replaces it with ``If-Match`` on the version it found, so two writers
cannot both break it. Where the server sends no Date, a lock counts as dead once this writer
has seen the same version (ETag) for longer than its lifetime. A lock object that is not one
(not JSON, no owner, a lifetime that is not a number of seconds from 1 to 86400: NaN,
Infinity, negative, huge, a string; more than ``LOCK_LIMIT`` bytes) is damaged: it is reported
on one ``Warning:`` line and replaced as a dead writer's.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import os
import secrets
import sys
import threading
import time

from tfprof.catalog.storage_calls import ObjectTooLarge, PreconditionFailed, seconds_setting
from tfprof.errors import OutputError
from tfprof.ingest.sources import one_line as shown

LOCK_KEY = ".lock"
LOCK_LIMIT = 4096  # bytes: a lock object is about 80
MAX_TTL = 86400.0


def lock_ttl() -> float:
    """How long a writer's lock lives unless renewed: ``TFPROF_CATALOG_LOCK_TTL`` (60 s)."""
    return seconds_setting("TFPROF_CATALOG_LOCK_TTL", "60", 1)


class WriterLock:
    """The writers' lock of an object-store catalog (see the module docstring): ``acquire``
    waits for it (breaking a dead writer's), a thread renews it, ``confirm`` renews it once
    more right before a commit and fails if it was lost, ``release`` deletes it if still ours."""

    def __init__(self, store) -> None:  # a tfprof.catalog.storage.ObjectStore
        self.store, self.ttl, self.token = store, lock_ttl(), secrets.token_hex(8)
        self.etag: str | None = None
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()

    def _body(self) -> bytes:
        return json.dumps({"owner": self.token, "ttl": self.ttl, "pid": os.getpid()}).encode()

    def acquire(self) -> None:
        wait = seconds_setting("TFPROF_CATALOG_LOCK_WAIT", "600", 0)  # how long to wait for another writer
        deadline = time.monotonic() + wait
        delay = 0.05
        seen: dict[str, float] = {}  # each version of the lock found, and when (this process's clock)
        while True:
            try:
                self.etag = self.store.put(LOCK_KEY, self._body(), if_absent=True)
                break
            except PreconditionFailed:
                pass
            try:
                found = self.store.get(LOCK_KEY, limit=LOCK_LIMIT)
            except ObjectTooLarge as big:  # not a lock: damaged, replaced as the version found
                found = (None, big.etag, big.response)
            if found is not None and self._dead(found, seen):
                try:  # replace the dead writer's lock, only the version we found
                    self.etag = self.store.put(LOCK_KEY, self._body(), if_match=found[1])
                    break
                except (PreconditionFailed, FileNotFoundError):
                    pass
            if time.monotonic() > deadline:
                raise OutputError(f"the catalog `{self.store.uri}` is being written by another writer (its lock "
                                  f"`{self.store.url(LOCK_KEY)}` was held for {wait:.0f} s); try again later")
            time.sleep(delay + secrets.randbelow(50) / 1000)
            delay = min(delay * 2, 1.0)
        self._thread = threading.Thread(target=self._renew_loop, daemon=True, name="tfprof-catalog-lock")
        self._thread.start()

    def _renew(self) -> None:
        with self._mutex:
            if self.lost:
                return
            try:
                self.etag = self.store.put(LOCK_KEY, self._body(), if_match=self.etag)
            except (PreconditionFailed, FileNotFoundError):
                self.lost = True

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self._renew()
            except Exception:  # a failed renewal is retried; confirm() says if the lock was lost
                pass

    def confirm(self) -> None:
        """Renew the lock now; an ``OutputError`` if another writer has taken it (this writer
        was stalled longer than the lock's lifetime): nothing may be committed then."""
        self._renew()
        if self.lost:
            raise OutputError(f"the catalog `{self.store.uri}`'s lock was taken over while this writer held it "
                              f"(it stalled for more than TFPROF_CATALOG_LOCK_TTL={self.ttl:g} s); nothing was "
                              "committed: run the command again")

    def _dead(self, found: tuple, seen: dict[str, float]) -> bool:
        """Whether the lock ``found`` (body, ETag, response) belongs to a dead writer: not renewed
        within its lifetime on the server's clock (or, without one, seen unchanged that long
        here), or damaged (reported on one ``Warning:`` line)."""
        body, etag, response = found
        first = seen.setdefault(etag, time.monotonic())
        ttl, damage = lock_lifetime(body)
        if damage:
            print(f"Warning: the lock `{self.store.url(LOCK_KEY)}` of the catalog is damaged ({damage}); it is "
                  "taken as a dead writer's and replaced", file=sys.stderr)
            return True
        age = server_age(response)
        return (time.monotonic() - first if age is None else age) > ttl

    def release(self, quick: bool = False) -> None:
        """Stop renewing and delete the lock if still ours; ``quick`` (the command is being
        stopped): wait for neither longer than a second, the lock then dies by its lifetime."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(0.5 if quick else None)
        if not self._mutex.acquire(timeout=0.5 if quick else -1):
            return
        try:
            if not self.lost and self.etag:
                with contextlib.suppress(Exception):
                    self.store.delete(LOCK_KEY, if_match=self.etag, limit=0.5 if quick else None)
        finally:
            self._mutex.release()


def lock_lifetime(body: bytes | None) -> tuple[float, str | None]:
    """The lifetime in seconds a lock object states, and why it is damaged (None when it is not):
    a lock must be a JSON object naming its owner and a lifetime from 1 to 86400 seconds, so that
    NaN, Infinity, a negative, huge or quoted lifetime never makes a lock that lives forever."""
    if body is None:
        return 0.0, f"it holds more than {LOCK_LIMIT:,} bytes"
    try:
        lock = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return 0.0, "it is not JSON"
    if not isinstance(lock, dict) or not isinstance(lock.get("owner"), str):
        return 0.0, "it names no owner"
    ttl = lock.get("ttl")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 1 <= ttl <= MAX_TTL:
        return 0.0, f"its lifetime `{shown(json.dumps(ttl), 40)}` is not a number of seconds from 1 to {MAX_TTL:.0f}"
    return float(ttl), None


def server_age(response: dict) -> float | None:
    """Seconds since the object of ``response`` was last written, on the server's clock (its
    Last-Modified against the response's Date); None when the server sent either not."""
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    try:
        now = email.utils.parsedate_to_datetime(headers["date"]).timestamp()
        return now - response["LastModified"].timestamp()
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        return None

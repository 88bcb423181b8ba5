"""Catalogs in object storage (``s3://bucket/prefix``, ``gs://bucket/prefix``): where the
catalog is and how its objects are read and written (``ObjectStore``).

Reads go through pyarrow's filesystems (``pyarrow.fs.S3FileSystem``, ``GcsFileSystem``).
Writes need what a filesystem does not offer, conditional writes: for ``s3://`` they go through
boto3 (``pip install 'tfprof[s3]'``), with ``If-None-Match: *`` (create only if absent) and
``If-Match: <etag>`` (replace only the version read). ``gs://`` catalogs are read-only here.
The clients and their configuration: ``tfprof.catalog.storage_clients``; the time limits and
the thread each call runs on: ``tfprof.catalog.storage_calls``; the writers' lock:
``tfprof.catalog.storage_lock``.

What is read is bounded (docs/SECURITY.md, "Catalogs in object storage"): a partition by the
size the run list records, the run list by ``RUN_LIST_LIMIT``, the lock by ``LOCK_LIMIT``.
An object found larger is refused before its bytes are read; reads are ranged
(``Range: bytes=A-B``, one byte past the bound to see a larger object), and each range after
the first names the first one's ETag (``If-Match``), so an object replaced while it is read is
one error, never a mix of two versions (``s3://`` through boto3; ``gs://``, and ``s3://``
without boto3, read through pyarrow: the size is checked before the read, and a change shows
as a short read or a checksum that differs).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

from tfprof.catalog.storage_calls import (  # noqa: F401 - also used as storage.*
    ATTEMPTS,
    ObjectChanged,
    ObjectTooLarge,
    PreconditionFailed,
    abandoned,
    bounded,
    timed_out,
    timeouts,
)
from tfprof.catalog.storage_clients import filesystem, reached, s3_client  # noqa: F401 - reached: storage.*
from tfprof.catalog.storage_lock import (  # noqa: F401 - also used as storage.*
    LOCK_KEY,
    LOCK_LIMIT,
    WriterLock,
    lock_lifetime,
    lock_ttl,
    server_age,
)
from tfprof.catalog.uri import SCHEMES, location, object_uri  # noqa: F401 - also used as storage.*
from tfprof.errors import (
    InputError,
    InputNotFoundError,
    MissingDependencyError,
    OptionError,
    ProfileFormatError,
    TfprofError,
)
from tfprof.ingest.sources import one_line as shown

RUN_LIST_LIMIT = 256 << 20  # bytes: the most of runs.parquet that is read (100,000 runs take about 30 MB)
CHUNK = 32 << 20  # bytes per ranged read


class ObjectStore:
    """A catalog at ``uri`` (``s3://bucket/prefix``): its objects by path relative to the
    prefix. Every failure of the store is a one-line ``TfprofError`` naming the URI."""

    def __init__(self, uri: str) -> None:
        uri = object_uri(uri) or uri  # a URI with credentials in it is refused, masked
        parsed = urlparse(uri)
        self.uri, self.scheme, self.bucket = uri, parsed.scheme, parsed.netloc
        self.prefix = parsed.path.strip("/")
        if not self.bucket or parsed.query or parsed.fragment or ".." in self.prefix.split("/") or "//" in parsed.path:
            raise OptionError(f"bad --catalog `{shown(uri)}`: give {self.scheme}://BUCKET/PREFIX (no query, no `..`)")
        self._fs = None
        self._client = None
        self._opening = threading.Lock()

    # ------------------------------------------------------------------ names
    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def path(self, rel: str) -> str:
        """``rel`` as pyarrow's filesystems name it (bucket/key)."""
        return f"{self.bucket}/{self.key(rel)}"

    def url(self, rel: str) -> str:
        return f"{self.uri}/{rel}"

    # ------------------------------------------------------------------ clients
    @property
    def fs(self):
        """pyarrow's filesystem for the store (for reads: ``storage_clients.filesystem``)."""
        with self._opening:
            if self._fs is None:
                with self.errors("open"):
                    self._fs = filesystem(self)
        return self._fs

    @property
    def client(self):
        """boto3's S3 client (for conditional writes); a ``MissingDependencyError`` without boto3."""
        if self.scheme != "s3":
            raise OptionError(f"the catalog `{self.uri}` is read-only here: adding and removing runs needs "
                              "conditional writes, which tfprof does for s3:// only (GCS: use its S3 "
                              "interface with AWS_ENDPOINT_URL=https://storage.googleapis.com)")
        with self._opening:
            if self._client is None:
                self._client = s3_client(self.uri)
        return self._client

    def _with_boto3(self) -> bool:
        """Whether reads go through boto3 (``s3://`` with boto3 installed: ranges with If-Match)."""
        if self.scheme != "s3":
            return False
        try:
            self.client  # noqa: B018
        except MissingDependencyError:
            return False
        return True

    def _do(self, doing: str, rel: str | None, work, limit: float | None = None):
        """``work()`` for ``doing``, its failures as one-line errors (``errors``), on a thread of
        its own (``storage_calls.bounded``): a ``gs://`` call is given up after ``ATTEMPTS`` times both time
        limits (its client takes none), an ``s3://`` call ends by its client's own limits."""
        if limit is None and self.scheme == "gs":
            limit = ATTEMPTS * sum(timeouts())
        with self.errors(doing, rel):
            return bounded(work, limit)

    @contextlib.contextmanager
    def errors(self, doing: str, rel: str | None = None) -> Iterator[None]:
        """Turn the store's failures while ``doing`` into one-line errors naming the URI."""
        where = self.url(rel) if rel else self.uri
        try:
            yield
        except (PreconditionFailed, FileNotFoundError, TfprofError):
            raise
        except Exception as exc:  # botocore's and pyarrow's errors: one line, what to do
            if timed_out(exc):
                connect, read = timeouts()
                raise InputError(f"cannot {doing} `{where}`: the storage service did not answer in time "
                                 f"(TFPROF_CATALOG_CONNECT_TIMEOUT={connect:g} s, TFPROF_CATALOG_READ_TIMEOUT="
                                 f"{read:g} s, {ATTEMPTS} attempts); check the network and the endpoint "
                                 "(AWS_ENDPOINT_URL), or raise the time limits") from None
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", "") if hasattr(exc, "response") else ""
            text = shown(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__, 300)
            if code in ("NoSuchBucket",) or "NoSuchBucket" in text or "does not exist" in text and "ucket" in text:
                raise InputNotFoundError(f"the bucket of `{self.uri}` does not exist ({text}); create it or "
                                         "check the URI and AWS_ENDPOINT_URL") from None
            denied = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ACCESS_DENIED", "403")
            if type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError") or code in denied or any(
                    d in text for d in denied[:4]):
                raise OptionError(f"cannot {doing} `{where}`: access refused ({text}); set AWS_ACCESS_KEY_ID and "
                                  "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) to credentials that may use the "
                                  "bucket") from None
            if isinstance(exc, (OSError, ValueError)) or type(exc).__module__.startswith(("botocore", "boto3")):
                raise ProfileFormatError(f"cannot {doing} `{where}`: {text}; check the URI, the credentials and "
                                         "AWS_ENDPOINT_URL") from None
            raise

    # ------------------------------------------------------------------ reads
    def read(self, rel: str, limit: int | None = None) -> bytes | None:
        """The object's bytes, None when it does not exist; at most ``limit`` of them
        (``RUN_LIST_LIMIT`` unless given): a larger object is ``ObjectTooLarge``, refused before
        its bytes are read (see the module docstring)."""
        limit = RUN_LIST_LIMIT if limit is None else limit
        if self._with_boto3():
            found = self.get(rel, limit=limit)
            return None if found is None else found[0]
        path = self.path(rel)
        try:
            f = self._do("read", rel, lambda: self.fs.open_input_file(path))  # its size (HEAD)
        except FileNotFoundError:
            return None
        try:
            size = f.size()
            if size > limit:
                raise ObjectTooLarge(self.url(rel), size, limit)
            parts, got = [], 0
            while got < size:
                want = min(CHUNK, size - got)
                part = self._do("read", rel, lambda at=got, n=want: f.read_at(n, at))
                if len(part) != want:
                    raise ObjectChanged(f"`{self.url(rel)}` changed while it was read (it ended at {got + len(part):,} "
                                        f"bytes, not {size:,}); run the command again")
                parts.append(part)
                got += want
            return b"".join(parts)
        finally:
            with contextlib.suppress(Exception):
                f.close()

    def exists_bucket(self) -> None:
        """An ``InputNotFoundError`` when the bucket does not exist."""
        from pyarrow import fs

        info = self._do("open", None, lambda: self.fs.get_file_info(self.bucket))
        if info.type == fs.FileType.NotFound:
            raise InputNotFoundError(f"the bucket of `{self.uri}` does not exist; create it or check the URI "
                                     "and AWS_ENDPOINT_URL")

    def list(self, rel: str = "") -> list[str]:
        """The keys under ``rel`` (a folder), relative to the catalog's prefix."""
        from pyarrow import fs

        base = self.path(rel).rstrip("/")
        infos = self._do("list", rel or None,
                         lambda: self.fs.get_file_info(fs.FileSelector(base, recursive=True, allow_not_found=True)))
        start = len(self.path("")) if self.prefix else len(self.bucket) + 1
        return sorted(i.path[start:] for i in infos if i.type == fs.FileType.File)

    # ------------------------------------------------------------------ writes (boto3)
    def _call(self, doing: str, rel: str, method: str, then=None, limit: float | None = None, **kwargs):
        """boto3's ``method`` on the object ``rel`` (and ``then(response)`` on the same thread:
        reading its body); a version condition that fails is ``PreconditionFailed``, a missing
        object ``FileNotFoundError``."""
        from botocore.exceptions import ClientError

        client = self.client

        def call():
            try:
                out = getattr(client, method)(Bucket=self.bucket, Key=self.key(rel), **kwargs)
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
                    raise PreconditionFailed(code) from None
                if code in ("NoSuchKey", "404"):
                    raise FileNotFoundError(self.url(rel)) from None
                raise
            return then(out) if then else out

        return self._do(doing, rel, call, limit)

    def get(self, rel: str, *, limit: int | None = None) -> tuple[bytes, str, dict] | None:
        """The object's bytes, ETag and first response (None when absent), through boto3, read in
        ranges of ``CHUNK`` and at most ``limit`` bytes (``RUN_LIST_LIMIT`` unless given): a
        larger object is ``ObjectTooLarge`` before its bytes are read; a range after the first
        names the first one's ETag (``If-Match``), and an object replaced meanwhile is
        ``ObjectChanged``."""
        limit = RUN_LIST_LIMIT if limit is None else limit
        parts: list[bytes] = []
        got, size, etag, first = 0, None, None, None
        while size is None or got < size:
            end = min(got + CHUNK, limit + 1) - 1  # one byte past the limit: a larger object shows

            def body(out: dict, got: int = got, end: int = end) -> tuple[dict, bytes]:
                """The range's bytes (none when the object is too large), read on the call's thread."""
                ranged = "ContentRange" in out  # else a server that ignores ranges sent it whole
                total = out.get("ContentRange", "").rpartition("/")[2]
                whole = int(total) if ranged and total.isdigit() else int(out.get("ContentLength") or 0)
                data = b""
                if whole <= limit:
                    if not ranged and got:
                        raise ObjectChanged(f"`{self.url(rel)}` was sent whole where a range was asked for; "
                                            "check AWS_ENDPOINT_URL")
                    data = out["Body"].read(end - got + 1 if ranged else limit + 1)
                out["Body"].close()
                return {**out, "_size": whole}, data

            try:
                out, data = self._call("read", rel, "get_object", then=body, Range=f"bytes={got}-{end}",
                                       **({"IfMatch": etag} if etag else {}))
            except FileNotFoundError:
                if etag is None:
                    return None
                raise ObjectChanged(f"`{self.url(rel)}` was deleted while it was read; run the command again") from None
            except PreconditionFailed:
                raise ObjectChanged(f"`{self.url(rel)}` changed while it was read (no longer version {etag}); "
                                    "another writer replaced it: run the command again") from None
            except InputError as exc:  # an empty object has no first byte to range over
                if got == 0 and ("InvalidRange" in str(exc) or "416" in str(exc)):
                    out = self._call("read", rel, "head_object")
                    if out.get("ContentLength", 0) == 0:
                        return b"", out["ETag"], out
                raise
            if etag is not None and out.get("ETag") != etag:
                raise ObjectChanged(f"`{self.url(rel)}` changed while it was read (version {etag}, then "
                                    f"{out.get('ETag')}); another writer replaced it: run the command again")
            etag, first = out.get("ETag"), first or out
            if size is not None and out["_size"] != size:
                raise ObjectChanged(f"`{self.url(rel)}` changed while it was read ({size:,} bytes, then "
                                    f"{out['_size']:,}); run the command again")
            size = out["_size"]
            if size > limit:
                raise ObjectTooLarge(self.url(rel), size, limit, etag, first)
            if not data and got < size:
                raise ObjectChanged(f"`{self.url(rel)}` ended at {got:,} bytes of {size:,} while it was read; "
                                    "run the command again")
            parts.append(data)
            got += len(data)
        return b"".join(parts), etag or "", first or {}

    def put(self, rel: str, data: bytes, *, if_match: str | None = None, if_absent: bool = False) -> str:
        """Write the object in one PUT (atomic: readers see the old or the new bytes); with
        ``if_match`` only over that version, with ``if_absent`` only if there is none
        (``PreconditionFailed`` otherwise). Returns the new ETag."""
        kwargs: dict = {"Body": data}
        if if_match:
            kwargs["IfMatch"] = if_match
        elif if_absent:
            kwargs["IfNoneMatch"] = "*"
        return self._call("write", rel, "put_object", **kwargs)["ETag"]

    def upload(self, local: Path, rel: str) -> None:
        client = self.client
        self._do("write", rel, lambda: client.upload_file(str(local), self.bucket, self.key(rel)))

    def delete(self, rel: str, *, if_match: str | None = None, limit: float | None = None) -> None:
        """Delete the object (gone already is fine)."""
        try:
            self._call("delete", rel, "delete_object", limit=limit, **({"IfMatch": if_match} if if_match else {}))
        except FileNotFoundError:
            pass

    # ------------------------------------------------------------------ the writers' lock
    @contextlib.contextmanager
    def locked(self) -> Iterator[WriterLock]:
        lock = WriterLock(self)
        lock.acquire()
        try:
            yield lock
        except BaseException as exc:
            lock.release(quick=not isinstance(exc, Exception))  # a stop: end now, the lock dies by its lifetime
            raise
        lock.release()

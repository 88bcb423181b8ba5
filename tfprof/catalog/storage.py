"""Catalogs in object storage (``s3://bucket/prefix``, ``gs://bucket/prefix``): where the
catalog is, how its objects are read and written, and the lock that serialises writers.

Reads go through pyarrow's filesystems (``pyarrow.fs.S3FileSystem``, ``GcsFileSystem``).
Writes need what a filesystem does not offer, conditional writes: for ``s3://`` they go through
boto3 (``pip install 'tfprof[s3]'``), with ``If-None-Match: *`` (create only if absent) and
``If-Match: <etag>`` (replace only the version read). ``gs://`` catalogs are read-only here.

Configuration is the AWS SDK's usual environment: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN`` (or a profile, ``AWS_PROFILE``),
``AWS_REGION`` / ``AWS_DEFAULT_REGION`` (us-east-1 when unset), and ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` for an S3-compatible server (MinIO, moto: ``http://127.0.0.1:9000``).

The writers' lock is the object ``PREFIX/.lock``, created with ``If-None-Match: *``: exactly one
writer's create succeeds. It holds the owner's token and a lifetime (``TFPROF_CATALOG_LOCK_TTL``
seconds, 60 by default); its owner renews it (``If-Match`` on its own version) every third of
that while it holds it. A lock not renewed within its lifetime, measured on the server's clock
(its Last-Modified against the Date of the response that read it), belongs to a writer that
died: the next writer replaces it with ``If-Match`` on the version it found, so two writers
cannot both break it.
"""

from __future__ import annotations

import atexit
import contextlib
import email.utils
import functools
import json
import os
import secrets
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

from tfprof.errors import InputNotFoundError, MissingDependencyError, OptionError, OutputError, ProfileFormatError
from tfprof.ingest.sources import one_line as shown

SCHEMES = ("s3", "gs")
LOCK_KEY = ".lock"


def object_uri(catalog: object) -> str | None:
    """``catalog`` as an object-store URI (``s3://bucket/prefix``) if it names one, else None
    (a local path). A ``Path`` made from a URI (``s3:/bucket/prefix``: the double slash
    collapsed) is recognised too."""
    text = os.fspath(catalog) if isinstance(catalog, (str, os.PathLike)) else None
    if not isinstance(text, str):
        return None
    for scheme in SCHEMES:
        if text.startswith(f"{scheme}://"):
            return text.rstrip("/")
        if isinstance(catalog, Path) and text.startswith(f"{scheme}:/") and not text.startswith(f"{scheme}://"):
            return f"{scheme}://{text[len(scheme) + 2:]}".rstrip("/")
    return None


def location(value: object):
    """A ``--catalog`` value as the catalog functions take it: an object-store URI as a string,
    anything else as a ``Path``."""
    return object_uri(value) or Path(value)


def _endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def _region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


_OPEN: weakref.WeakSet = weakref.WeakSet()  # the stores holding an S3 filesystem


@functools.cache
def _finalize_at_exit() -> None:
    """Drop every S3 filesystem before pyarrow shuts its S3 client down at exit (a handler
    registered later runs first): one still alive then can abort the process
    ("terminate called without an active exception")."""
    def drop() -> None:
        import gc

        for store in list(_OPEN):
            store._fs = None
        gc.collect()

    atexit.register(drop)


class PreconditionFailed(Exception):
    """A conditional write or delete found another version than the one it named."""


class ObjectStore:
    """A catalog at ``uri`` (``s3://bucket/prefix``): its objects by path relative to the
    prefix. Every failure of the store is a one-line ``TfprofError`` naming the URI."""

    def __init__(self, uri: str) -> None:
        parsed = urlparse(uri)
        self.uri, self.scheme, self.bucket = uri, parsed.scheme, parsed.netloc
        self.prefix = parsed.path.strip("/")
        if not self.bucket or parsed.query or parsed.fragment or ".." in self.prefix.split("/") or "//" in parsed.path:
            raise OptionError(f"bad --catalog `{shown(uri)}`: give {self.scheme}://BUCKET/PREFIX (no query, no `..`)")
        self._fs = None
        self._client = None

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
        """pyarrow's filesystem for the store (for reads)."""
        if self._fs is None:
            from pyarrow import fs

            with self.errors("open"):
                if self.scheme == "gs":
                    self._fs = fs.GcsFileSystem()
                else:
                    endpoint = _endpoint()
                    options: dict = {"region": _region()}
                    if endpoint:
                        ep = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
                        options.update(endpoint_override=ep.netloc + ep.path.rstrip("/"), scheme=ep.scheme)
                    self._fs = fs.S3FileSystem(**options)
                    _OPEN.add(self)
                    _finalize_at_exit()
        return self._fs

    @property
    def client(self):
        """boto3's S3 client (for conditional writes); a ``MissingDependencyError`` without boto3."""
        if self.scheme != "s3":
            raise OptionError(f"the catalog `{self.uri}` is read-only here: adding and removing runs needs "
                              "conditional writes, which tfprof does for s3:// only (GCS: use its S3 "
                              "interface with AWS_ENDPOINT_URL=https://storage.googleapis.com)")
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise MissingDependencyError(f"writing the catalog `{self.uri}` needs boto3: "
                                             "pip install 'tfprof[s3]'") from None
            config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10, read_timeout=60)
            self._client = boto3.client("s3", endpoint_url=_endpoint(), region_name=_region(), config=config)
        return self._client

    @contextlib.contextmanager
    def errors(self, doing: str, rel: str | None = None) -> Iterator[None]:
        """Turn the store's failures while ``doing`` into one-line errors naming the URI."""
        where = self.url(rel) if rel else self.uri
        try:
            yield
        except (PreconditionFailed, FileNotFoundError):
            raise
        except Exception as exc:  # botocore's and pyarrow's errors: one line, what to do
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

    # ------------------------------------------------------------------ reads (pyarrow)
    def read(self, rel: str) -> bytes | None:
        """The object's bytes, None when it does not exist."""
        with self.errors("read", rel):
            try:
                with self.fs.open_input_stream(self.path(rel)) as f:
                    return f.readall()
            except FileNotFoundError:
                return None

    def exists_bucket(self) -> None:
        """An ``InputNotFoundError`` when the bucket does not exist."""
        from pyarrow import fs

        with self.errors("open"):
            info = self.fs.get_file_info(self.bucket)
        if info.type == fs.FileType.NotFound:
            raise InputNotFoundError(f"the bucket of `{self.uri}` does not exist; create it or check the URI "
                                     "and AWS_ENDPOINT_URL")

    def list(self, rel: str = "") -> list[str]:
        """The keys under ``rel`` (a folder), relative to the catalog's prefix."""
        from pyarrow import fs

        base = self.path(rel).rstrip("/")
        with self.errors("list", rel or None):
            infos = self.fs.get_file_info(fs.FileSelector(base, recursive=True, allow_not_found=True))
        start = len(self.path("")) if self.prefix else len(self.bucket) + 1
        return sorted(i.path[start:] for i in infos if i.type == fs.FileType.File)

    # ------------------------------------------------------------------ writes (boto3)
    def _call(self, doing: str, rel: str, method: str, **kwargs):
        from botocore.exceptions import ClientError

        with self.errors(doing, rel):
            try:
                return getattr(self.client, method)(Bucket=self.bucket, Key=self.key(rel), **kwargs)
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
                    raise PreconditionFailed(code) from None
                if code in ("NoSuchKey", "404"):
                    raise FileNotFoundError(self.url(rel)) from None
                raise

    def get(self, rel: str) -> tuple[bytes, str, dict] | None:
        """The object's bytes, ETag and response (None when absent), through boto3."""
        try:
            out = self._call("read", rel, "get_object")
        except FileNotFoundError:
            return None
        with self.errors("read", rel):
            return out["Body"].read(), out["ETag"], out

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
        with self.errors("write", rel):
            self.client.upload_file(str(local), self.bucket, self.key(rel))

    def delete(self, rel: str, *, if_match: str | None = None) -> None:
        """Delete the object (gone already is fine)."""
        try:
            self._call("delete", rel, "delete_object", **({"IfMatch": if_match} if if_match else {}))
        except FileNotFoundError:
            pass

    # ------------------------------------------------------------------ the writers' lock
    @contextlib.contextmanager
    def locked(self) -> Iterator[WriterLock]:
        lock = WriterLock(self)
        lock.acquire()
        try:
            yield lock
        finally:
            lock.release()


def _seconds(name: str, default: str, low: float) -> float:
    value = os.environ.get(name, default).strip() or default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1
    if not low <= seconds <= 86400:
        raise OptionError(f"{name}=`{shown(value)}` is not a number of seconds from {low:g} to 86400")
    return seconds


def lock_ttl() -> float:
    """How long a writer's lock lives unless renewed: ``TFPROF_CATALOG_LOCK_TTL`` (60 s)."""
    return _seconds("TFPROF_CATALOG_LOCK_TTL", "60", 1)


class WriterLock:
    """The writers' lock of an object-store catalog (see the module docstring): ``acquire``
    waits for it (breaking a dead writer's), a thread renews it, ``confirm`` renews it once
    more right before a commit and fails if it was lost, ``release`` deletes it if still ours."""

    def __init__(self, store: ObjectStore) -> None:
        self.store, self.ttl, self.token = store, lock_ttl(), secrets.token_hex(8)
        self.etag: str | None = None
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()

    def _body(self) -> bytes:
        return json.dumps({"owner": self.token, "ttl": self.ttl, "pid": os.getpid()}).encode()

    def acquire(self) -> None:
        wait = _seconds("TFPROF_CATALOG_LOCK_WAIT", "600", 0)  # how long to wait for another writer
        deadline = time.monotonic() + wait
        delay = 0.05
        while True:
            try:
                self.etag = self.store.put(LOCK_KEY, self._body(), if_absent=True)
                break
            except PreconditionFailed:
                pass
            found = self.store.get(LOCK_KEY)
            if found is not None and _expired(*found):
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

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._mutex:
            if not self.lost and self.etag:
                with contextlib.suppress(Exception):
                    self.store.delete(LOCK_KEY, if_match=self.etag)


def _expired(body: bytes, _etag: str, response: dict) -> bool:
    """Whether a lock object was last written more than its lifetime ago, on the server's clock
    (a lock whose body cannot be read gets the default lifetime)."""
    try:
        ttl = float(json.loads(body)["ttl"])
    except (ValueError, KeyError, TypeError):
        ttl = lock_ttl()
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    try:
        now = email.utils.parsedate_to_datetime(headers["date"]).timestamp()
    except (KeyError, TypeError, ValueError):
        now = time.time()
    return now - response["LastModified"].timestamp() > ttl

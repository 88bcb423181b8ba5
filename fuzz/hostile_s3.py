"""The ``s3`` reader: a catalog in object storage whose service answers with hostile responses.

The store is a fake S3 in memory (``FakeS3``: boto3's client calls tfprof makes, with Range,
If-Match and If-None-Match, and pyarrow's listing and reads), so that inputs run at fuzzing
speed with no server. A template catalog of one run (``r1``) is added to it once; each input
then twists it and the service:

* byte 0: the lock object ``.lock`` holds section 1 as it is (odd), or none (even);
* byte 1: how the service lies (``LIES``) about the object byte 2 picks (objects are read in
  ranges of 4 KiB here): nothing; section 2 replaces it (its size and bytes differ from what
  the run list records); it changes between two ranges (a new ETag); ``Content-Range`` claims
  the total section 2 gives as a number; ranges are ignored and the object sent whole, padded
  with section 2; a Date header of section 2's text; a body longer than the range asked;
* section 3, when not empty, replaces ``runs.parquet``.

Sections follow the three bytes, separated by ``\\n--\\n``. Every step a user takes then runs
(list, read ``r1``, check, add ``r2``, remove ``r1``) under the contract: it succeeds or raises
one one-line ``TfprofError``; no response is read further than the run list records of the
object (``LOCK_LIMIT`` of a lock, ``RUN_LIST_LIMIT`` of the run list) and the one byte past
it that shows a larger object; and no step takes 30 s (a writer waits on a live lock for
``TFPROF_CATALOG_LOCK_WAIT``, 0.2 s here).
"""

from __future__ import annotations

import datetime
import email.utils
import hashlib
import io
import os
import time

LIES = ("none", "replace", "change_between_ranges", "content_range", "ignore_range", "date", "long_body")
URI = "s3://fuzz-bucket/cat"


def _Error(code: str) -> Exception:  # noqa: N802 - an exception's name
    """botocore's ClientError with ``code``, as S3 answers it."""
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": code}}, "FakeS3")


class FakeS3:
    """Objects by key: bytes and an ETag; ``lie`` and ``extra`` say how reads are answered."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str, datetime.datetime]] = {}
        self.lie, self.extra, self.target = "none", b"", None
        self.handed: list[tuple[str, _Body]] = []  # every response body handed out, by key

    # -- boto3's client
    def _store(self, key: str, data: bytes) -> str:
        etag = '"' + hashlib.md5(data).hexdigest() + '"'
        self.objects[key] = (data, etag, datetime.datetime.now(datetime.timezone.utc))
        return etag

    def put_object(self, Bucket, Key, Body, IfMatch=None, IfNoneMatch=None):  # noqa: N803 - boto3's names
        found = self.objects.get(Key)
        if (IfNoneMatch == "*" and found) or (IfMatch and (not found or found[1] != IfMatch)):
            raise _Error("PreconditionFailed")
        return {"ETag": self._store(Key, bytes(Body))}

    def delete_object(self, Bucket, Key, IfMatch=None):  # noqa: N803
        found = self.objects.get(Key)
        if IfMatch and found and found[1] != IfMatch:
            raise _Error("PreconditionFailed")
        self.objects.pop(Key, None)
        return {}

    def upload_file(self, local, bucket, key):
        with open(local, "rb") as f:
            self._store(key, f.read())

    def head_object(self, Bucket, Key):  # noqa: N803
        if Key not in self.objects:
            raise _Error("404")
        data, etag, when = self.objects[Key]
        return {"ContentLength": len(data), "ETag": etag, "LastModified": when}

    def get_object(self, Bucket, Key, Range=None, IfMatch=None):  # noqa: N803
        if Key not in self.objects:
            raise _Error("NoSuchKey")
        data, etag, when = self.objects[Key]
        if IfMatch and IfMatch != etag:
            raise _Error("PreconditionFailed")
        start, end = (int(x) for x in Range.removeprefix("bytes=").split("-"))
        headers = {"date": email.utils.format_datetime(datetime.datetime.now(datetime.timezone.utc), usegmt=True)}
        if self.lie == "date" and Key == self.target:
            headers["date"] = self.extra.decode("utf-8", "replace")
        out = {"ETag": etag, "LastModified": when, "ResponseMetadata": {"HTTPHeaders": headers}}
        if self.lie == "ignore_range" and Key == self.target:
            body = data + self.extra
            return {**out, "ContentLength": len(body), "Body": _Body(self, Key, body)}
        if start >= len(data):
            raise _Error("InvalidRange")
        part = data[start:end + 1]
        total = len(data)
        if Key == self.target:
            if self.lie == "content_range" and self.extra.strip().isdigit():
                total = int(self.extra.strip()[:18])
            elif self.lie == "long_body":
                part += self.extra
            elif self.lie == "change_between_ranges":  # the next range finds another version
                self._store(Key, data[::-1])
        return {**out, "ContentRange": f"bytes {start}-{start + len(part) - 1}/{total}", "ContentLength": len(part),
                "Body": _Body(self, Key, part)}

    # -- pyarrow's filesystem
    def get_file_info(self, what):
        from pyarrow import fs

        def info(path: str):
            key = path.partition("/")[2]
            if key in self.objects:
                return fs.FileInfo(path, fs.FileType.File, size=len(self.objects[key][0]))
            return fs.FileInfo(path, fs.FileType.NotFound)

        if isinstance(what, fs.FileSelector):
            prefix = what.base_dir.partition("/")[2].rstrip("/") + "/"
            bucket = what.base_dir.partition("/")[0]
            return [fs.FileInfo(f"{bucket}/{k}", fs.FileType.File, size=len(v[0]))
                    for k, v in sorted(self.objects.items()) if k.startswith(prefix)]
        if isinstance(what, list):
            return [info(p) for p in what]
        if "/" not in what:  # the bucket
            return fs.FileInfo(what, fs.FileType.Directory)
        return info(what)


class _Body:
    """A response body that counts what is read of it."""

    def __init__(self, fake: FakeS3, key: str, data: bytes) -> None:
        self.stream, self.read_bytes = io.BytesIO(data), 0
        fake.handed.append((key, self))

    def read(self, n: int = -1) -> bytes:
        out = self.stream.read(n)
        self.read_bytes += len(out)
        return out

    def close(self) -> None:
        pass


_fake: FakeS3 | None = None
_template: dict | None = None


def _install(c) -> FakeS3:
    """The fake service in place of boto3's client and pyarrow's filesystem, and the template
    catalog added to it once."""
    global _fake, _template
    from tfprof.catalog import add_run
    from tfprof.catalog.storage import ObjectStore

    if _fake is None:
        from tfprof.catalog import storage

        storage.CHUNK = 4096  # objects of a few KB are then read in several ranges
        _fake = FakeS3()
        ObjectStore.client = property(lambda self: _fake)
        ObjectStore.fs = property(lambda self: _fake)
        os.environ["TFPROF_CATALOG_LOCK_WAIT"] = "0.2"
        add_run(URI, "r1", profile_path=c._write("s3_source.pb", c.cut_profile(c.STORE_SOURCE, 12)))
        _template = dict(_fake.objects)
    _fake.objects = dict(_template)
    _fake.lie, _fake.extra, _fake.target, _fake.handed = "none", b"", None, []
    return _fake


def s3(data: bytes, c) -> None:
    """The ``s3`` reader; ``c`` is the contract module."""
    from tfprof.catalog import add_run, check_catalog, remove_run, run_profile, runs
    from tfprof.catalog.layout import RUNS
    from tfprof.catalog.storage import LOCK_LIMIT, RUN_LIST_LIMIT

    fake = _install(c)
    sections = data[3:].split(b"\n--\n") if len(data) > 3 else []
    sections += [b""] * (4 - len(sections))
    lock, extra, _, run_list = sections[:4]
    sizes = {k: len(v[0]) for k, v in fake.objects.items()}  # what the run list records
    if data and data[0] % 2:
        fake._store("cat/.lock", lock)
    keys = sorted(k for k in fake.objects if k.startswith("cat/") and k != f"cat/{RUNS}")
    fake.lie = LIES[data[1] % len(LIES)] if len(data) > 1 else "none"
    fake.extra = extra[:1 << 16]
    fake.target = keys[(data[2] if len(data) > 2 else 0) % len(keys)] if keys else None
    if fake.lie == "replace" and fake.target:
        fake._store(fake.target, fake.extra)
    if run_list:
        fake._store(f"cat/{RUNS}", run_list)
    source = c._write("s3_add.pb", c.cut_profile(c.STORE_SOURCE, 6))
    steps = (lambda _: runs(URI), lambda _: run_profile(URI, "r1"), lambda _: check_catalog(URI),
             lambda _: add_run(URI, "r2", profile_path=source), lambda _: remove_run(URI, "r1"))
    for step in steps:
        start = time.monotonic()
        c._guard(step, b"")
        assert time.monotonic() - start < 30, "a step took more than 30 s"
    for key, body in fake.handed:  # each response: never more than the bound and the byte past it
        bound = LOCK_LIMIT if key.endswith("/.lock") else RUN_LIST_LIMIT if key.endswith(RUNS) else \
            None if run_list else sizes.get(key)
        if bound is not None:
            assert body.read_bytes <= bound + 1, f"{body.read_bytes:,} bytes of `{key}` read, bound {bound:,}"

"""The clients a catalog in object storage is reached with (``tfprof.catalog.storage``), built
from the usual environment: pyarrow's filesystems for reads (``pyarrow.fs.S3FileSystem``,
``GcsFileSystem``) and boto3's S3 client for conditional writes, each given the time limits
of ``tfprof.catalog.storage_calls``.

Configuration is the AWS SDK's usual environment: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN`` (or a profile, ``AWS_PROFILE``),
``AWS_REGION`` / ``AWS_DEFAULT_REGION`` (us-east-1 when unset), and ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` for an S3-compatible server (MinIO, moto: ``http://127.0.0.1:9000``). For
``gs://``, Google's default credentials, or an emulator named by ``CLOUD_STORAGE_EMULATOR_ENDPOINT``
(or ``STORAGE_EMULATOR_HOST``). Credentials are never taken from a URL: a catalog's or an
endpoint's URL holding them is refused (``tfprof.catalog.uri``), shown masked.
"""

from __future__ import annotations

import atexit
import datetime
import functools
import os
import weakref
from urllib.parse import urlparse

from tfprof.catalog.storage_calls import ATTEMPTS, timeouts
from tfprof.errors import MissingDependencyError, OptionError, credentials_in, masked


def _endpoint() -> str | None:
    """The S3-compatible server's address, if one is set; refused with credentials in it (the
    clients would name it, secret and all, in their errors)."""
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if value := os.environ.get(name):
            if credentials_in(value if "://" in value else f"https://{value}"):
                raise OptionError(f"{name}=`{masked(value if '://' in value else f'https://{value}')}` has "
                                  "credentials in it, which tfprof does not take: give the server's address alone "
                                  "and the credentials by the standard chain: the environment (AWS_ACCESS_KEY_ID "
                                  "and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE), ~/.aws, or the instance's role")
            return value
    return None


def _gcs_emulator() -> dict:
    """pyarrow's options for a GCS emulator (fake-gcs-server ...) named by Google's usual
    ``CLOUD_STORAGE_EMULATOR_ENDPOINT`` or ``STORAGE_EMULATOR_HOST``: its address, and no
    credentials (an emulator takes none)."""
    given = os.environ.get("CLOUD_STORAGE_EMULATOR_ENDPOINT") or os.environ.get("STORAGE_EMULATOR_HOST")
    if not given:
        return {}
    ep = urlparse(given if "://" in given else f"http://{given}")
    return {"anonymous": True, "scheme": ep.scheme, "endpoint_override": ep.netloc}


def _region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


_OPEN: weakref.WeakSet = weakref.WeakSet()  # the stores holding an S3 filesystem
_REACHED: set[str] = set()  # the schemes this process has made a client for


def reached() -> bool:
    """Whether this process has made a client for object storage: the command line then ends
    with ``os._exit`` (``tfprof.cli.client``), as pyarrow's S3 shutdown at exit can abort."""
    return bool(_REACHED)


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




def filesystem(store):
    """pyarrow's filesystem for ``store`` (an ``ObjectStore``), with the time limits; an S3 one
    is dropped before pyarrow shuts S3 down at exit (``_finalize_at_exit``)."""
    from pyarrow import fs

    connect, read = timeouts()
    _REACHED.add(store.scheme)
    if store.scheme == "gs":
        return fs.GcsFileSystem(retry_time_limit=datetime.timedelta(seconds=connect + read), **_gcs_emulator())
    endpoint = _endpoint()
    options: dict = {"region": _region(), "connect_timeout": connect, "request_timeout": read,
                     "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=ATTEMPTS)}
    if endpoint:
        ep = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        options.update(endpoint_override=ep.netloc + ep.path.rstrip("/"), scheme=ep.scheme)
    out = fs.S3FileSystem(**options)
    _OPEN.add(store)
    _finalize_at_exit()
    return out


def s3_client(uri: str):
    """boto3's S3 client, with the time limits and ``ATTEMPTS``; a ``MissingDependencyError``
    naming catalog ``uri`` without boto3."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise MissingDependencyError(f"writing the catalog `{uri}` needs boto3: pip install 'tfprof[s3]'") from None
    connect, read = timeouts()
    _REACHED.add("s3")
    config = Config(retries={"max_attempts": ATTEMPTS, "mode": "standard"}, connect_timeout=connect, read_timeout=read)
    return boto3.client("s3", endpoint_url=_endpoint(), region_name=_region(), config=config)

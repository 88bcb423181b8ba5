"""Whether a catalog is named by an object-store URI (``s3://bucket/prefix``) or a local path.
Standard library only: the command line reads it before it knows which readers a command needs
(tfprof/cli/__init__.py)."""

from __future__ import annotations

import os
from pathlib import Path

SCHEMES = ("s3", "gs")


def object_uri(catalog: object) -> str | None:
    """``catalog`` as an object-store URI (``s3://bucket/prefix``) if it names one, else None
    (a local path). A ``Path`` made from a URI (``s3:/bucket/prefix``: the double slash
    collapsed) is recognised too."""
    text = os.fspath(catalog) if isinstance(catalog, (str, os.PathLike)) else None
    if not isinstance(text, str):
        return None
    for scheme in SCHEMES:
        if text.startswith(f"{scheme}://"):
            return _without_credentials(text.rstrip("/"))
        if isinstance(catalog, Path) and text.startswith(f"{scheme}:/") and not text.startswith(f"{scheme}://"):
            return _without_credentials(f"{scheme}://{text[len(scheme) + 2:]}".rstrip("/"))
    return None


_CHAIN = {
    "s3": "the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE), ~/.aws, or the "
          "instance's role",
    "gs": "the environment (GOOGLE_APPLICATION_CREDENTIALS), gcloud's application default credentials, or the "
          "instance's service account",
}


def _without_credentials(uri: str) -> str:
    """``uri``, refused (an ``OptionError`` showing it masked) when it carries credentials: a
    ``KEY:SECRET@`` or ``KEY@`` before the bucket, or a key, signature or token in its query. They
    would be shown wherever the location is (messages, shell history, process lists); tfprof
    takes credentials only from the provider's standard chain."""
    from tfprof.errors import OptionError, credentials_in, masked

    if credentials_in(uri):
        scheme = uri.partition(":")[0]
        raise OptionError(f"the catalog `{masked(uri)}` has credentials in its URI, which tfprof does not take "
                          f"(they would be shown in messages and kept in shell history): give "
                          f"{scheme}://BUCKET/PREFIX and let the standard credential chain find them: {_CHAIN[scheme]}")
    return uri


def location(value: object):
    """A ``--catalog`` value as the catalog functions take it: an object-store URI as a string,
    anything else as a ``Path``."""
    return object_uri(value) or Path(value)

"""Errors raised by tfprof.

    TfprofError                      root: the CLI turns any of these into one line and exit code 2
    ├── InputError (+ValueError)     a file the user gave cannot be used
    │   ├── InputNotFoundError       (+FileNotFoundError) no such file or directory
    │   ├── ProfileFormatError       the file is not what it was passed as, or is damaged
    │   └── ProfileChangedError      a loaded profile's files were replaced or deleted under it
    ├── OptionError (+ValueError)    an unknown option or a bad option value
    │   └── QueryError               a SQL query DuckDB cannot run
    ├── OutputError (+OSError)       an output cannot be written (a path, stdout, the temporary directory)
    └── MissingDependencyError       (+ImportError) an optional extra (TensorFlow) is not installed

Messages name the file or option in backticks and say what to do. A message is one line of
printable text: ``str()`` of any of these escapes control characters (``printable``), so a file
name holding an escape sequence or a newline cannot reach a terminal raw or split the line.
"""

from __future__ import annotations

import re

# Characters a terminal acts on or that break a line: C0 and C1 controls, DEL, the line and
# paragraph separators, and the bidirectional overrides that reorder what is shown.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with each control character written as its escape (``\\x1b``, ``\\n``, ``\\u202e``)."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


# Credentials written into a URL (docs/SECURITY.md, "Catalogs in object storage"): the user
# information before the host (``s3://KEY:SECRET@bucket``, also a secret holding ``/``, which
# ends the host part early), and query parameters that carry a key, a signature or a token
# (a presigned URL's ``X-Amz-Signature``, ``X-Amz-Credential``, ``AWSAccessKeyId``, ``token=``).
_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s`'\"<>]*)")
_SECRET_PARAM = re.compile(r"(?i)([?&;][\w.-]*(?:credential|sig|token|secret|passw|pwd|key|auth|session)[\w.-]*=)"
                           r"[^&;#\s`'\"<>]*")


def _userinfo_end(rest: str) -> int:
    """Where the user information of a URL (what follows ``scheme://``) ends: the index just past
    its ``@``, or 0 when it has none."""
    host = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in host:
        return host.rfind("@") + 1
    if ":" in host and "@" in rest:  # KEY:SECRET with a `/` in the secret
        return rest.find("@") + 1
    return 0


def credentials_in(text: str) -> bool:
    """Whether ``text`` holds a URL with credentials in it (what ``masked`` hides)."""
    return any(_userinfo_end(m.group(2)) for m in _URL.finditer(text)) or bool(_SECRET_PARAM.search(text))


def masked(text: str) -> str:
    """``text`` with the credentials of every URL in it written as ``***``: the one function
    every message, warning and page naming a location goes through (``TfprofError``'s text,
    the command line's stderr), so that no secret given in a URL is ever shown."""
    def userinfo(m: re.Match) -> str:
        end = _userinfo_end(m.group(2))
        return m.group(1) + ("***@" + m.group(2)[end:] if end else m.group(2))

    return _SECRET_PARAM.sub(r"\1***", _URL.sub(userinfo, text))


class TfprofError(Exception):
    """Root of every error tfprof raises on purpose."""

    def __str__(self) -> str:
        return printable(masked(super().__str__()))


class InputError(TfprofError, ValueError):
    """An input file cannot be used."""


class InputNotFoundError(InputError, FileNotFoundError):
    """An input path does not exist."""

    @classmethod
    def given_as(cls, path: object, flag: str) -> InputNotFoundError:
        """The error for input ``path``, given as option ``flag``, that does not exist: the one
        line the readers and the command line's early check (``cli.app.require_inputs``) share."""
        return cls(f"`{path}` does not exist (given as {flag}); check the path")


class ProfileFormatError(InputError):
    """An input file is damaged or is not of the kind it was passed as."""


class ProfileChangedError(InputError):
    """The store or file a profile was loaded from was replaced or deleted since: nothing more is
    read from it into that profile (``deleted`` says which)."""

    def __init__(self, message: str, *, deleted: bool = False) -> None:
        super().__init__(message)
        self.deleted = deleted


class OptionError(TfprofError, ValueError):
    """An unknown option, or an option with a bad value."""


class QueryError(OptionError):
    """A SQL query that cannot run (syntax, unknown table or column, ...)."""


class OutputError(TfprofError, OSError):
    """An output cannot be written: a path, stdout, or the temporary directory (full, missing)."""


class MissingDependencyError(TfprofError, ImportError):
    """A feature needs an optional extra that is not installed; the message says how to install it."""


class TfprofWarning(UserWarning):
    """Something tfprof skipped or doubts, said and not an error (the command line prints each as
    one ``Warning:`` line on stderr)."""


class CatalogWarning(TfprofWarning):
    """Runs of a catalog that a reader skipped, each named with why (``tfprof.catalog.trust``)."""


class UnknownTableError(OptionError, KeyError):
    """A table name the schema does not have (a ``KeyError`` too, as a missing key is)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return printable(str(self.args[0])) if self.args else ""

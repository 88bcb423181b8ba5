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


class TfprofError(Exception):
    """Root of every error tfprof raises on purpose."""

    def __str__(self) -> str:
        return printable(super().__str__())


class InputError(TfprofError, ValueError):
    """An input file cannot be used."""


class InputNotFoundError(InputError, FileNotFoundError):
    """An input path does not exist."""


class ProfileFormatError(InputError):
    """An input file is damaged or is not of the kind it was passed as."""


class OptionError(TfprofError, ValueError):
    """An unknown option, or an option with a bad value."""


class QueryError(OptionError):
    """A SQL query that cannot run (syntax, unknown table or column, ...)."""


class OutputError(TfprofError, OSError):
    """An output cannot be written: a path, stdout, or the temporary directory (full, missing)."""


class MissingDependencyError(TfprofError, ImportError):
    """A feature needs an optional extra that is not installed; the message says how to install it."""


class UnknownTableError(OptionError, KeyError):
    """A table name the schema does not have (a ``KeyError`` too, as a missing key is)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return printable(str(self.args[0])) if self.args else ""
class ProfileChangedError(InputError):
    """The store or file a profile was loaded from was replaced or deleted since: nothing more is
    read from it into that profile (``deleted`` says which)."""

    def __init__(self, message: str, *, deleted: bool = False) -> None:
        super().__init__(message)
        self.deleted = deleted



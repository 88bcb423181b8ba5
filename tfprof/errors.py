"""Errors raised by tfprof.

    TfprofError                      root: the CLI turns any of these into one line and exit code 2
    ├── InputError (+ValueError)     a file the user gave cannot be used
    │   ├── InputNotFoundError       (+FileNotFoundError) no such file or directory
    │   └── ProfileFormatError       the file is not what it was passed as, or is damaged
    ├── OptionError (+ValueError)    an unknown option or a bad option value
    │   └── QueryError               a SQL query DuckDB cannot run
    ├── OutputError (+OSError)       an output path cannot be written
    └── MissingDependencyError       (+ImportError) an optional extra (TensorFlow) is not installed

Messages name the file or option in backticks and say what to do.
"""

from __future__ import annotations


class TfprofError(Exception):
    """Root of every error tfprof raises on purpose."""


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
    """An output path cannot be written."""


class MissingDependencyError(TfprofError, ImportError):
    """A feature needs an optional extra that is not installed; the message says how to install it."""


class UnknownTableError(OptionError, KeyError):
    """A table name the schema does not have (a ``KeyError`` too, as a missing key is)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""

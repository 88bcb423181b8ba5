"""tfprof's views and view options for the shells: ``VIEWS`` (the views by name), ``Options``
(parsed, checked) and the option names the command line and the interactive shell offer.
Light to import: polars, no kernels."""

from __future__ import annotations

from tfprof.queries.options import (
    INT_OPTIONS,
    LIST_OPTIONS,
    ORDER_BY,
    OUTPUT_KINDS,
    SELECT_FIELDS,
    Options,
    Output,
    output_help,
    unknown_value,
)
from tfprof.queries.spec import VIEWS, view_help

__all__ = ["INT_OPTIONS", "LIST_OPTIONS", "ORDER_BY", "OUTPUT_KINDS", "SELECT_FIELDS", "VIEWS", "Options", "Output", "output_help",
           "unknown_value", "view_help"]

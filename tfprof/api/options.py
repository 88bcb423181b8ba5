"""tfprof's views, metrics and view options for the shells: ``VIEWS`` (the views by name),
the metrics (``METRIC_LIST``; ``register_metric`` adds one), ``Options`` (parsed, checked) and
the option names the command line and the interactive shell offer. Light to import: polars, no
kernels."""

from __future__ import annotations

from tfprof.queries.options import (
    INT_OPTIONS,
    LIST_OPTIONS,
    MORE_THRESHOLDS,
    ORDER_BY,
    OUTPUT_KINDS,
    SELECT_FIELDS,
    Options,
    Output,
    option_names,
    output_help,
    unknown_value,
)
from tfprof.queries.spec import VIEWS, view_help
from tfprof.schema.metrics import METRIC_LIST, Metric, derived, unregister
from tfprof.schema.metrics import register as register_metric

__all__ = ["INT_OPTIONS", "LIST_OPTIONS", "METRIC_LIST", "MORE_THRESHOLDS", "ORDER_BY", "OUTPUT_KINDS", "SELECT_FIELDS",
           "VIEWS", "Metric", "Options", "Output", "derived", "option_names", "output_help", "register_metric",
           "unknown_value", "unregister", "view_help"]

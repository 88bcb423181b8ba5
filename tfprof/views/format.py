"""The fixed texts of a report (the doc block's command lines, the missing-stream warning), and
the names callers import from here: the number formatters (``units``), the metric fields and
``time_fields`` (``fields``, whose ``FIELDS`` registry holds every select field).

Display strings exist only in views: tables and query results hold plain numbers.
"""

from __future__ import annotations

from tfprof.views.fields import METRICS as FIELDS
from tfprof.views.fields import time_fields
from tfprof.views.units import fmt_memory, fmt_number, fmt_shape, fmt_time

__all__ = ["COMMAND_HELP", "FIELDS", "MISSING_STREAM_WARNING", "fmt_memory", "fmt_number", "fmt_shape", "fmt_time",
           "time_fields"]  # fmt: skip

COMMAND_HELP = {
    "scope": "scope: The nodes in the model graph are organized by their names, which is hierarchical like filesystem.",
    "graph": "scope: The nodes in the model graph are organized by their names, which is hierarchical like filesystem.",
    "code": "code: When python trace is available, the nodes are python lines and their are organized by the python call stack.",
    "op": "op: The nodes are operation kernel type, such as MatMul, Conv2D. Graph nodes belonging to the same type are aggregated together.",
}

MISSING_STREAM_WARNING = (
    "\n\nFound accelerator operation but misses accelerator stream stats!\n\n"
    "It's likely a gpu tracing issue rather than tf-profiler issue.\n"
    "If you found your operation missing accelerator time, consider to post to discuss@tensorflow.org!\n\n"
)

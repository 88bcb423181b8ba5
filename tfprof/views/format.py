"""The fixed texts of a report: the doc block's command lines and the missing-stream warning.

Display strings exist only in views: tables and query results hold plain numbers. The number
formatters are in ``units``, the select fields in the registry ``fields.FIELDS``.
"""

from __future__ import annotations

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

"""The data contract: table schemas (``tables``), the facts of the FLOPs rules (``flops_rules``) and the
protobuf messages (``proto``).

The names below load with the submodule that holds them, on first use: the metric registry
(``tfprof.schema.metrics``) is read by the command line's help without pyarrow (docs/PERFORMANCE.md,
"Cold start").

``conform`` is imported from its module, ``tfprof.schema.conform``, whose name it shares.
"""

from __future__ import annotations

from tfprof.lazy import lazy_names

_HOMES = {
    "METRICS": "metrics",
    "NODE_TABLES": "tables",
    "PUBLIC_NAMES": "tables",
    "TABLES": "tables",
    "Table": "tables",
    "empty_table": "conform",
    "node_flops_table": "flops_rules",
}

__all__ = sorted(_HOMES)

__getattr__ = lazy_names(__name__, _HOMES)

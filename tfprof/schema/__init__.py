"""The data contract: table schemas (``tables``), the facts of the FLOPs rules (``flops_rules``) and the
protobuf messages (``proto``)."""

from tfprof.schema.conform import conform, empty_table
from tfprof.schema.flops_rules import node_flops_table
from tfprof.schema.metrics import METRICS
from tfprof.schema.tables import NODE_TABLES, PUBLIC_NAMES, TABLES, Table

__all__ = ["METRICS", "NODE_TABLES", "PUBLIC_NAMES", "TABLES", "Table", "conform", "empty_table", "node_flops_table"]

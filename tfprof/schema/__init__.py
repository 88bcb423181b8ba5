"""The data contract: table schemas (``tables``) and the protobuf messages (``proto``)."""

from tfprof.schema.tables import METRICS, NODE_TABLES, TABLES, Table
from tfprof.schema.conform import conform, empty_table

__all__ = ["METRICS", "NODE_TABLES", "TABLES", "Table", "conform", "empty_table"]

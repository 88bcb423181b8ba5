"""The data contract: table schemas (``tables``) and the protobuf messages (``proto``)."""

from tfprof.schema.tables import TABLES, Table
from tfprof.schema.conform import conform, empty_table

__all__ = ["TABLES", "Table", "conform", "empty_table"]

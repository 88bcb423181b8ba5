"""Turn columns produced by a reader into a table that satisfies the contract in ``tables``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tfprof.schema.tables import TABLES


def empty_table(name: str) -> pa.Table:
    """An empty table with the schema of table ``name``."""
    return TABLES[name].schema.empty_table()


def conform(name: str, columns: Mapping[str, Any] | pa.Table, *, sort: bool = True) -> pa.Table:
    """Build table ``name`` from ``columns`` (arrays, lists or a table), cast to the schema.

    Columns are taken by name; every schema column must be present, but for a nullable one, which is then
    all nulls. With ``sort`` the rows are
    put in the table's sort-key order, stably, so rows tying on the key keep their source order.
    Raises ``ValueError`` when a non-nullable column holds nulls.
    """
    spec = TABLES[name]
    arrays = []
    for field in spec.schema:
        if field.nullable and field.name not in (columns.column_names if isinstance(columns, pa.Table) else columns):
            arrays.append(pa.nulls(_rows(columns), field.type))  # an optional column the reader has no source for
            continue
        col = columns[field.name] if not isinstance(columns, pa.Table) else columns.column(field.name)
        if not isinstance(col, (pa.Array, pa.ChunkedArray)):
            col = pa.array(col, type=field.type.value_type if pa.types.is_dictionary(field.type) else field.type)
        if pa.types.is_dictionary(field.type):
            if not pa.types.is_dictionary(col.type):
                col = pc.dictionary_encode(col.cast(field.type.value_type))
            col = col.cast(field.type)
        elif col.type != field.type:
            col = col.cast(field.type)
        if not field.nullable and col.null_count:
            raise ValueError(f"table `{name}` column `{field.name}` has {col.null_count} nulls")
        arrays.append(col)
    table = pa.Table.from_arrays(arrays, schema=spec.schema)
    if sort and spec.sort_key and table.num_rows > 1:
        table = table.take(sort_indices(table, spec.sort_key))
    return table


def _rows(columns: Mapping[str, Any] | pa.Table) -> int:
    """The number of rows of ``columns``."""
    if isinstance(columns, pa.Table):
        return columns.num_rows
    return len(next(iter(columns.values()))) if columns else 0


def sort_indices(table: pa.Table, keys: tuple[str, ...]) -> pa.Array:
    """Stable ascending sort indices over ``keys``; dictionary columns sort by their strings."""
    cols = {}
    for k in keys:
        col = table.column(k).combine_chunks()
        if pa.types.is_dictionary(col.type):
            # Arrow cannot sort dictionaries: sort by the rank of each code's string (byte order).
            ranks = pc.rank(col.dictionary, sort_keys="ascending", tiebreaker="first")
            col = pc.take(ranks, col.indices)
        cols[k] = col
    return pc.sort_indices(pa.table(cols), sort_keys=[(k, "ascending") for k in keys])

"""Text columns as integer codes, to tell values apart without comparing text: what the foreign
readers use to work something out once per distinct value (or combination of values) of a
column with millions of rows but few distinct values."""

from __future__ import annotations

import numpy as np
import polars as pl


def of(values: pl.Series) -> np.ndarray:
    """A code per row of ``values``, equal for equal values: its categorical code plus one, 0 for null."""
    return values.cast(pl.Categorical).to_physical().cast(pl.Int64).fill_null(-1).to_numpy() + 1


def distinct(*columns: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(the first row of each distinct combination of ``columns``' values; for each row, the
    number of its combination among them): the columns' codes combined into one integer key."""
    key = of(columns[0])
    for more in map(of, columns[1:]):  # the product of the columns' distinct counts stays far below 2**63
        key = key * (int(more.max(initial=0)) + 1) + more
    return distinct_keys(key)


def distinct_keys(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the first position of each distinct value of ``key``, non-negative ints; for each element,
    the number of its value among them), in value order: a table over the values when they are
    few enough to index (no sort), else numpy's sort."""
    if len(key) == 0 or int(key.max()) > 4 * len(key) + (1 << 20):
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return first, inverse.ravel()
    top = int(key.max()) + 1
    first = np.full(top, len(key), dtype=np.int64)
    np.minimum.at(first, key, np.arange(len(key)))
    present = first < len(key)
    number = np.cumsum(present) - 1
    return first[present], number[key]

"""The set of node names validation keeps to find a name seen twice: the compiled hash set
(``tfprof.ingest.name_set``) on the kernels, an exact polars set on the reference paths."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from tfprof import kernels


def name_set():
    if not kernels.enabled():
        return ExactNames()
    from tfprof.ingest.name_set import NameSet  # numba: loaded only for profiles that need it

    return NameSet()


class ExactNames:
    """``NameSet`` without its kernel, for small profiles (the names themselves, kept by polars)."""

    def __init__(self) -> None:
        self._names = pl.Series("name", [], pl.String)

    def add(self, names: pa.Array | pa.ChunkedArray) -> np.ndarray:
        batch = pl.Series("name", names, pl.String) if not isinstance(names, pa.ChunkedArray) else pl.Series(
            "name", names.combine_chunks(), pl.String)
        earlier = batch.is_in(self._names.implode()) if len(self._names) else pl.Series([False] * len(batch), dtype=pl.Boolean)
        again = earlier | ~batch.is_first_distinct()
        self._names = pl.concat([self._names, batch.filter(~again)])
        return np.flatnonzero(again.to_numpy()).astype(np.int64)

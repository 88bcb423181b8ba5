"""Checkpoint tensor values of the displayed nodes, for ``-select tensor_value``
(docs/TFPROF_BEHAVIOUR.md, 'Tensor values').

The scope and graph views look every displayed node except the root up in the checkpoint by
its name (a scope view's name-scope parents included). ``tensor_values`` returns, per displayed
row, what that lookup yields as data; ``tfprof.views.tensor_text`` turns it into tfprof's text,
stderr lines and ``GraphNodeProto.tensor_value``.

tfprof keeps float and double values as double, int32 and int64 as int64, and strings as
strings; every other dtype is "not supported" (stderr, no values). Each number passes through
C++'s default stream format (``%g``, 6 significant digits) and back before it is stored, so the
stored doubles are rounded to 6 significant digits: reproduced here with ``%.6g``, which
rounds the same way (both correctly rounded).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tfprof.profile import Profile
from tfprof.queries.spec import ROOT

# dtype name -> (kind tfprof stores it as, numpy dtype of the checkpoint bytes)
SUPPORTED = {
    "DT_FLOAT": ("double", "<f4"),
    "DT_DOUBLE": ("double", "<f8"),
    "DT_INT32": ("int64", "<i4"),
    "DT_INT64": ("int64", "<i8"),
    "DT_STRING": ("string", None),
}
HUGE_ELEMENTS = 100_000  # tfprof warns above this many elements (kTFProfTensorMaxWarnLen)


def round6(values: np.ndarray) -> np.ndarray:
    """``values`` as float64 after a ``%g`` text round trip (6 significant digits).

    >>> round6(np.array([-0.000534315123, 123456789.0, 0.125]))
    array([-5.34315e-04,  1.23457e+08,  1.25000e-01])
    """
    wide = values.astype(np.float64)
    if wide.size == 0:
        return wide
    out = np.char.mod("%.6g", wide).astype(np.float64)
    # Python prints a negative NaN as "nan"; C++ as "-nan", which reads back negative.
    return np.where(np.isnan(wide), np.copysign(np.nan, wide), out)


def has_checkpoint(prof: Profile) -> bool:
    """Whether the profile was opened with a checkpoint that has tensors (only then does
    tfprof look nodes up, and report the ones it cannot find)."""
    return prof.row_counts().get("checkpoint_tensors", 0) > 0


def _lists(items: list, inner: pl.DataType) -> pl.Series:
    """A list column from per-row arrays or lists (null where None), whatever their lengths."""
    return pl.Series([None if v is None else pl.Series(v, dtype=inner) for v in items], dtype=pl.List(inner))


def tensor_values(prof: Profile, frame: pl.DataFrame) -> pl.DataFrame:
    """Per row of a scope/graph view ``frame`` (display order): the checkpoint lookup.

    Columns: ``name``; ``found`` (the name is a checkpoint tensor; null for the root, which is
    never looked up, and for every row when there is no checkpoint); ``dtype`` (DataType name);
    ``shape`` (dims, [] for a scalar); ``kind`` (``double``, ``int64``, ``string``, or null when
    tfprof does not support the dtype); ``huge`` (a supported tensor of more than 100000
    elements); ``value_double`` / ``value_int64`` / ``value_str``: the values tfprof stores
    (doubles rounded to 6 significant digits), flattened row-major, null unless of that kind.
    """
    looked_up = pl.col("name") != ROOT
    if not has_checkpoint(prof):
        return frame.select("name", pl.lit(None, pl.Boolean).alias("found"))
    ckpt = prof.lazy("checkpoint_tensors").with_columns(pl.col("dtype").cast(pl.String))
    wanted = frame.lazy().select("name").with_row_index("_row")
    hits = (
        wanted.join(ckpt, on="name", how="inner")
        .with_columns(
            pl.col("dtype").replace_strict({k: v[0] for k, v in SUPPORTED.items()}, default=None).alias("kind")
        )
        .collect()
    )
    doubles, ints, strs = [], [], []
    # One vectorized decode per tensor shown (a handful), never per graph node.
    for dtype, kind, raw, strings in zip(hits["dtype"], hits["kind"], hits["value"], hits["string_value"]):
        arr = np.frombuffer(raw or b"", SUPPORTED[dtype][1]) if kind in ("double", "int64") else None
        doubles.append(round6(arr) if kind == "double" else None)
        ints.append(arr.astype(np.int64) if kind == "int64" else None)
        strs.append(list(strings) if kind == "string" else None)
    values = pl.DataFrame(
        {
            "_row": hits["_row"],
            "value_double": _lists(doubles, pl.Float64),
            "value_int64": _lists(ints, pl.Int64),
            "value_str": _lists(strs, pl.Binary),
        }
    )
    found = hits.select(
        "_row", "dtype", "shape", "kind",
        (pl.col("kind").is_not_null() & (pl.col("num_elements") > HUGE_ELEMENTS)).alias("huge"),
    ).join(values, on="_row")
    return (
        wanted.collect()
        .join(found, on="_row", how="left")
        .sort("_row")
        .select(
            "name",
            pl.when(looked_up).then(pl.col("dtype").is_not_null()).alias("found"),
            "dtype", "shape", "kind", "huge", "value_double", "value_int64", "value_str",
        )
    )

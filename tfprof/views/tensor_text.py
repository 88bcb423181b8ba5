"""Checkpoint tensor values as tfprof shows them (docs/TFPROF_BEHAVIOUR.md, 'Tensor values'): the text under a
node's line,
the stderr lines of the lookups, and ``GraphNodeProto.tensor_value``.

Text: one ``[`` per dimension level, each value followed by a space (``%.2f`` for doubles,
``%d`` for ints, ``'s'`` for strings), every level closed by ``],\\n``; a rank-0 tensor is
``[v ],\\n``. tfprof cuts the text to 10000 characters whenever it is longer at the close of a
level and keeps appending after the cut, which always leaves the first 10000 characters of the
uncut text plus ``],\\n``; a text of 10000 characters or more is followed by
``...omitted from display`` and a blank line. Only the first ~10000 characters are ever built.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import polars as pl

from tfprof.schema.dtypes import dtype_number
from tfprof.schema.proto import tfprof_output_pb2

MAX_DISPLAY = 10000  # kTFProfTenosrMaxDisplayLen
OMITTED = "...omitted from display\n\n"
HUGE_NOTE = "Showing huge tensor, the tool might halt..."


class _Full(Exception):
    """The text is known to exceed the display limit: stop building it."""


def _fmt_double(v: float) -> str:
    if math.isnan(v):  # printf keeps the sign of a NaN, Python's % does not
        return ("-nan" if math.copysign(1.0, v) < 0 else "nan") + " "
    return "%.2f " % v


def _fmt_str(s: bytes) -> str:
    return "'" + s.decode("utf-8", "surrogateescape") + "' "


_ITEM: dict[str, Callable] = {"double": _fmt_double, "int64": lambda v: "%d " % v, "string": _fmt_str}


def tensor_text(kind: str, shape: Sequence[int], values: Sequence) -> str:
    """The text tfprof appends under a node for a tensor of ``shape`` holding ``values``.

    >>> tensor_text("int64", [2, 2], [1, 2, 3, 4])
    '[[1 2 ],\\n[3 4 ],\\n],\\n'
    >>> tensor_text("double", [], [1.8])
    '[1.80 ],\\n'
    """
    item, rank = _ITEM[kind], len(shape)
    parts: list[str] = []
    size = 0
    nxt = 0

    def emit(s: str) -> None:
        nonlocal size
        parts.append(s)
        size += len(s)
        if size > MAX_DISPLAY + 3:
            raise _Full

    def level(depth: int) -> None:
        nonlocal nxt
        emit("[")
        if rank == 0:
            emit(item(values[0]))
        else:
            for _ in range(shape[depth]):
                if depth == rank - 1:
                    emit(item(values[nxt]))
                    nxt += 1
                else:
                    level(depth + 1)
        emit("],\n")

    try:
        level(0)
        text = "".join(parts)
        cut = len(text) - 3 > MAX_DISPLAY  # longer than the limit at the outermost close
    except _Full:
        text, cut = "".join(parts), True
    if cut:
        text = text[:MAX_DISPLAY] + "],\n"
    return text + OMITTED if len(text) >= MAX_DISPLAY else text


def _values(row: dict) -> tuple[str, Sequence] | None:
    kind = row.get("kind")
    if not row.get("found") or kind is None:
        return None
    return kind, row[{"double": "value_double", "int64": "value_int64", "string": "value_str"}[kind]] or []


def tensor_texts(tensors: pl.DataFrame) -> pl.Series:
    """Per row of ``tensor_values``: the text to print under the node (empty: nothing)."""
    out = []
    # Values beyond what 10000 characters can show are never formatted (each takes >= 2).
    head = tensors.with_columns(
        pl.col(c).list.head(MAX_DISPLAY // 2 + 2) for c in ("value_double", "value_int64", "value_str")
        if c in tensors.columns
    )
    for row in head.iter_rows(named=True):
        got = _values(row)
        out.append(tensor_text(got[0], row["shape"], got[1]) if got else "")
    return pl.Series("tensor_text", out, pl.String)


def _lookup_order(name: str) -> list[tuple[int, str]]:
    """tfprof looks nodes up after their descendants, siblings in name order (post-order of
    the name tree; exact for the scope view, the graph view walks its inputs instead)."""
    return [(0, part) for part in name.split("/")] + [(1, "")]


def tensor_notes(tensors: pl.DataFrame) -> list[str]:
    """The stderr lines of the lookups: a missing key, an unsupported dtype, a huge tensor."""
    if "dtype" not in tensors.columns:
        return []
    looked = tensors.filter(pl.col("found").is_not_null()).select("name", "found", "dtype", "kind", "huge")
    notes = []
    for row in sorted(looked.iter_rows(named=True), key=lambda r: _lookup_order(r["name"])):
        if not row["found"]:
            notes.append(f"Key {row['name']} not found in checkpoint")
        elif row["kind"] is None:
            notes.append(f"Not Supported type {dtype_number(row['dtype'])}")
        elif row["huge"]:
            notes.append(HUGE_NOTE)
    return notes


def tensor_proto(row: dict) -> tfprof_output_pb2.TFProfTensorProto | None:
    """``GraphNodeProto.tensor_value`` of a found tensor: dtype and every value, flattened."""
    if not row.get("found"):
        return None
    msg = tfprof_output_pb2.TFProfTensorProto(dtype=dtype_number(row["dtype"]))
    kind = row["kind"]
    if kind == "double":
        msg.value_double.extend(row["value_double"] or ())
    elif kind == "int64":
        msg.value_int64.extend(row["value_int64"] or ())
    elif kind == "string":
        msg.value_str.extend(s.decode("utf-8", "replace") for s in row["value_str"] or ())
    return msg

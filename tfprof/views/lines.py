"""The lines of a tree report as a program of items, compiled to the arrays of the byte writer
(``line_writer``) and run over a frame: every line goes into one uint8 buffer.

A line is ``<indent spaces><name> (<item>, <item>, ...)<tail>``. An item is a few pieces: a
literal, a formatted number (``"--"`` instead where the row is not accounted), or a string of
the row. An item whose row string is null is left out together with its ``", "`` separator,
as ``pl.concat_str(..., separator=", ", ignore_nulls=True)`` leaves it out.

``Program`` turns the items into pieces for the kernel, folding every literal into a
neighbouring number (``"/"`` after an own value, ``" params"`` after a total, a separator
that is always there): a number is then one copy of a string ``prefix + text + suffix``.
Numbers are formatted once per distinct (value, kind) by the formatter given to ``render``
(``columns.format_column``): ``line_writer.distinct`` collects them, Python formats them, and
``line_writer.write`` finds each one again and copies the lines' bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from tfprof.views.line_writer import (
    ACC_LIT,
    KINDS,
    LIT,
    MAX_VALUES,
    OWN,
    ROOM,
    ROW,
    SEP,
    SPACES,
    VAL,
    distinct,
    write,
)
from tfprof.views.units import from_printed, printed_ints

INDENT = 2  # spaces a line is indented per level of its row (``level``: 0 at the root)

# ----------------------------------------------------------------------------- the program


class Program:
    """The items of a line, each a tuple of pieces: ``("lit", text)``, ``("val", column, kind)``,
    ``("own", column, kind)`` (``"--"`` where the row is not accounted), ``("acc", text,
    other)`` (``other`` where not accounted) or ``("row", expr)`` (a string expression of the
    row); an item with ``nullable`` is that string alone, left out where null."""

    def __init__(self) -> None:
        self.items: list[tuple[tuple, bool]] = []

    def item(self, *pieces: tuple, nullable: pl.Expr | None = None) -> None:
        self.items.append(((("row", nullable),) if nullable is not None else pieces, nullable is not None))

    @property
    def columns(self) -> set[str]:
        """The frame columns the items read."""
        cols = {p[1] for pieces, _ in self.items for p in pieces if p[0] in ("val", "own")}
        cols |= {c for pieces, _ in self.items for p in pieces if p[0] == "row" for c in p[1].meta.root_names()}
        return cols | ({"accounted"} if self.uses_accounted else set())

    @property
    def uses_accounted(self) -> bool:
        return any(p[0] in ("own", "acc") for pieces, _ in self.items for p in pieces)

    @property
    def value_columns(self) -> list[tuple[str, str]]:
        return list(dict.fromkeys((p[1], p[2]) for pieces, _ in self.items for p in pieces if p[0] in ("val", "own")))


def _fold(pieces: Sequence[tuple]) -> list[list]:
    """Pieces with every literal joined to a neighbouring number or accounted literal, as
    ``[tag, args..., prefix, suffix]`` (a literal with no such neighbour stays one)."""
    merged: list[list] = []
    for p in pieces:
        if p[0] == "lit" and merged and merged[-1][0] == "lit":
            merged[-1][1] += p[1]
        else:
            merged.append([*p, "", ""] if p[0] in ("val", "own", "acc") else list(p))
    out: list[list] = []
    for i, p in enumerate(merged):
        if p[0] != "lit":
            out.append(p)
        elif i + 1 < len(merged) and merged[i + 1][0] in ("val", "own", "acc"):
            merged[i + 1][-2] = p[1] + merged[i + 1][-2]
        elif out and out[-1][0] in ("val", "own", "acc"):
            out[-1][-1] += p[1]
        else:
            out.append(p)
    return out


class _Compiled:
    """A ``Program`` as the kernel's arrays: ops, items, literals, regions and row expressions."""

    def __init__(self, prog: Program) -> None:
        self.lits: dict[str, int] = {" " * 16: SPACES, ", ": SEP}
        self.regions: dict[tuple[str, str], int] = {}
        self.values = {vc: j for j, vc in enumerate(prog.value_columns)}
        self.rows: list[pl.Expr] = []
        ops, item_start, item_row, item_sep = [], [0], [], []
        for k, (pieces, nullable) in enumerate(prog.items):
            always_sep = k > 0 and not nullable and any(not nl for _, nl in prog.items[:k])
            item_sep.append(k > 0 and not always_sep)
            item_row.append(len(self.rows) if nullable else -1)
            for p in _fold((("lit", ", "),) * always_sep + tuple(pieces)):
                ops.append(self._op(p))
            item_start.append(len(ops))
        self.ops = np.array(ops, np.int64).reshape(-1, 4)
        self.item_start = np.array(item_start, np.int64)
        self.item_row = np.array(item_row, np.int64)
        self.item_sep = np.array(item_sep, np.bool_)

    def lit(self, text: str) -> int:
        return self.lits.setdefault(text, len(self.lits))

    def _op(self, p: list) -> tuple[int, int, int, int]:
        tag = p[0]
        if tag == "lit":
            return (LIT, self.lit(p[1]), 0, 0)
        if tag == "row":
            self.rows.append(p[1].alias(f"_row{len(self.rows)}"))
            return (ROW, len(self.rows) - 1, 0, 0)
        pre, suf = p[-2], p[-1]
        if tag == "acc":
            return (ACC_LIT, self.lit(pre + p[1] + suf), self.lit(pre + p[2] + suf), 0)
        region = self.regions.setdefault((pre, suf), len(self.regions))
        dash = self.lit(pre + "--" + suf) if tag == "own" else 0
        return (VAL if tag == "val" else OWN, self.values[(p[1], p[2])], region, dash)


# ----------------------------------------------------------------------------- rendering


def _readonly(a, dtype) -> np.ndarray:
    """``a`` as a C-contiguous read-only array, so every call has the same numba signature."""
    a = np.ascontiguousarray(a, dtype=dtype)
    a.setflags(write=False)
    return a


def _string_buffers(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes and int64 offsets of a string column, from its Arrow buffers."""
    arr = s.cast(pl.Binary).to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_binary():
        arr = arr.cast(pa.large_binary())
    _, offs, data = arr.buffers()
    offsets = np.frombuffer(offs, np.int64, count=len(arr) + 1, offset=arr.offset * 8)
    return (np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)), offsets


def _names(names: pl.Series) -> tuple[tuple, int]:
    """``write``'s name arguments (views, inline bytes, data, buffer starts, offsets) and the
    names' total bytes. Arrow string views are read in place (a code view's names are a few
    strings, repeated), unless their buffers hold much more than the names."""
    if isinstance(names.dtype, pl.Enum):  # the categories' views, gathered by code
        (views, inline, data, base, _), _ = _names(pl.Series(names.dtype.categories))
        if not len(views):  # the categories came as offsets, not views: the names as strings
            return _names(names.cast(pl.String))
        codes = names.to_physical().to_numpy()
        lens = views[:, 0].astype(np.int64)
        return (views[codes], inline.reshape(-1, 16)[codes].reshape(-1), data, base, np.zeros(0)), int(lens[codes].sum())
    total = int(names.str.len_bytes().sum())
    arr = names.to_arrow(compat_level=pl.CompatLevel.newest())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    bufs = arr.buffers()
    datas = [np.frombuffer(b, np.uint8) if b is not None else np.zeros(0, np.uint8) for b in bufs[2:]]
    if arr.type == pa.string_view() and len(arr) and sum(map(len, datas)) <= 2 * total + (1 << 20):
        views = np.frombuffer(bufs[1], np.int32).reshape(-1, 4)[arr.offset : arr.offset + len(arr)]
        inline = np.frombuffer(bufs[1], np.uint8)[arr.offset * 16 : (arr.offset + len(arr)) * 16]
        data = np.concatenate(datas) if datas else np.zeros(0, np.uint8)
        base = np.cumsum([0] + [len(d) for d in datas])
        return (views, inline, data, base, np.zeros(0)), total
    data, offs = _string_buffers(names)
    return (np.zeros((0, 4)), np.zeros(0), data, np.zeros(0), offs), total


def render(
    frame: pl.DataFrame,
    prog: Program,
    fmt: Callable[[pl.Series, str], pl.Series],
    *,
    tail: pl.Series | None = None,
    prefix: str = "",
    newline: bool = True,
) -> tuple[np.ndarray, int, np.ndarray]:
    """Write the lines of ``frame`` (columns ``name``, ``level`` and those ``prog`` reads) after
    ``prefix``; ``tail`` (strings or nulls) follows its row's ``)``; ``fmt(values, kind)``
    formats a column of distinct values. Returns the buffer, its used length and where each
    line starts (``line_offs[n]``: the end)."""
    n = frame.height
    comp = _Compiled(prog)
    value_cols = list(comp.values)
    cols = frame.select(
        *(printed_ints(pl.col(c), kind).alias(f"_v{j}") for j, (c, kind) in enumerate(value_cols)),
        (pl.col("level").cast(pl.Int64) * INDENT).alias("_indent"),
        *([pl.col("accounted").fill_null(False).alias("_accounted")] if prog.uses_accounted else []),
        *comp.rows,
    ).rechunk()
    # the distinct values, formatted once per kind and wrapped in each region's prefix and suffix
    values = tuple(_readonly(cols[f"_v{j}"].to_numpy(), np.int64) for j in range(len(value_cols)))
    values += (_readonly(np.zeros(0), np.int64),) * (MAX_VALUES - len(values))
    col_kind = np.zeros(MAX_VALUES, np.int64)
    col_kind[: len(value_cols)] = [KINDS[kind] for _, kind in value_cols]
    found, found_kinds, small, table, bits = distinct(values, _readonly(col_kind, np.int64), len(value_cols))
    texts = pl.repeat(None, len(found), dtype=pl.String, eager=True)
    for kind, k in KINDS.items():
        which = np.flatnonzero(found_kinds == k)
        if len(which):
            texts = texts.scatter(which, fmt(from_printed(pl.Series(found[which], dtype=pl.Int64), kind), kind))
    regions = [pl.select(pl.concat_str(pl.lit(pre), texts, pl.lit(suf))).to_series() for pre, suf in comp.regions]
    # the string table: literals, region strings, row strings, then room for 16-byte moves
    rows = [cols[e.meta.output_name()] for e in comp.rows] + ([tail] if tail is not None else [])
    lit_bytes = [s.encode() for s in comp.lits]
    parts = [np.frombuffer(b"".join(lit_bytes), np.uint8)]
    offs = [np.cumsum([0] + [len(b) for b in lit_bytes])]
    for strings in regions + rows:
        data, o = _string_buffers(strings)
        parts.append(data[o[0] : o[-1]])
        offs.append(o - o[0] + offs[-1][-1])
    src = np.concatenate([*parts, np.zeros(ROOM, np.uint8)])
    src_offs = np.concatenate([offs[0], *(o[1:] for o in offs[1 : 1 + len(regions)])])
    region_base = len(comp.lits) + len(found) * np.arange(len(regions), dtype=np.int64)
    row_offs = np.stack(offs[1 + len(regions) :]) if rows else np.zeros((0, n + 1))
    row_valid = np.stack([s.is_not_null().to_numpy() for s in rows]) if rows else np.zeros((0, n))
    # a bound on the text: every piece but a row string has a longest text
    lit_len = np.diff(offs[0])
    longest = [int(np.diff(o).max(initial=0)) for o in offs[1 : 1 + len(regions)]]
    piece_max = {
        LIT: lambda a, b, c: lit_len[a],
        VAL: lambda a, b, c: longest[b],
        OWN: lambda a, b, c: max(longest[b], lit_len[c]),
        ACC_LIT: lambda a, b, c: max(lit_len[a], lit_len[b]),
        ROW: lambda a, b, c: 0,
    }
    per_line = 4 + 2 * int(comp.item_sep.sum()) + sum(int(piece_max[op](a, b, c)) for op, a, b, c in comp.ops)
    indent = cols["_indent"].to_numpy()
    (views, inline, data, base, name_offs), name_bytes = _names(frame["name"])
    inline, data = (np.concatenate([np.asarray(a, np.uint8), np.zeros(ROOM, np.uint8)]) for a in (inline, data))
    head = np.frombuffer(prefix.encode(), np.uint8)
    out = np.empty(len(head) + int(indent.sum()) + name_bytes + len(src) + n * per_line + ROOM, np.uint8)
    out[: len(head)] = head
    accounted = cols["_accounted"].to_numpy() if prog.uses_accounted else np.zeros(n, np.bool_)
    line_offs = np.empty(n + 1, np.int64)
    end = write(
        out, len(head), _readonly(indent, np.int64), _readonly(views, np.int32), _readonly(inline, np.uint8),
        _readonly(data, np.uint8), _readonly(base, np.int64), _readonly(name_offs, np.int64),
        _readonly(accounted, np.bool_), values, _readonly(col_kind, np.int64), small, table, bits,
        _readonly(src, np.uint8), _readonly(src_offs, np.int64), _readonly(region_base, np.int64),
        _readonly(row_offs, np.int64), _readonly(row_valid, np.bool_), _readonly(comp.ops, np.int64),
        _readonly(comp.item_start, np.int64), _readonly(comp.item_row, np.int64),
        _readonly(comp.item_sep, np.bool_), len(rows) - 1 if tail is not None else -1, newline, line_offs,
    )  # fmt: skip
    return out, end, line_offs

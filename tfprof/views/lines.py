"""A byte-level writer for the lines of a tree report: every line goes into one uint8 buffer.

A line is ``<indent spaces><name> (<item>, <item>, ...)<tail>``. An item is a few pieces: a
literal, a formatted number (``"--"`` instead where the row is not accounted), or a string of
the row. An item whose row string is null is left out together with its ``", "`` separator,
as ``pl.concat_str(..., separator=", ", ignore_nulls=True)`` leaves it out.

``Program`` turns the items into pieces for the kernel, folding every literal into a
neighbouring number (``"/"`` after an own value, ``" params"`` after a total, a separator
that is always there): a number is then one copy of a string ``prefix + text + suffix``.
Numbers are formatted once per distinct (value, kind) by the formatter given to ``render``
(``columns.format_column``): ``distinct`` collects them, Python formats them, and ``write``
finds each one again by direct index (values below ``SMALL``) or hash.

``write`` works in blocks of rows: first, one pass per piece turns the block's rows into
(start, length) spans of the string table, then each line copies its spans (``_copy``: 16 bytes
at a time, which may write a few bytes past a string's end that the next string overwrites;
every array a copy touches ends in ``_ROOM`` spare bytes). Every copy and byte written checks
its ranges first: the buffer is sized from a bound on every line, and were that bound wrong
the kernel would raise instead of writing past it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import polars as pl
import pyarrow as pa
from numba import njit

# piece opcodes: rows (op, a, b, c) of the kernel's program
LIT = 0  # literal a
VAL = 1  # formatted value of value column a, in region b (a prefix and suffix around it)
OWN = 2  # VAL where the row is accounted, else literal c
ACC_LIT = 3  # literal a where the row is accounted, else literal b
ROW = 4  # row string column a

KINDS = {"number": 0, "time": 1, "memory": 2}
_N_KINDS = len(KINDS)
SMALL = 1024  # values in [0, SMALL) find their text by direct index, larger ones by hash
MAX_VALUES = 24  # value columns come as a tuple of this size: one compiled signature
_BLOCK = 256
_SPACES = 0  # literal 0 is 16 spaces
_SEP = 1  # literal 1 is ", "
_U0, _U16 = np.uint64(0), np.uint64(16)
_ROOM = 16  # spare bytes at the end of every array _copy reads or writes (its 16-byte moves)
_HASH = np.uint64(0x9E3779B97F4A7C15)
_KIND_MIX = np.uint64(0xC2B2AE3D27D4EB4F)


# ----------------------------------------------------------------------------- kernels


@njit(inline="always")
def _move16(out, p, src, s):  # pragma: no cover - numba
    """``out[p:p + 16] = src[s:s + 16]`` (``p``, ``s`` unsigned, both ranges inside their arrays):
    16 loads, then 16 stores, which LLVM merges into one 16-byte move. Unsigned indices spare
    numba's negative-index wraparound, which would keep the bytes apart."""
    b0, b1, b2, b3 = src[s], src[s + np.uint64(1)], src[s + np.uint64(2)], src[s + np.uint64(3)]
    b4, b5, b6, b7 = src[s + np.uint64(4)], src[s + np.uint64(5)], src[s + np.uint64(6)], src[s + np.uint64(7)]
    b8, b9, b10, b11 = src[s + np.uint64(8)], src[s + np.uint64(9)], src[s + np.uint64(10)], src[s + np.uint64(11)]
    b12, b13, b14, b15 = src[s + np.uint64(12)], src[s + np.uint64(13)], src[s + np.uint64(14)], src[s + np.uint64(15)]
    out[p], out[p + np.uint64(1)], out[p + np.uint64(2)], out[p + np.uint64(3)] = b0, b1, b2, b3
    out[p + np.uint64(4)], out[p + np.uint64(5)], out[p + np.uint64(6)], out[p + np.uint64(7)] = b4, b5, b6, b7
    out[p + np.uint64(8)], out[p + np.uint64(9)], out[p + np.uint64(10)], out[p + np.uint64(11)] = b8, b9, b10, b11
    out[p + np.uint64(12)], out[p + np.uint64(13)], out[p + np.uint64(14)], out[p + np.uint64(15)] = b12, b13, b14, b15


@njit(inline="always")
def _copy(out, pos, src, start, length):  # pragma: no cover - numba
    """Copy ``src[start:start + length]`` into ``out`` at ``pos``, 16 bytes at a time; returns the
    new ``pos``. Up to 15 bytes past the string are read, and written in ``out``: bytes after
    ``pos`` that the writer, going forward, has not written yet and overwrites next. Both arrays
    therefore end in ``_ROOM`` spare bytes, and the ranges are checked first: a copy never reads
    or writes outside its array. (An exact copy, bytes or overlapping 16/8/4-byte moves, made
    the kernel 1.6-3x slower: the short strings of a report make a byte loop branch a lot.)"""
    if start < 0 or length < 0 or start + length + 16 > src.shape[0] or pos < 0 or pos + length + 16 > out.shape[0]:
        raise IndexError("line writer: a copy out of its buffer")
    p, s, n = np.uint64(pos), np.uint64(start), np.uint64(length)
    k = _U0
    while k < n:
        _move16(out, p + k, src, s + k)
        k += _U16
    return pos + length


@njit(inline="always")
def _put(out, pos, byte):  # pragma: no cover - numba
    """``out[pos] = byte``, checked; returns ``pos + 1``."""
    if pos < 0 or pos >= out.shape[0]:
        raise IndexError("line writer: a byte out of its buffer")
    out[pos] = byte
    return pos + 1


@njit(inline="always")
def _lookup(table, v, kind, bits):  # pragma: no cover - numba
    """The slot of (v, kind): its own, or the empty slot (``table[h, 1] == -1``) it belongs in."""
    mask = (1 << bits) - 1
    h = np.int64(((np.uint64(v) + np.uint64(kind) * _KIND_MIX) * _HASH) >> np.uint64(64 - bits))
    while table[h, 1] >= 0 and (table[h, 0] != v or (table[h, 1] >> 32) != kind):
        h = (h + 1) & mask
    return h


@njit(cache=True)
def _table(found, kinds, count, bits):  # pragma: no cover - numba
    table = np.full((1 << bits, 2), -1, np.int64)
    for d in range(count):
        if not 0 <= found[d] < SMALL:
            h = _lookup(table, found[d], kinds[d], bits)
            table[h, 0] = found[d]
            table[h, 1] = (kinds[d] << 32) | d
    return table


@njit(cache=True)
def distinct(values, col_kind, k):  # pragma: no cover - numba
    """The distinct (value, kind) pairs of the first ``k`` columns of ``values`` in first-seen
    order, and where to find a pair's index: ``small[kind, value]`` for a value in
    ``[0, SMALL)``, else the hash table of size ``1 << bits``, rows ``[value, kind << 32 | index]``
    (-1 in an empty slot's second column)."""
    bits = 10
    found = np.empty(1 << bits, np.int64)
    kinds = np.empty(1 << bits, np.int64)
    table = _table(found, kinds, 0, bits)
    small = np.full((_N_KINDS, SMALL), -1, np.int64)
    count = 0
    hashed = 0
    for c in range(k):
        col = values[c]
        kind = col_kind[c]
        for i in range(col.shape[0]):
            v = col[i]
            if i > 0 and v == col[i - 1]:
                continue
            if 0 <= v < SMALL:
                if small[kind, v] >= 0:
                    continue
                small[kind, v] = count
            else:
                h = _lookup(table, v, kind, bits)
                if table[h, 1] >= 0:
                    continue
                table[h, 0] = v
                table[h, 1] = (kind << 32) | count
                hashed += 1
            if count == found.shape[0]:
                found = np.concatenate((found, np.empty(count, np.int64)))
                kinds = np.concatenate((kinds, np.empty(count, np.int64)))
            found[count] = v
            kinds[count] = kind
            count += 1
            if 2 * hashed >= (1 << bits):  # keep the load under a half
                bits += 1
                table = _table(found, kinds, count, bits)
    return found[:count], kinds[:count], small, table, bits


@njit(cache=True)
def write(
    out, start, indent, name_views, name_inline, name_data, name_base, name_offs, accounted, values, col_kind,
    small, table, bits, src, src_offs, region_base, row_offs, row_valid, ops, item_start, item_row, item_sep,
    tail_row, newline, line_offs,
):  # pragma: no cover - numba
    """Write every line into ``out`` from byte ``start`` (each ended by ``newline``); returns the
    end. ``line_offs[i]`` is where line i starts, ``line_offs[n]`` the end.

    The names are Arrow string views (``name_views``: rows of (length, prefix or inline bytes,
    buffer, offset), ``name_inline`` the same bytes, ``name_data`` the data buffers one after
    the other, buffer b from ``name_base[b]``) or, where ``name_views`` has no rows,
    ``name_data[name_offs[i]:name_offs[i + 1]]``. ``src`` holds the strings (literals; per
    region, distinct value d as string ``region_base[region] + d``; ``src_offs``: where each
    starts) and then the row strings (``row_offs[r, i]``: where row string r of row i starts).
    Item ``it`` is pieces ``item_start[it]:item_start[it + 1]`` of ``ops``, left out where row
    string ``item_row[it]`` (if any) is null, after a ``", "`` where ``item_sep[it]`` and an
    earlier item of the line is there (a separator that is always there is in its pieces)."""
    n = indent.shape[0]
    n_items = item_row.shape[0]
    n_pieces = ops.shape[0] + item_sep.sum()
    span_start = np.zeros((n_pieces, _BLOCK), np.int64)
    span_len = np.zeros((n_pieces, _BLOCK), np.int64)
    present = np.empty(_BLOCK, np.bool_)
    seen = np.empty(_BLOCK, np.bool_)  # an earlier item of the line is present
    n_values = 0
    for o in range(ops.shape[0]):
        if ops[o, 0] == VAL or ops[o, 0] == OWN:
            n_values = max(n_values, ops[o, 1] + 1)
    value_idx = np.empty((n_values, _BLOCK), np.int64)
    views = name_views.shape[0] > 0
    pos = start
    for i0 in range(0, n, _BLOCK):
        m = min(n, i0 + _BLOCK) - i0
        for c in range(n_values):  # the distinct index of every value of the block
            col = values[c]
            kind = col_kind[c]
            for j in range(m):  # (written out: a helper function here ran ten times slower)
                v = col[i0 + j]
                if 0 <= v < SMALL:
                    value_idx[c, j] = small[kind, v]
                else:
                    value_idx[c, j] = table[_lookup(table, v, kind, bits), 1] & 0xFFFFFFFF
        seen[:m] = False
        p = 0
        for it in range(n_items):
            r = item_row[it]
            for j in range(m):
                present[j] = r < 0 or row_valid[r, i0 + j]
            if item_sep[it]:
                for j in range(m):
                    span_start[p, j] = src_offs[_SEP]
                    span_len[p, j] = 2 if present[j] and seen[j] else 0
                p += 1
            for j in range(m):
                seen[j] = seen[j] or present[j]
            for o in range(item_start[it], item_start[it + 1]):
                op, a, b, c = ops[o, 0], ops[o, 1], ops[o, 2], ops[o, 3]
                if op == ROW:
                    for j in range(m):
                        span_start[p, j] = row_offs[a, i0 + j]
                        span_len[p, j] = row_offs[a, i0 + j + 1] - row_offs[a, i0 + j]
                elif op == LIT or op == ACC_LIT:
                    for j in range(m):
                        s = a if op == LIT or accounted[i0 + j] else b
                        span_start[p, j] = src_offs[s]
                        span_len[p, j] = src_offs[s + 1] - src_offs[s]
                else:  # VAL, OWN
                    for j in range(m):
                        s = c if op == OWN and not accounted[i0 + j] else region_base[b] + value_idx[a, j]
                        span_start[p, j] = src_offs[s]
                        span_len[p, j] = src_offs[s + 1] - src_offs[s]
                if r >= 0:  # a left-out item writes nothing
                    for j in range(m):
                        if not present[j]:
                            span_len[p, j] = 0
                p += 1
        for j in range(m):
            i = i0 + j
            line_offs[i] = pos
            end = pos + indent[i]
            while pos < end:
                pos = _copy(out, pos, src, src_offs[_SPACES], min(16, end - pos))
            if views:  # a string view: 12 bytes inline, else (buffer, offset) of name_data
                length = name_views[i, 0]
                if length > 12:
                    pos = _copy(out, end, name_data, name_base[name_views[i, 2]] + name_views[i, 3], length)
                else:
                    pos = _copy(out, end, name_inline, 16 * i + 4, length)
            else:
                pos = _copy(out, end, name_data, name_offs[i], name_offs[i + 1] - name_offs[i])
            pos = _put(out, _put(out, pos, 32), 40)  # " ("
            for q in range(p):
                pos = _copy(out, pos, src, span_start[q, j], span_len[q, j])
            pos = _put(out, pos, 41)  # ")"
            if tail_row >= 0 and row_valid[tail_row, i]:
                pos = _copy(out, pos, src, row_offs[tail_row, i], row_offs[tail_row, i + 1] - row_offs[tail_row, i])
            if newline:
                pos = _put(out, pos, 10)
    line_offs[n] = pos
    return pos


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
        self.lits: dict[str, int] = {" " * 16: _SPACES, ", ": _SEP}
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
    """Write the lines of ``frame`` (columns ``name``, ``indent`` and those ``prog`` reads) after
    ``prefix``; ``tail`` (strings or nulls) follows its row's ``)``; ``fmt(values, kind)``
    formats a column of distinct values. Returns the buffer, its used length and where each
    line starts (``line_offs[n]``: the end)."""
    n = frame.height
    comp = _Compiled(prog)
    value_cols = list(comp.values)
    cols = frame.select(
        *(pl.col(c).cast(pl.Int64).fill_null(0).alias(f"_v{j}") for j, (c, _) in enumerate(value_cols)),
        pl.col("indent").cast(pl.Int64).alias("_indent"),
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
            texts = texts.scatter(which, fmt(pl.Series(found[which], dtype=pl.Int64), kind))
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
    src = np.concatenate([*parts, np.zeros(_ROOM, np.uint8)])
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
    inline, data = (np.concatenate([np.asarray(a, np.uint8), np.zeros(_ROOM, np.uint8)]) for a in (inline, data))
    head = np.frombuffer(prefix.encode(), np.uint8)
    out = np.empty(len(head) + int(indent.sum()) + name_bytes + len(src) + n * per_line + _ROOM, np.uint8)
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

"""tfprof's number formats (docs/TFPROF_BEHAVIOUR.md, 'Number formats') over whole columns, for reports of many lines.

``'%.2f' % (v / D)`` is computed with integers: ``(200·v + D) // (2·D)`` is 100·v/D rounded half
up, which is what printf prints for the nearest double unless 100·v/D is exactly a half (a tie)
or v is so large that the double's error can reach a half. Those rows — rare — are formatted by
Python's ``%`` like the per-value formatters in ``units.py``; a test checks both agree on many
values.

The lines of a tree report are written byte by byte by ``lines.render`` (``tree_lines``,
``tree_text``), from the program ``_program`` builds out of the select-field registry
(``fields.FIELDS``); ``tree_lines_polars`` evaluates the same program as polars string
expressions, for the frames the writer does not take and as its reference.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa
from numba import njit

from tfprof import kernels
from tfprof.views import lines
from tfprof.views.fields import cells
from tfprof.views.units import FORMATS, from_printed, printed_ints

_INDENT = lines.INDENT
# (small-value suffix, ((divisor, suffix), ...)) per format
_UNITS = {
    "number": ("", ((1_000, "k"), (1_000_000, "m"), (1_000_000_000, "b"))),
    "time": ("us", ((1_000, "ms"), (1_000_000, "sec"))),
    "memory": ("B", ((1_000, "KB"), (1_000_000, "MB"))),
}
_EXACT_LIMIT = 1 << 40  # above this the double's error could decide the rounding: use Python


def format_column(values: pl.Series, kind: str) -> pl.Series:
    """``fmt_number`` / ``fmt_time`` / ``fmt_memory`` of every value of an integer column (nulls
    print as 0), written by one compiled pass with the integer rule (module docstring); the
    values it cannot settle are formatted by Python."""
    if kind == "time" and values.dtype.is_float():  # exact µs (a foreign profile's): from the ns, never truncated
        values, kind = (values * 1000).round(0), "time_ns"
    v = np.ascontiguousarray(values.cast(pl.Int64).fill_null(0).to_numpy())
    if kind == "ratio":  # a quotient: two decimals, by Python (a view prints few)
        return pl.Series(values.name, [FORMATS[kind](x or 0.0) for x in values.cast(pl.Float64)], dtype=pl.String)
    if not kernels.enabled() or kind == "time_ns":  # each value by Python (``formatted`` asks for the distinct ones only)
        return pl.Series(values.name, [FORMATS[kind](int(x)) for x in v], dtype=pl.String)
    small, ranges = _UNITS[kind]
    divs = np.array([d for d, _ in ranges], np.int64)
    suffixes = [small.encode()] + [sfx.encode() for _, sfx in ranges]
    sfx_offs = np.cumsum([0] + [len(b) for b in suffixes]).astype(np.int64)
    sfx = np.frombuffer(b"".join(suffixes), np.uint8)
    data, offs, python = _format_ints(v, divs, sfx, sfx_offs)
    arr = pa.LargeStringArray.from_buffers(len(v), pa.py_buffer(offs), pa.py_buffer(data[: offs[-1]]))
    out = pl.Series(values.name, arr, dtype=pl.String)
    idx = np.flatnonzero(python)
    if len(idx):
        out = out.scatter(idx, [FORMATS[kind](int(x)) for x in v[idx]])
    return out


@njit(cache=True, nogil=True)
def _format_ints(v, divs, sfx, sfx_offs):  # pragma: no cover - numba
    """Each value's text, one after the other (bytes, offsets), and whether Python must format
    it instead: a tie, or a value of ``_EXACT_LIMIT`` or more. ``divs`` are the unit divisors
    ascending; suffix ``r`` (0: below the first unit) is ``sfx[sfx_offs[r]:sfx_offs[r + 1]]``."""
    n = v.shape[0]
    data = np.empty(n * 32 + 16, np.uint8)  # 19 digits, sign, point, a suffix of at most 3
    offs = np.empty(n + 1, np.int64)
    python = np.zeros(n, np.bool_)
    digits = np.empty(24, np.uint8)
    p = 0
    offs[0] = 0
    for i in range(n):
        x = v[i]
        r = 0
        while r < divs.shape[0] and x >= divs[r]:
            r += 1
        if r == 0:  # below the first unit: the integer itself
            if x < 0:
                data[p] = 45  # '-'
                p += 1
                if x == -x:  # the one value whose negation overflows
                    python[i] = True
                    x = 0
                x = -x
            k = x
        else:
            d = divs[r - 1]
            if x >= _EXACT_LIMIT:  # 200·x could overflow; Python prints it
                python[i] = True
                hundredths = 0
            else:
                hundredths = (x * 200 + d) // (2 * d)  # 100·x/d rounded half up
                python[i] = (x * 200) % (2 * d) == d  # a tie: printf rounds the double
            k = hundredths // 100
        m = 0
        while True:
            digits[m] = 48 + k % 10
            k //= 10
            m += 1
            if k == 0:
                break
        for j in range(m - 1, -1, -1):
            data[p] = digits[j]
            p += 1
        if r > 0:
            c = hundredths % 100
            data[p] = 46  # '.'
            data[p + 1] = 48 + c // 10
            data[p + 2] = 48 + c % 10
            p += 3
        for j in range(sfx_offs[r], sfx_offs[r + 1]):
            data[p] = sfx[j]
            p += 1
        offs[i + 1] = p
    return data, offs, python


def formatted(columns: dict[str, pl.Series], kind: str) -> dict[str, pl.Series]:
    """``format_column`` of each column, computed once per distinct value over all of them and
    mapped back by binary search: a view's columns repeat few values (a 356,000-line code view
    has under 5,000 distinct totals), so printing a large report formats little."""
    values = {name: printed_ints(col, kind) for name, col in columns.items()}
    distinct = pl.concat(list(values.values())).unique().sort()
    text = format_column(from_printed(distinct, kind), kind)
    return {name: text.gather(distinct.search_sorted(col)) for name, col in values.items()}


def formatter(ns: bool):
    """The column formatter of a report whose times are in ns (``ns``) or whole µs."""
    if not ns:
        return format_column
    return lambda values, kind: format_column(values, "time_ns" if kind == "time" else kind)


def _program(frame: pl.DataFrame, select: Sequence[str], code: bool) -> lines.Program:
    """The items of the view's lines, as ``fields.FIELDS`` states them, as a ``lines.Program``:
    what the byte writer runs and what ``tree_lines_polars`` evaluates."""
    prog = lines.Program()
    for pieces, nullable in cells(select, "code" if code else "tree", frame.columns):
        prog.item(*pieces, nullable=nullable)
    return prog


def tree_lines_polars(frame: pl.DataFrame, select: Sequence[str], *, code: bool = False, ns: bool = False) -> pl.Series:
    """``tree_lines`` as polars string expressions over the same program: the reference the byte
    writer must match, and the path for frames it does not take (see ``_writer_takes``)."""
    needed: dict[str, tuple[str, str]] = {}  # formatted column -> (source column, kind)

    def text(column: str, kind: str) -> pl.Expr:
        name = f"_{kind}_{column}"
        needed[name] = (column, kind)
        return pl.col(name)

    def piece(p: tuple) -> pl.Expr:
        acc = pl.col("accounted")
        if p[0] == "lit":
            return pl.lit(p[1])
        if p[0] == "val":
            return text(p[1], p[2])
        if p[0] == "own":
            return pl.when(acc).then(text(p[1], p[2])).otherwise(pl.lit("--"))
        if p[0] == "acc":
            return pl.when(acc).then(pl.lit(p[1])).otherwise(pl.lit(p[2]))
        return p[1]  # "row": the row's string, null where the item is left out

    items = [pl.concat_str(*(piece(p) for p in pieces)) for pieces, _ in _program(frame, select, code).items]
    if not items:
        joined = pl.Series([""] * frame.height, dtype=pl.String)
    else:
        for kind in {k for _, k in needed.values()}:
            texts = formatted({n: frame[c] for n, (c, k) in needed.items() if k == kind},
                              "time_ns" if ns and kind == "time" else kind)
            frame = frame.with_columns(t.alias(n) for n, t in texts.items())
        joined = frame.with_columns(  # with_columns broadcasts a literal item to every row
            pl.concat_str(*(e.alias(f"_i{i}") for i, e in enumerate(items)), separator=", ", ignore_nulls=True)
            .fill_null("")
            .alias("_joined")
        )["_joined"]
    lines = frame["name"] + " (" + joined + ")"
    return pl.select(lines.str.pad_start(lines.str.len_chars() + frame["level"] * _INDENT)).to_series()


# ----------------------------------------------------------------------------- the byte writer


def _writer_takes(frame: pl.DataFrame, prog: lines.Program, after: pl.Series | None) -> bool:
    """Whether ``lines.render`` reproduces the polars lines of this frame; if not, the polars
    path runs (and raises what it raises for a frame it cannot take). Without kernels
    (``tfprof.kernels.enabled``) the polars path runs too."""
    if not kernels.enabled():
        return False
    if not {"name", "level", *prog.columns} <= set(frame.columns) or frame.height == 0:
        return False
    schema = frame.schema
    if not (schema["name"] == pl.String or isinstance(schema["name"], pl.Enum)) or frame["name"].null_count():
        return False
    if not schema["level"].is_integer() or frame["level"].null_count() or frame["level"].min() < 0:
        return False
    if prog.uses_accounted and schema["accounted"] != pl.Boolean:
        return False
    if not all(schema[c].is_numeric() for c, _ in prog.value_columns) or len(prog.value_columns) > lines.MAX_VALUES:
        return False
    return after is None or (len(after) == frame.height and after.dtype == pl.String)


def tree_lines(frame: pl.DataFrame, select: Sequence[str], *, code: bool = False, ns: bool = False) -> pl.Series:
    """Every line of a scope/graph view (or, with ``code``, a code view), indentation included;
    with ``ns``, the frame's times are in ns (``tfprof.queries.ticks``)."""
    prog = _program(frame, select, code)
    if not _writer_takes(frame, prog, None):
        return tree_lines_polars(frame, select, code=code, ns=ns)
    out, end, line_offs = lines.render(frame, prog, formatter(ns), newline=False)
    arr = pa.LargeStringArray.from_buffers(frame.height, pa.py_buffer(line_offs), pa.py_buffer(out[:end]))
    return pl.Series(frame["name"].name, arr, dtype=pl.String)


def tree_text(
    frame: pl.DataFrame, select: Sequence[str], *, code: bool = False, after: pl.Series | None = None, prefix: str = "",
    ns: bool = False,
) -> str:
    """``prefix`` plus every line of ``tree_lines``, each ended by a newline, as one string;
    ``after`` (one string per row, e.g. a tensor's values) is printed under its row's line."""
    return decode(tree_bytes(frame, select, code=code, after=after, prefix=prefix, ns=ns))


def tree_bytes(
    frame: pl.DataFrame, select: Sequence[str], *, code: bool = False, after: pl.Series | None = None, prefix: str = "",
    ns: bool = False,
) -> memoryview:
    """``tree_text`` as UTF-8 bytes (``decode`` makes the text): a caller can let the frame go
    before the text is made, so a multi-gigabyte report is not held three times at once."""
    prog = _program(frame, select, code)
    if not _writer_takes(frame, prog, after):
        lines_ = tree_lines_polars(frame, select, code=code, ns=ns)
        if after is not None:  # text under a line ends with "\n" itself; the join adds one
            lines_ = pl.select(
                pl.when(after.str.len_chars() > 0).then(lines_ + "\n" + after.str.strip_suffix("\n")).otherwise(lines_)
            ).to_series()
        return memoryview((prefix + ((lines_ + "\n").str.join("").item() if len(lines_) else "")).encode())
    tail = None
    if after is not None:  # "\n" and the text, one final newline dropped; null where there is none
        tail = pl.select(pl.when(after.str.len_chars() > 0).then("\n" + after.str.strip_suffix("\n"))).to_series()
    out, end, _ = lines.render(frame, prog, formatter(ns), tail=tail, prefix=prefix)
    return memoryview(out)[:end]


def decode(data: memoryview) -> str:
    """The text of ``tree_bytes``."""
    return str(data, "utf-8")

"""One top-level key's value in each of a column of JSON objects (a trace event's ``args``), found
by a pass over the texts' bytes on the kernels engine: polars' ``str.json_path_match`` parses each
text whole (about 4 µs a row for a Kineto op's args) where the key is all that is wanted.

The value is given as ``json_path_match`` gives it: its JSON text, null where the key is absent
or the value is ``null``. The readers' args are written without whitespace, and a Kineto op's
``Input Dims`` and ``Concrete Inputs`` hold whole numbers and strings, so the value's bytes are
that text; the few values that are not written so (whitespace, an escape, a fraction, an exponent
or a minus sign, which ``json_path_match`` writes back its own way), values that are strings (it
gives their characters) and texts that are not objects are handed to ``json_path_match`` itself."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
from numba import njit

from tfprof import kernels

_ABSENT, _ASK = -1, -2  # a row's start when its key is missing (or null), or when polars is to say


def values(texts: pl.Series, key: str) -> pl.Series:
    """The value of ``key`` in each text of ``texts`` (JSON objects), as ``json_path_match`` of
    ``$['key']`` gives it."""
    path = pl.col("t").str.json_path_match(f"$['{key}']")
    if not kernels.enabled() or len(texts) == 0:
        return texts.to_frame("t").select(path).to_series().alias(key)
    array = texts.to_arrow()
    array = (array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array).cast(pa.large_string())
    _, offsets, data = array.buffers()
    offsets = np.frombuffer(offsets, np.int64)[array.offset:array.offset + len(array) + 1]
    data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    starts = np.full(len(array), _ABSENT, np.int64)
    ends = np.zeros(len(array), np.int64)
    _spans(data, offsets, np.frombuffer(key.encode(), np.uint8),
                                array.is_valid().to_numpy(zero_copy_only=False), starts, ends)
    found = starts >= 0
    sizes = np.where(found, ends - starts, 0)
    offs = np.zeros(len(array) + 1, np.int64)
    np.cumsum(sizes, out=offs[1:])
    text = np.empty(max(int(offs[-1]), 1), np.uint8)
    _copy(data, np.where(found, starts, 0), sizes, offs, text)
    out = pl.Series(key, pa.LargeStringArray.from_buffers(len(array), pa.py_buffer(offs), pa.py_buffer(text),
                                                          pa.py_buffer(np.packbits(found, bitorder="little"))))
    ask = np.flatnonzero(starts == _ASK)
    if len(ask):
        out = out.scatter(ask, texts.gather(ask).to_frame("t").select(path).to_series())
    return out


@njit(cache=True, nogil=True)
def _skip(data, j, e):
    """The first byte from ``j`` (below ``e``) that is not JSON whitespace."""
    while j < e and (data[j] == 32 or data[j] == 10 or data[j] == 13 or data[j] == 9):
        j += 1
    return j


@njit(cache=True, nogil=True)
def _string_end(data, j, e):
    """(the index after the string that starts at ``data[j]``, a quote, or ``e`` if it does not
    end there; whether it has no backslash)."""
    j += 1
    plain = True
    while j < e:
        c = data[j]
        if c == 34:
            return j + 1, plain
        if c == 92:
            plain = False
            j += 1
        j += 1
    return e, plain


@njit(cache=True, nogil=True)
def _value_end(data, j, e):
    """(the index after the value at ``data[j]``: where, outside strings and brackets, a ``,`` or
    the closing ``}`` follows, whitespace after the value not included; whether the value is
    written as ``json_path_match`` writes it back: no whitespace, no backslash, no number but
    non-negative integers)."""
    depth = 0
    last = j
    plain = True
    space = False
    while j < e:
        c = data[j]
        if c == 32 or c == 10 or c == 13 or c == 9:
            space = True
            j += 1
            continue
        if depth == 0 and (c == 44 or c == 125 or c == 93):
            return last, plain
        plain &= not space
        space = False
        if c == 34:
            j, quoted = _string_end(data, j, e)
            plain &= quoted
            last = j
            continue
        if c == 123 or c == 91:
            depth += 1
        elif c == 125 or c == 93:
            depth -= 1
        elif c == 46 or c == 101 or c == 69 or c == 45:  # . e E -: a number json_path_match may respell
            plain = False
        j += 1
        last = j
    return last, plain


@njit(cache=True, nogil=True)
def _spans(data, offsets, key, valid, starts, ends):
    """For each valid text, the span of ``key``'s value at its top level into ``starts`` and
    ``ends``; ``starts`` stays ``_ABSENT`` where the key is missing or null, and is ``_ASK`` where
    the value is a string, is not written as ``json_path_match`` writes it, or the text is not an
    object."""
    m = len(key)
    for i in range(len(starts)):
        if not valid[i]:
            continue
        e = offsets[i + 1]
        j = _skip(data, offsets[i], e)
        if j >= e or data[j] != 123:
            starts[i] = _ASK
            continue
        j = _skip(data, j + 1, e)
        while j < e and data[j] == 34:
            k, _ = _string_end(data, j, e)
            same = k - j - 2 == m
            for q in range(m):
                if not same:
                    break
                same = data[j + 1 + q] == key[q]
            j = _skip(data, k, e)
            if j >= e or data[j] != 58:
                starts[i] = _ASK
                break
            v = _skip(data, j + 1, e)
            j, plain = _value_end(data, v, e)
            if same:  # (a key given twice: its last value, as json_path_match takes)
                if not plain or (v < e and data[v] == 34):
                    starts[i] = _ASK
                elif j - v == 4 and data[v] == 110:  # null: absent, as json_path_match says
                    starts[i] = _ABSENT
                else:
                    starts[i] = v
                    ends[i] = j
            j = _skip(data, j, e)
            if j < e and data[j] == 44:
                j = _skip(data, j + 1, e)


@njit(cache=True, nogil=True)
def _copy(data, starts, sizes, offs, text):
    """``data[starts[i]:starts[i] + sizes[i]]`` into ``text`` at ``offs[i]``."""
    for i in range(len(starts)):
        o = offs[i]
        text[o:o + sizes[i]] = data[starts[i]:starts[i] + sizes[i]]

"""Protobuf wire format written a column at a time: no Python per row, each byte written once.

An encoding is planned bottom-up and written top-down. Every planned column (``Enc``) knows
the encoded size of each of its rows (``off``: ``n + 1`` offsets) before anything is written;
``encode`` then allocates the whole output once and every column writes its rows at the
positions its parent hands down. The building blocks:

* ``scalars(field, values)``  a varint field per row (int32/int64/uint64/bool; proto3 leaves
  zeros out unless ``keep_zero``); ``varints(values)`` bare varints (packed elements);
* ``raw(array)``              the bytes of each row of an Arrow string/binary/dictionary array
  (read in place, not copied); ``strings(field, array)`` the same as length-delimited fields;
* ``message(field, parts)``   per row, the concatenation of ``parts`` (columns of the same
  length), framed as a length-delimited field ``field`` (``None``: not framed);
* ``group(col, starts)``      per parent ``p``, rows ``starts[p]:starts[p + 1]`` of ``col``
  concatenated. When a child table is sorted by its parent's key, a parent's repeated or map
  field is exactly such a run.

Fields must be given in field-number order to write what protobuf's serializers write; map
entries are messages with key = 1 and value = 2, both always written, as protobuf does.

Why not protobuf's runtime: building the ProfileProto with the generated classes
(``tfprof.views.profile_proto_ref``, which tests hold equal to this encoder's output) takes 7 to
13 times as long (``benchmarks/bench_proto.py``; docs/PERFORMANCE.md, 'Proto output').
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numba import njit

from tfprof.varint import put as put_varint
from tfprof.varint import size as varint_size

# ---------------------------------------------------------------------------------- kernels


@njit(cache=True, nogil=True)
def _scalar_offsets(tag_len, values, keep_zero):
    n = len(values)
    off = np.empty(n + 1, np.int64)
    off[0] = 0
    for i in range(n):
        v = values[i]
        off[i + 1] = off[i] + (0 if (v == 0 and not keep_zero) else tag_len + varint_size(v))
    return off


@njit(cache=True, nogil=True)
def _write_scalars(out, dst, tag, values, keep_zero):
    for i in range(len(values)):
        v = values[i]
        if v == 0 and not keep_zero:
            continue
        pos = dst[i]
        for t in range(len(tag)):
            out[pos + t] = tag[t]
        put_varint(out, pos + len(tag), v)


@njit(cache=True, nogil=True)
def _message_offsets(tag_len, body, keep_empty):
    n = len(body)
    off = np.empty(n + 1, np.int64)
    off[0] = 0
    for i in range(n):
        size = body[i]
        if tag_len > 0 and (size > 0 or keep_empty):
            size += tag_len + varint_size(np.uint64(size))
        off[i + 1] = off[i] + size
    return off


@njit(cache=True, nogil=True)
def _write_headers(out, dst, tag, body, keep_empty):
    """Write each row's key and length; return where each row's body starts."""
    start = np.empty(len(body), np.int64)
    for i in range(len(body)):
        pos = dst[i]
        if len(tag) > 0 and (body[i] > 0 or keep_empty):
            for t in range(len(tag)):
                out[pos + t] = tag[t]
            pos = put_varint(out, pos + len(tag), np.uint64(body[i]))
        start[i] = pos
    return start


@njit(cache=True, nogil=True)
def _fused_body(tag_off, values, keeps):
    k, n = values.shape
    body = np.zeros(n, np.int64)
    for j in range(k):
        tl = tag_off[j + 1] - tag_off[j]
        for i in range(n):
            v = values[j, i]
            if v != 0 or keeps[j]:
                body[i] += tl + varint_size(v)
    return body


@njit(cache=True, nogil=True)
def _write_fused(out, dst, tag, tags, tag_off, values, keeps, body, keep_empty):
    k, n = values.shape
    for i in range(n):
        pos = dst[i]
        if len(tag) > 0:
            if body[i] == 0 and not keep_empty:
                continue
            for t in range(len(tag)):
                out[pos + t] = tag[t]
            pos = put_varint(out, pos + len(tag), np.uint64(body[i]))
        for j in range(k):
            v = values[j, i]
            if v == 0 and not keeps[j]:
                continue
            for t in range(tag_off[j], tag_off[j + 1]):
                out[pos] = tags[t]
                pos += 1
            pos = put_varint(out, pos, v)


@njit(cache=True, nogil=True)
def _write_rows(out, dst, buf, off, idx):
    for i in range(len(dst)):
        k = idx[i] if len(idx) else i
        s = off[k]
        m = off[k + 1] - s
        d = dst[i]
        for q in range(m):
            out[d + q] = buf[s + q]


# ---------------------------------------------------------------------------------- columns


class Enc:
    """A planned column of encoded rows: sizes known (``off``), bytes written by ``write``."""

    off: np.ndarray  # int64, n + 1 entries, off[0] == 0

    def __len__(self) -> int:
        return len(self.off) - 1

    def sizes(self) -> np.ndarray:
        if getattr(self, "_sizes", None) is None:
            self._sizes = np.diff(self.off)
        return self._sizes

    def write(self, out: np.ndarray, dst: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class _Scalars(Enc):
    def __init__(self, tag: np.ndarray, values: np.ndarray, keep_zero: bool) -> None:
        self.tag, self.values, self.keep_zero = tag, values, keep_zero
        self.off = _scalar_offsets(len(tag), values, keep_zero)

    def write(self, out, dst):
        _write_scalars(out, dst, self.tag, self.values, self.keep_zero)


class _Bytes(Enc):
    """Rows of a byte buffer (``buf[off[k]:off[k + 1]]``), optionally picked by ``idx``."""

    def __init__(self, buf: np.ndarray, off: np.ndarray, idx: np.ndarray | None = None) -> None:
        self.buf, self.src_off, self.idx = buf, off, idx
        if idx is None:
            self.off = off - off[0] if off[0] else off
        else:
            sizes = np.diff(off)[idx]
            self.off = np.zeros(len(idx) + 1, np.int64)
            np.cumsum(sizes, out=self.off[1:])

    def write(self, out, dst):
        idx = self.idx if self.idx is not None else np.empty(0, np.int64)
        _write_rows(out, dst, self.buf, self.src_off, idx)


class _Message(Enc):
    def __init__(self, tag: np.ndarray, parts: list[Enc], keep_empty: bool) -> None:
        n = len(parts[0])
        if any(len(p) != n for p in parts):
            raise ValueError(f"message parts differ in length: {[len(p) for p in parts]}")
        self.tag, self.parts, self.keep_empty = tag, parts, keep_empty
        self.body = np.zeros(n, np.int64)
        for p in parts:
            self.body += p.sizes()
        self.off = _message_offsets(len(tag), self.body, keep_empty)

    def write(self, out, dst):
        pos = _write_headers(out, dst, self.tag, self.body, self.keep_empty)
        for p in self.parts:
            p.write(out, pos)
            pos = pos + p.sizes()


class _ScalarMessage(Enc):
    """A message of varint fields only, sized and written in one pass per row (the small,
    numerous messages: exec time tuples, map entries of numbers, memory records)."""

    def __init__(self, tag: np.ndarray, parts: list[_Scalars], keep_empty: bool) -> None:
        n = len(parts[0])
        if any(len(p) != n for p in parts):
            raise ValueError(f"message parts differ in length: {[len(p) for p in parts]}")
        self.tag, self.keep_empty = tag, keep_empty
        self.tags = np.concatenate([p.tag for p in parts]).astype(np.uint8)
        self.tag_off = np.zeros(len(parts) + 1, np.int64)
        np.cumsum([len(p.tag) for p in parts], out=self.tag_off[1:])
        self.values = np.stack([p.values for p in parts]) if n else np.zeros((len(parts), 0), np.uint64)
        self.keeps = np.array([p.keep_zero for p in parts], np.bool_)
        self.body = _fused_body(self.tag_off, self.values, self.keeps)
        self.off = _message_offsets(len(tag), self.body, keep_empty)

    def write(self, out, dst):
        _write_fused(out, dst, self.tag, self.tags, self.tag_off, self.values, self.keeps, self.body, self.keep_empty)


class _Group(Enc):
    def __init__(self, child: Enc, starts: np.ndarray) -> None:
        if len(starts) == 0 or starts[0] != 0 or starts[-1] != len(child):
            raise ValueError("a group must cover every row of its child")
        self.child, self.starts = child, starts
        self.off = child.off[starts]

    def write(self, out, dst):
        counts = np.diff(self.starts)
        shift = np.repeat(np.asarray(dst, np.int64) - self.off[:-1], counts)
        self.child.write(out, shift + self.child.off[:-1])


# ---------------------------------------------------------------------------------- builders


def tag(field: int, wire_type: int) -> np.ndarray:
    """The encoded key of ``field`` with ``wire_type`` (0 varint, 2 length-delimited)."""
    out = np.empty(10, np.uint8)
    end = put_varint(out, 0, np.uint64(field << 3 | wire_type))
    return out[:end].copy()


def _as_u64(values) -> np.ndarray:
    """Integers (any width, signed or not) or booleans as the uint64 bit patterns protobuf
    writes: negative int32/int64 become 10-byte two's complement varints."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.to_numpy(zero_copy_only=False)
    a = np.asarray(values)
    if a.dtype == np.bool_:
        return a.astype(np.uint64)
    if a.dtype == np.uint64:
        return np.ascontiguousarray(a)
    return np.ascontiguousarray(a.astype(np.int64, copy=False)).view(np.uint64)


def scalars(field: int, values, *, keep_zero: bool = False) -> Enc:
    """A varint field per row; zeros left out (proto3) unless ``keep_zero`` (map keys/values)."""
    return _Scalars(tag(field, 0), _as_u64(values), keep_zero)


def varints(values) -> Enc:
    """Bare varints, one per row (the elements of a packed repeated field)."""
    return _Scalars(np.empty(0, np.uint8), _as_u64(values), True)


def raw(array: pa.Array | pa.ChunkedArray) -> Enc:
    """The bytes of each row of an Arrow string/binary array, read in place (dictionary arrays
    expanded); a null row is empty."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if pa.types.is_dictionary(array.type):
        values = raw(array.dictionary)
        assert isinstance(values, _Bytes) and values.idx is None
        # One more, empty, value for the null rows.
        off = np.append(values.src_off, values.src_off[-1])
        idx = array.indices.fill_null(len(off) - 2).to_numpy(zero_copy_only=False).astype(np.int64)
        return _Bytes(values.buf, off, idx)
    if not pa.types.is_large_binary(array.type):
        array = array.cast(pa.large_binary())
    if array.null_count:
        array = array.fill_null(b"")
    _, offsets, data = array.buffers()
    off = np.frombuffer(offsets, np.int64)[array.offset : array.offset + len(array) + 1]
    buf = np.frombuffer(data, np.uint8) if data is not None and data.size else np.zeros(1, np.uint8)
    return _Bytes(buf, off if len(off) else np.zeros(1, np.int64))


def take(col: Enc, rows: np.ndarray) -> Enc:
    """Rows ``rows`` of a ``raw`` column, in that order."""
    if not isinstance(col, _Bytes):
        raise TypeError("take() applies to raw() columns")
    rows = np.asarray(rows, np.int64)
    return _Bytes(col.buf, col.src_off, col.idx[rows] if col.idx is not None else rows + 0)


def strings(field: int, array: pa.Array | pa.ChunkedArray, *, keep_empty: bool = False) -> Enc:
    """A length-delimited field per row; empty strings left out (proto3) unless ``keep_empty``
    (repeated strings, map keys and values)."""
    return message(field, [raw(array)], keep_empty=keep_empty)


def message(field: int | None, parts: list[Enc], *, keep_empty: bool = False) -> Enc:
    """Per row, ``parts`` concatenated; framed as field ``field`` unless it is None. An empty
    body is left out unless ``keep_empty`` (repeated messages, map values)."""
    head = tag(field, 2) if field is not None else np.empty(0, np.uint8)
    if all(isinstance(p, _Scalars) for p in parts):
        return _ScalarMessage(head, parts, keep_empty)
    return _Message(head, parts, keep_empty)


def group(col: Enc, starts: np.ndarray) -> Enc:
    """Per parent ``p``, rows ``starts[p]:starts[p + 1]`` of ``col`` concatenated."""
    return _Group(col, np.asarray(starts, np.int64))


def starts_of(parent_of_row: np.ndarray, n_parents: int) -> np.ndarray:
    """Group boundaries (``n_parents + 1``) of rows sorted by their parent's index."""
    starts = np.zeros(n_parents + 1, np.int64)
    np.cumsum(np.bincount(parent_of_row, minlength=n_parents), out=starts[1:])
    return starts


def empty(n: int) -> Enc:
    """``n`` empty rows."""
    return _Bytes(np.zeros(1, np.uint8), np.zeros(n + 1, np.int64), None)


def encode(col: Enc) -> np.ndarray:
    """Every row of ``col`` written, in order, into one new buffer."""
    out = np.empty(int(col.off[-1]), np.uint8)
    col.write(out, col.off[:-1].copy())
    return out

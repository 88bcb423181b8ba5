"""Protocol buffers' base-128 varints, once for the whole package: every reader and writer of
the wire format (ProfileProto, XSpace, checkpoints' tables, the encoders) uses these.

A varint is 1 to 10 bytes, 7 bits each, least significant first, the high bit set on every
byte but the last. The kernels (numba) read into an int64 (a value of 2^63 or more wraps, as a
protobuf ``int64`` does) and write from a uint64; ``decode`` is plain Python for the few
varints a table's index or a damaged file's diagnosis reads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

BAD = -1  # a kernel's position after a truncated or over-long varint
MAX_BYTES = 10

_U7 = np.uint64(7)
_LOW = np.uint64(0x7F)
_HIGH = np.uint64(0x80)


@njit(cache=True, _nrt=False)
def read(buf, pos, end):
    """(value, position after it) of the varint at ``buf[pos:end]``; the position is ``BAD``
    (and the value 0) when it is cut short by ``end`` or longer than 10 bytes."""
    if pos < end:
        b = np.int64(buf[pos])
        if b < 0x80:  # one byte: most tags and small numbers
            return b, pos + 1
    result = np.int64(0)
    shift = 0
    while True:
        if pos >= end or shift > 63:
            return np.int64(0), BAD
        b = np.int64(buf[pos])
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


@njit(cache=True, _nrt=False)
def size(v):
    """The bytes of the varint of ``v`` (a uint64)."""
    n = 1
    while v >= _HIGH:
        v >>= _U7
        n += 1
    return n


@njit(cache=True, _nrt=False)
def put(out, pos, v):
    """Write the varint of ``v`` (a uint64) at ``out[pos]``; the position after it."""
    while v >= _HIGH:
        out[pos] = np.uint8((v & _LOW) | _HIGH)
        v >>= _U7
        pos += 1
    out[pos] = np.uint8(v)
    return pos + 1


class VarintError(ValueError):
    """A varint ``decode`` cannot read: ``short`` (the bytes end inside it) or ``long`` (more
    than ``limit`` bytes)."""

    def __init__(self, kind: str, at: int):
        super().__init__(f"varint {'cut short' if kind == 'short' else 'too long'} at byte {at}")
        self.kind, self.at = kind, at


def decode(buf, pos: int, end: int | None = None, limit: int = MAX_BYTES) -> tuple[int, int]:
    """(value, position after it) of the varint at ``buf[pos:end]`` (bytes or any indexable of
    ints), unsigned; ``VarintError`` when it cannot be read."""
    end = len(buf) if end is None else end
    value = 0
    for k in range(limit):
        if pos + k >= end:
            raise VarintError("short", pos + k)
        b = buf[pos + k]
        value |= (b & 0x7F) << (7 * k)
        if b < 0x80:
            return value, pos + k + 1
    raise VarintError("long", pos)

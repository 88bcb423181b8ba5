"""A set of node names kept as 64-bit hashes: which names of a batch were already seen, in this
batch or an earlier one, without keeping the names themselves (a 7M-node profile's names take
hundreds of MB; their hashes 8 bytes each).

Two different names share a 64-bit hash with a probability of about n²/2⁶⁵ (1e-6 for 7M names),
so a hash seen twice is taken as a name seen twice. Arrow's own hashing
(``pc.count_distinct``) takes 15 ms for 70k names and seconds for millions; this kernel about
2.5 ms and 0.3 s.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numba import njit

_EMPTY = np.uint64(0)  # a free slot; a name hashing to 0 is stored as 1


@njit(cache=True, nogil=True)
def _insert(table, hashes, offsets, data, seen):  # pragma: no cover - compiled
    """Add to the open-addressing ``table`` (size a power of two) the hash of each string
    ``data[offsets[i]:offsets[i + 1]]``, or with no ``offsets`` each of ``hashes``. Writes to
    ``seen`` the positions whose hash was there already and returns how many; ``seen[-1]``
    gets the number added. (One kernel for both: each compiled function costs a few ms to load.)

    The hash takes eight bytes at a time (one multiplication per word where FNV-1a has one per
    byte), then murmur3's finalizer spreads every bit over the result."""
    mask = np.uint64(len(table) - 1)
    k = np.uint64(0x9E3779B97F4A7C15)
    n = len(offsets) - 1 if len(offsets) else len(hashes)
    n_seen = 0
    added = 0
    for i in range(n):
        if len(offsets):
            a, b = offsets[i], offsets[i + 1]
            h = np.uint64(0xCBF29CE484222325) ^ np.uint64(b - a)
            j = a
            while j + 8 <= b:
                w = np.uint64(0)
                for x in range(8):
                    w |= np.uint64(data[j + x]) << np.uint64(8 * x)
                h = (h ^ w) * k
                h ^= h >> np.uint64(29)
                j += 8
            w = np.uint64(0)
            for x in range(b - j):
                w |= np.uint64(data[j + x]) << np.uint64(8 * x)
            h = (h ^ w) * k
            h ^= h >> np.uint64(33)
            h *= np.uint64(0xFF51AFD7ED558CCD)
            h ^= h >> np.uint64(33)
            h *= np.uint64(0xC4CEB9FE1A85EC53)
            h ^= h >> np.uint64(33)
            if h == _EMPTY:
                h = np.uint64(1)
        else:
            h = hashes[i]
        slot = h & mask
        while True:
            if table[slot] == _EMPTY:
                table[slot] = h
                added += 1
                break
            if table[slot] == h:
                seen[n_seen] = i
                n_seen += 1
                break
            slot = (slot + np.uint64(1)) & mask
    seen[len(seen) - 1] = added
    return n_seen


_NO_HASHES = np.zeros(0, np.uint64)
_NO_OFFSETS = np.zeros(0, np.int64)
_NO_DATA = np.zeros(1, np.uint8)


class NameSet:
    """The names added so far, as hashes in a table kept at most half full."""

    def __init__(self) -> None:
        self._table = np.zeros(1 << 18, np.uint64)  # 2 MB, mapped as used: no rehash below 131k names
        self._size = 0

    def add(self, names: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Add ``names`` (strings); returns the positions among them of names already added."""
        if isinstance(names, pa.ChunkedArray):
            names = names.combine_chunks()
        if not pa.types.is_large_string(names.type):
            names = names.cast(pa.string())
        n = len(names)
        if n == 0:
            return np.zeros(0, np.int64)
        wide = np.int64 if pa.types.is_large_string(names.type) else np.int32
        offsets = np.frombuffer(names.buffers()[1], wide)[names.offset : names.offset + n + 1].astype(np.int64)
        data = names.buffers()[2]
        data = np.frombuffer(data, np.uint8) if data is not None else _NO_DATA
        self._reserve(self._size + n)
        seen = np.empty(n + 1, np.int64)
        k = _insert(self._table, _NO_HASHES, offsets, data, seen)
        self._size += int(seen[-1])
        return seen[:k].copy()

    def _reserve(self, size: int) -> None:
        if 2 * size <= len(self._table):
            return
        capacity = len(self._table)
        while 2 * size > capacity:
            capacity *= 4  # few rehashes as batches come
        old = self._table[self._table != _EMPTY]
        self._table = np.zeros(capacity, np.uint64)
        _insert(self._table, old, _NO_OFFSETS, _NO_DATA, np.empty(len(old) + 1, np.int64))

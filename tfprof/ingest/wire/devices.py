"""Device interning: device strings (few distinct values, millions of occurrences) become codes.

They are long (``/job:localhost/replica:0/task:0/device:gpu:0/stream:all``) and met millions of
times, so the kernels look them up in a small open-addressing hash table and compare them 8
bytes at a time. A string the table does not hold yet is recorded as a miss; the Python side
interns the misses (``Devices.add``) and decodes those nodes again.
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
from numba import njit

_HSLOTS0 = 1024  # initial hash table size (power of two)


@njit(cache=True, _nrt=False)
def _word(bw, p):
    """The 8 bytes at ``p`` as a little-endian uint64, from ``bw``: the (8-aligned, padded) buffer
    viewed as uint64 words."""
    i = p >> 3
    k = np.uint64((p & 7) * 8)
    if k == 0:
        return bw[i]
    return (bw[i] >> k) | (bw[i + 1] << (np.uint64(64) - k))


@njit(cache=True, _nrt=False)
def _word_of_bytes(b, p, n):
    """Up to 8 bytes at ``b[p:p+n]`` as a little-endian uint64 (what ``_word`` loads when n == 8)."""
    w = np.uint64(0)
    for k in range(min(n, 8)):
        w |= np.uint64(b[p + k]) << np.uint64(8 * k)
    return w


@njit(cache=True, _nrt=False)
def _mix(first, last, n):
    h = first * np.uint64(0x9E3779B97F4A7C15) ^ last * np.uint64(0xC2B2AE3D27D4EB4F) ^ np.uint64(n)
    return h ^ (h >> np.uint64(29))


@njit(cache=True, _nrt=False)
def _str_key(b, p, n):
    """(first word, last word) of string ``b[p:p+n]`` (both the whole string when n <= 8)."""
    if n >= 8:
        return _word_of_bytes(b, p, 8), _word_of_bytes(b, p + n - 8, 8)
    w = _word_of_bytes(b, p, n)
    return w, w


@njit(cache=True, _nrt=False, inline="always")
def _dev_lookup(buf, bw, off, n, dev_words, dev_tab, dev_w2, slots):
    """The code of device string ``buf[off:off+n]``; -1 when it is not interned yet."""
    if n >= 8:
        first = _word(bw, off)
        last = _word(bw, off + n - 8)
    else:
        first, last = _str_key(buf, off, n)
    mask = len(slots) - 1
    j = np.int64(_mix(first, last, n) & np.uint64(mask))
    while True:
        c = slots[j]
        if c < 0:
            return -1
        if dev_tab[1, c] == n and dev_w2[0, c] == first and dev_w2[1, c] == last:
            sw = dev_tab[0, c]
            same = True
            for k in range(8, n - 8, 8):
                if _word(bw, off + k) != dev_words[sw + (k >> 3)]:
                    same = False
                    break
            if same:
                return c
        j = (j + 1) & mask


@njit(cache=True, _nrt=False)
def _dev_insert(first, last, n, slots, code):
    mask = len(slots) - 1
    j = np.int64(_mix(first, last, n) & np.uint64(mask))
    while slots[j] >= 0:
        j = (j + 1) & mask
    slots[j] = code


@njit(cache=True, _nrt=False, inline="always")
def device_code(buf, s, e, dev, miss, i):
    """Device code of ``buf[s:e]`` (``dev``: ``_Batcher._dev``); records the first string of node
    ``i`` that is not interned yet in ``miss[i]`` (and gives code 0 meanwhile)."""
    dev_words, dev_tab, dev_w2, slots, bw = dev
    c = _dev_lookup(buf, bw, s, e - s, dev_words, dev_tab, dev_w2, slots)
    if c < 0:
        if miss[i, 0] == 0:
            miss[i, 0] = 1
            miss[i, 1] = s
            miss[i, 2] = e
        return 0
    return c


class Devices:
    """The device strings met so far: codes (insertion order) and byte-order ranks."""

    def __init__(self) -> None:
        self.strings: list[bytes] = []  # only ever appended to
        self.index: dict[bytes, int] = {}
        self._lock = threading.Lock()  # batches decoded at once add devices
        self._rebuild(_HSLOTS0)

    def _rebuild(self, nslots: int) -> None:
        n = len(self.strings)
        # Each string starts on an 8-byte boundary, so the kernels compare it word by word.
        padded = [v + b"\0" * (-len(v) % 8) for v in self.strings]
        data = b"".join(padded) + b"\0" * 8
        words = np.frombuffer(data, np.uint64).copy()  # writable: one numba type
        tab = np.zeros((4, max(1, n)), np.int64)  # start word, length, rank, code of rank
        w2 = np.zeros((2, max(1, n)), np.uint64)  # first and last 8 bytes
        slots = np.full(nslots, -1, np.int32)
        start = 0
        for code, v in enumerate(self.strings):
            b = np.frombuffer(v, np.uint8)
            first, last = _str_key(b, 0, len(v))
            tab[0, code] = start // 8
            tab[1, code] = len(v)
            w2[0, code] = first
            w2[1, code] = last
            _dev_insert(first, last, len(v), slots, code)
            start += len(padded[code])
        for r, code in enumerate(sorted(range(n), key=self.strings.__getitem__)):
            tab[2, code] = r
            tab[3, r] = code
        self._arrays = (words, tab, w2, slots)  # one assignment: a kernel never sees half of them

    def add(self, values: list[bytes]) -> None:
        with self._lock:
            new = [v for v in dict.fromkeys(values) if v not in self.index]
            if not new:  # another batch added them meanwhile
                return
            for v in new:
                self.index[v] = len(self.strings)
                self.strings.append(v)
            nslots = len(self._arrays[3])
            while 2 * len(self.strings) > nslots:
                nslots *= 2
            self._rebuild(nslots)

    def kernel_args(self, words: np.ndarray) -> tuple:
        """What the kernels' ``dev`` argument holds, for a buffer whose word view is ``words``."""
        return (*self._arrays, words)

    def array(self) -> pa.Array:
        return pa.array([s.decode() for s in self.strings[:]], pa.string())

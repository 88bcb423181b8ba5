"""The LevelDB-format sorted table of a
checkpoint's ``.index`` file, and CRC32C (docs/TFPROF_BEHAVIOUR.md, 'Checkpoint format').

A table is data blocks of prefix-compressed key/value entries (with restart points), each
followed by a 5-byte trailer (compression type, masked CRC32C), an index block of block
handles, and a 48-byte footer ending with the table magic. Every block is CRC-checked.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof.errors import ProfileFormatError
from tfprof.varint import VarintError, decode
from tfprof.varint import read as read_varint

TABLE_MAGIC = 0xDB4775248B80FB57  # LevelDB table magic, tensorflow/core/lib/io/format.h
FOOTER_LEN = 48  # two block handles padded to 40 bytes + 8-byte magic
_TRAILER_LEN = 5  # compression type byte + masked CRC32C
_FIX = "restore it from a good copy or save the checkpoint again"


def damaged(path: str, problem: str) -> ProfileFormatError:
    """The error for a damaged checkpoint file."""
    return ProfileFormatError(f"`{path}` is damaged: {problem}; {_FIX}")


# ---------------------------------------------------------------------------------------------
# CRC32C (Castagnoli), slicing-by-8. Everything is int64 so that numba never mixes signedness.


def _crc_tables() -> np.ndarray:
    t = np.zeros((8, 256), dtype=np.int64)
    c = np.arange(256, dtype=np.int64)
    for _ in range(8):
        c = np.where(c & 1, (c >> 1) ^ 0x82F63B78, c >> 1)
    t[0] = c
    for k in range(1, 8):
        t[k] = (t[k - 1] >> 8) ^ t[0][t[k - 1] & 0xFF]
    return t


_CRC_TABLES = _crc_tables()


@njit(cache=True, nogil=True)
def _crc32c_extend(crc: int, data: np.ndarray, t: np.ndarray) -> int:  # pragma: no cover - numba
    c = (crc ^ 0xFFFFFFFF) & 0xFFFFFFFF
    n = data.shape[0]
    i = 0
    while n - i >= 8:
        c ^= (
            np.int64(data[i])
            | (np.int64(data[i + 1]) << 8)
            | (np.int64(data[i + 2]) << 16)
            | (np.int64(data[i + 3]) << 24)
        )
        c = (
            t[7, c & 0xFF]
            ^ t[6, (c >> 8) & 0xFF]
            ^ t[5, (c >> 16) & 0xFF]
            ^ t[4, c >> 24]
            ^ t[3, np.int64(data[i + 4])]
            ^ t[2, np.int64(data[i + 5])]
            ^ t[1, np.int64(data[i + 6])]
            ^ t[0, np.int64(data[i + 7])]
        )
        i += 8
    while i < n:
        c = t[0, (c ^ np.int64(data[i])) & 0xFF] ^ (c >> 8)
        i += 1
    return c ^ 0xFFFFFFFF


def crc32c(data: bytes | bytearray | memoryview | np.ndarray, crc: int = 0) -> int:
    """CRC32C of ``data``, continuing from ``crc`` (crc32c::Extend); ``crc32c(b"123456789") == 0xE3069283``."""
    return int(_crc32c_extend(crc, np.frombuffer(data, dtype=np.uint8), _CRC_TABLES))


def unmask(masked: int) -> int:
    rot = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


@njit(cache=True, nogil=True)
def varints(buf: np.ndarray, pos: int, n: int) -> tuple[np.ndarray, int]:  # pragma: no cover
    """``n`` varint64s from ``buf[pos:]`` and the position after them (-1 when they run off the end)."""
    out = np.empty(n, dtype=np.uint64)
    end = buf.shape[0]
    for k in range(n):
        v, pos = read_varint(buf, pos, end)
        if pos < 0:
            return out, -1
        out[k] = np.uint64(v)  # the int64's bits: a varint64 of 2^63 or more
    return out, pos


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``buf[pos:]``; ``IndexError`` when it runs
    past the end or is longer than 10 bytes."""
    try:
        return decode(buf, pos)
    except VarintError:
        raise IndexError("varint runs past the end") from None


# ---------------------------------------------------------------------------------------------
# The index file: a LevelDB table.


def _read_block(index: str, data: bytes, handle: bytes, what: str) -> bytes:
    """The contents of the block at ``handle`` (varint64 offset, varint64 size), CRC-checked."""
    try:
        offset, pos = varint(handle, 0)
        size, _ = varint(handle, pos)
    except IndexError:
        raise damaged(index, f"bad {what} block handle") from None
    end = offset + size + _TRAILER_LEN
    if end > len(data) - FOOTER_LEN:
        raise ProfileFormatError(
            f"`{index}` is truncated: its {what} block ends at byte {end} but the file has "
            f"{len(data)} bytes; copy the file again or save the checkpoint again"
        )
    kind = data[offset + size]
    stored = int.from_bytes(data[offset + size + 1 : end], "little")
    if unmask(stored) != crc32c(memoryview(data)[offset : offset + size + 1]):
        raise damaged(index, f"the {what} block at offset {offset} fails its CRC32C check")
    if kind == 1:
        raise ProfileFormatError(
            f"`{index}` has snappy-compressed blocks, which are not supported; save the checkpoint "
            "again with TensorFlow (it writes uncompressed index files)"
        )
    if kind != 0:
        raise damaged(index, f"unknown block compression type {kind}")
    return data[offset : offset + size]


def _block_entries(index: str, block: bytes) -> list[tuple[bytes, bytes]]:
    """The (key, value) entries of a block: prefix-compressed keys, then the restart array."""
    try:
        if len(block) < 4:
            raise IndexError("block too short")
        limit = len(block) - 4 - 4 * int.from_bytes(block[-4:], "little")
        if limit < 0:
            raise IndexError("bad restart array")
        entries, pos, key = [], 0, b""
        while pos < limit:
            shared, pos = varint(block, pos)
            unshared, pos = varint(block, pos)
            vlen, pos = varint(block, pos)
            if shared > len(key) or pos + unshared + vlen > limit:
                raise IndexError("entry runs past the block")
            key = key[:shared] + block[pos : pos + unshared]
            pos += unshared
            entries.append((key, block[pos : pos + vlen]))
            pos += vlen
    except IndexError as exc:
        raise damaged(index, str(exc)) from None
    return entries


def read_index(index: str) -> dict[bytes, bytes]:
    """Every key → value of the index table, in key order."""
    try:
        with open(index, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ProfileFormatError(f"`{index}` cannot be read: {exc.strerror or exc}") from None
    if not data:
        raise ProfileFormatError(
            f"`{index}` is empty (0 bytes): the checkpoint was not completely written; save it again"
        )
    if len(data) < FOOTER_LEN or int.from_bytes(data[-8:], "little") != TABLE_MAGIC:
        # A bundle index starts with the header entry: no shared and no own key bytes.
        if data.startswith(b"\x00\x00"):
            raise ProfileFormatError(
                f"`{index}` is truncated or damaged ({len(data)} bytes, it does not end with a table "
                "footer): copy the file again or save the checkpoint again"
            )
        raise ProfileFormatError(
            f"`{index}` is not a TensorFlow checkpoint index (it does not end with the table magic "
            "number); pass the prefix of a V2 checkpoint, e.g. `model.ckpt` for `model.ckpt.index`"
        )
    footer = data[-FOOTER_LEN:]
    try:
        _, pos = varint(footer, 0)  # the metaindex block: empty in bundles, TF never reads it
        _, pos = varint(footer, pos)
    except IndexError:
        raise damaged(index, "bad table footer") from None
    table: dict[bytes, bytes] = {}
    for _, handle in _block_entries(index, _read_block(index, data, footer[pos:], "index")):
        table.update(_block_entries(index, _read_block(index, data, handle, "data")))
    return table



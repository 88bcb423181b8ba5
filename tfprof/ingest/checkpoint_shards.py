"""Read one tensor of a V2 checkpoint from its data shard and check it against its CRC32C
(docs/TFPROF_BEHAVIOUR.md, 'Checkpoint format').

An entry of the ``.index`` file (a ``BundleEntryProto``) names a shard, an offset, a size and a
masked CRC32C. Numeric tensors are raw little-endian memory, read straight into the caller's
buffer; DT_STRING tensors are varint64 lengths, a masked CRC32C of the lengths, then the bytes;
DT_VARIANT elements are checked but not decoded.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from tfprof.errors import InputError, InputNotFoundError, ProfileFormatError
from tfprof.ingest.sstable import crc32c
from tfprof.ingest.sstable import damaged as _damaged
from tfprof.ingest.sstable import unmask as _unmask
from tfprof.ingest.sstable import varint as _varint
from tfprof.ingest.sstable import varints as _varints
from tfprof.schema.dtypes import NEWER as NEWER_DTYPES
from tfprof.schema.dtypes import dtype_name as _dtype_name
from tfprof.schema.proto import types_pb2

MAX_CELL = 2**31 - 1  # the most bytes of one Arrow binary array (int32 offsets)


DT = types_pb2.DataType
# numpy form of each dtype name, for row_to_numpy (bfloat16 is widened to float32 there).
NUMPY = {
    "DT_FLOAT": "<f4", "DT_DOUBLE": "<f8", "DT_INT32": "<i4", "DT_UINT8": "u1", "DT_INT16": "<i2",
    "DT_INT8": "i1", "DT_COMPLEX64": "<c8", "DT_INT64": "<i8", "DT_BOOL": "?", "DT_QINT8": "i1",
    "DT_QUINT8": "u1", "DT_QINT32": "<i4", "DT_QINT16": "<i2", "DT_QUINT16": "<u2",
    "DT_UINT16": "<u2", "DT_COMPLEX128": "<c16", "DT_HALF": "<f2", "DT_UINT32": "<u4",
    "DT_UINT64": "<u8",
}  # fmt: skip
# Bytes per element of every dtype stored as raw memory (DataTypeCanUseMemcpy); the newer float8 /
# int4 / int2 / float4 types hold one element per byte, like ml_dtypes.
ITEMSIZE = {DT.Value(k): np.dtype(v).itemsize for k, v in NUMPY.items()} | {DT.DT_BFLOAT16: 2}
ITEMSIZE |= dict.fromkeys(NEWER_DTYPES, 1)


def elements(entry: Any) -> int:
    """The number of elements of an entry's shape (exact: a product of int64 dims can overflow)."""
    return math.prod(d.size for d in entry.shape.dim)


class Shards:
    """The data shard files of one checkpoint, opened read-only on first use."""

    def __init__(self, prefix: str, num_shards: int) -> None:
        self.prefix, self.num_shards, self.files = prefix, num_shards, {}

    def path(self, shard: int) -> str:
        return f"{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}"

    def read(self, entry: Any, name: str, out: np.ndarray) -> np.ndarray:
        """Read the entry's ``entry.size`` bytes into ``out`` (uint8) and return it."""
        f = self.check(entry, name)
        f.seek(entry.offset)
        if f.readinto(memoryview(out)) != entry.size:
            raise self.truncated(entry, name)
        return out

    def truncated(self, entry: Any, name: str) -> ProfileFormatError:
        f = self.files[entry.shard_id]
        return ProfileFormatError(
            f"`{self.path(entry.shard_id)}` is truncated: tensor `{name}` needs bytes {entry.offset}.."
            f"{entry.offset + entry.size} but the file has {os.fstat(f.fileno()).st_size}; copy the file "
            "again or save the checkpoint again"
        )

    def total(self) -> int:
        """Bytes in all the shard files (what the tensors' values can add up to at most)."""
        return sum(os.fstat(self.open(k, "").fileno()).st_size for k in range(self.num_shards))

    def check(self, entry: Any, name: str):
        """The entry's shard file, opened, once the entry's bytes are known to lie inside it
        (checked before anything is allocated for them)."""
        f = self.open(entry.shard_id, name)
        if entry.offset + entry.size > os.fstat(f.fileno()).st_size:
            raise self.truncated(entry, name)
        return f

    def open(self, shard: int, name: str):
        path = self.path(shard)
        if not 0 <= shard < self.num_shards:
            raise _damaged(f"{self.prefix}.index", f"tensor `{name}` is in shard {shard} of {self.num_shards}")
        if shard not in self.files:
            try:
                self.files[shard] = open(path, "rb")  # noqa: SIM115 - closed by close()
            except FileNotFoundError:
                tensor = f"tensor `{name}` is in this one" if name else "this one is missing"
                raise InputNotFoundError(
                    f"`{path}` does not exist: checkpoint `{self.prefix}` has {self.num_shards} data shards "
                    f"and {tensor}; copy every `{os.path.basename(self.prefix)}.data-*` "
                    "file next to the `.index` file"
                ) from None
            except OSError as exc:
                raise ProfileFormatError(f"`{path}` cannot be read: {exc.strerror or exc}") from None
        return self.files[shard]

    def crc_error(self, entry: Any, name: str, detail: str = "") -> ProfileFormatError:
        where = f"tensor `{name}` ({entry.size} bytes at offset {entry.offset})"
        return _damaged(self.path(entry.shard_id), f"{where} fails its CRC32C check{detail}")

    def close(self) -> None:
        for f in self.files.values():
            f.close()


def _strings(buf: np.ndarray, n: int, shards: Shards, entry: Any, name: str) -> tuple[list[bytes], int]:
    """The ``n`` elements of a DT_STRING entry and the CRC32C over them (ReadStringTensor)."""
    lengths, pos = _varints(buf, 0, n)
    if pos < 0 or pos + 4 > len(buf):
        raise shards.crc_error(entry, name, " (string lengths run past the tensor)")
    if n and int(lengths.max()) > 0xFFFFFFFF:  # lengths are checksummed as uint32, or uint64 when big
        raw = b"".join(int(v).to_bytes(4 if v <= 0xFFFFFFFF else 8, "little") for v in lengths)
    else:
        raw = lengths.astype("<u4").tobytes()
    crc = crc32c(raw)
    if _unmask(int.from_bytes(buf[pos : pos + 4].tobytes(), "little")) != crc:
        raise shards.crc_error(entry, name, " (string lengths)")
    crc = crc32c(buf[pos:], crc)  # the length checksum itself, then the string bytes
    ends = np.cumsum(lengths.astype(np.int64)) + pos + 4
    if n and ends[-1] != len(buf):
        raise shards.crc_error(entry, name, " (string bytes do not fill the tensor)")
    data, starts = buf.tobytes(), [pos + 4, *ends[:-1].tolist()]
    return [data[a:b] for a, b in zip(starts, ends.tolist())], crc


def _variant_crc(buf: np.ndarray, n: int) -> int:
    """CRC32C of a DT_VARIANT entry (ReadVariantTensor); -1 when the elements are malformed."""
    crc, pos, data = 0, 0, buf.tobytes()
    for _ in range(n):
        try:
            length, pos = _varint(data, pos)
        except IndexError:
            return -1
        crc = crc32c(buf[pos : pos + length], crc32c(length.to_bytes(8, "little"), crc))
        pos += length
        if _unmask(int.from_bytes(data[pos : pos + 4], "little")) != crc:
            return -1
        crc = crc32c(buf[pos : pos + 4], crc)
        pos += 4
    return crc


def value_size(entry: Any, name: str, index: str) -> int | None:
    """Bytes of the entry's ``value`` cell (None for DT_STRING and DT_VARIANT, which have none)."""
    if entry.dtype in (DT.DT_STRING, DT.DT_VARIANT):
        return None
    dims = [d.size for d in entry.shape.dim]
    n = elements(entry)
    if entry.dtype not in ITEMSIZE:  # a dtype newer than this reader: trust the stored size
        return None if entry.slices else entry.size
    size = n * ITEMSIZE[entry.dtype]
    if not entry.slices and entry.size != size:
        dtype = _dtype_name(entry.dtype)
        raise _damaged(index, f"tensor `{name}` has {entry.size} bytes but {dtype} {dims} needs {size}")
    if size > MAX_CELL:
        raise InputError(
            f"tensor `{name}` in `{index}` holds {size} bytes; tensors over 2 GiB are not supported"
        )
    return size


def read_tensor(entry: Any, name: str, shards: Shards, index: str, out: np.ndarray | None) -> list | None:
    """Read one unpartitioned entry and check its CRC32C. Numeric bytes go into ``out`` (a slot of
    ``value_size`` bytes); returns the elements of a DT_STRING tensor, None for other dtypes."""
    n = elements(entry)
    if value_size(entry, name, index) is None:  # DT_STRING / DT_VARIANT: decoded from a scratch buffer
        shards.check(entry, name)
        out = np.empty(entry.size, dtype=np.uint8)
    buf = shards.read(entry, name, out) if entry.size else out  # TF reads nothing for an empty tensor
    strings, crc = None, 0
    if entry.dtype == DT.DT_STRING:
        strings, crc = _strings(buf, n, shards, entry, name) if entry.size else ([b""] * n, 0)
    elif entry.dtype == DT.DT_VARIANT:
        crc = _variant_crc(buf, n) if entry.size else 0
    else:
        crc = crc32c(buf)
    if crc != _unmask(entry.crc32c):
        raise shards.crc_error(entry, name)
    return strings

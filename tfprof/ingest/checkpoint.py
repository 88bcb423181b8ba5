"""Read a TensorFlow V2 checkpoint ("tensor bundle") into the ``checkpoint_tensors`` table, without TensorFlow.

A V2 checkpoint with prefix ``P`` is two kinds of file (spec 13.1):

* ``P.index``: a LevelDB-format sorted table. Key ``""`` holds a ``BundleHeaderProto``; every
  other key is a tensor name holding a ``BundleEntryProto`` (dtype, shape, shard, offset, size,
  masked CRC32C). The slices of a partitioned variable have keys of their own, built by
  TensorFlow's ``EncodeTensorNameSlice`` (ordered-code bytes, starting with ``\\x00``).
* ``P.data-00000-of-0000N``: the tensor bytes, little-endian and row-major; DT_STRING tensors are
  varint64 lengths, a masked CRC32C of the lengths, then the bytes.

Every block and every tensor is checked against its CRC32C. Files are opened read-only, and
tensor bytes are read straight into the table's buffers. Not supported: V1 checkpoints,
big-endian bundles, snappy-compressed index blocks (each a ``ProfileFormatError``) and tensors
over 2 GiB (an Arrow binary cell). DT_VARIANT tensors are checked, but their value is left null.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import DecodeError

from tfprof.errors import InputError, InputNotFoundError, ProfileFormatError
from tfprof.ingest.sources import one_line
from tfprof.ingest.sstable import (
    FOOTER_LEN as _FOOTER_LEN,
    TABLE_MAGIC as _TABLE_MAGIC,
    crc32c,
    damaged as _damaged,
    read_index as _read_index,
    unmask as _unmask,
    varint as _varint,
    varints as _varints,
)
from tfprof.schema.conform import conform
from tfprof.schema.dtypes import NEWER as NEWER_DTYPES
from tfprof.schema.dtypes import dtype_name as _dtype_name
from tfprof.schema.proto import tensor_bundle_pb2, types_pb2

__all__ = ["read_checkpoint", "tensor_to_numpy", "row_to_numpy", "checkpoint_prefix", "crc32c"]

_SHARD_SUFFIX = re.compile(r"\.data-\d{5}-of-\d{5}$")
_MAX_CELL = 2**31 - 1  # the most bytes of one Arrow binary array (int32 offsets)


DT = types_pb2.DataType
# numpy form of each dtype name, for row_to_numpy (bfloat16 is widened to float32 there).
_NUMPY = {
    "DT_FLOAT": "<f4", "DT_DOUBLE": "<f8", "DT_INT32": "<i4", "DT_UINT8": "u1", "DT_INT16": "<i2",
    "DT_INT8": "i1", "DT_COMPLEX64": "<c8", "DT_INT64": "<i8", "DT_BOOL": "?", "DT_QINT8": "i1",
    "DT_QUINT8": "u1", "DT_QINT32": "<i4", "DT_QINT16": "<i2", "DT_QUINT16": "<u2",
    "DT_UINT16": "<u2", "DT_COMPLEX128": "<c16", "DT_HALF": "<f2", "DT_UINT32": "<u4",
    "DT_UINT64": "<u8",
}  # fmt: skip
# Bytes per element of every dtype stored as raw memory (DataTypeCanUseMemcpy); the newer float8 /
# int4 / int2 / float4 types hold one element per byte, like ml_dtypes.
_ITEMSIZE = {DT.Value(k): np.dtype(v).itemsize for k, v in _NUMPY.items()} | {DT.DT_BFLOAT16: 2}
_ITEMSIZE |= dict.fromkeys(NEWER_DTYPES, 1)


# ---------------------------------------------------------------------------------------------
# Paths


def checkpoint_prefix(path: str | os.PathLike) -> str:
    """The checkpoint prefix for ``path``: the prefix itself, ``P.index`` or a ``P.data-…`` shard."""
    p = os.fspath(path)
    if os.path.exists(p + ".index"):
        return p
    if p.endswith(".index"):
        return p[: -len(".index")]
    return _SHARD_SUFFIX.sub("", p)


def _is_sstable(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() < _FOOTER_LEN:
                return False
            f.seek(-8, os.SEEK_END)
            return int.from_bytes(f.read(8), "little") == _TABLE_MAGIC
    except OSError:
        return False


def _missing_index_error(given: str, prefix: str) -> Exception:
    index = prefix + ".index"
    parent, stem = Path(prefix).parent, Path(prefix).name
    if (os.path.isfile(prefix) and _is_sstable(prefix)) or any(parent.glob(stem + "-?????-of-?????")):
        return ProfileFormatError(
            f"`{prefix}` is a V1 checkpoint; only V2 checkpoints (`{stem}.index` + `{stem}.data-*`) are "
            "supported: convert it with TensorFlow, restoring it with tf.compat.v1.train.Saver and "
            "saving it again (V2 is the default write_version)"
        )
    if os.path.isfile(prefix):
        return ProfileFormatError(
            f"`{prefix}` is not a TensorFlow checkpoint (there is no `{stem}.index` beside it and it is "
            "not a V1 checkpoint); pass the checkpoint prefix, e.g. `model.ckpt` for `model.ckpt.index`"
        )
    if any(parent.glob(stem + ".data-?????-of-?????")):
        return InputNotFoundError(
            f"`{index}` does not exist, but the data shards `{stem}.data-*` do: a V2 checkpoint needs "
            "both; copy the index file next to them"
        )
    folder = Path(given) if os.path.isdir(given) else parent
    found = sorted(str(i)[: -len(".index")] for i in folder.glob("*.index")) if folder.is_dir() else []
    hint = f"; found: {', '.join(f'`{f}`' for f in found[:3])}" if found else ""
    via = f" (from `{given}`)" if given != prefix else ""
    return InputNotFoundError(
        f"`{index}` does not exist{via}: check the path and pass the prefix of a V2 checkpoint, "
        f"the path without `.index`{hint}"
    )


# ---------------------------------------------------------------------------------------------
# Slice keys (tensorflow/core/util/saved_tensor_slice_util.cc, EncodeTensorNameSlice, with
# tensorflow/core/lib/strings/ordered_code.cc).


def _ordered_num(value: int) -> bytes:
    """OrderedCode::WriteNumIncreasing: a length byte, then big-endian bytes without leading zeros."""
    body = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return bytes([len(body)]) + body


def _ordered_signed(value: int) -> bytes:
    """OrderedCode::WriteSignedNumIncreasing: sign and length bits, then two's complement."""
    x = ~value if value < 0 else value
    if x < 64:
        return bytes([(0x80 ^ value) & 0xFF])
    length = x.bit_length() // 7 + 1  # kBitsToLength
    buf = bytearray((value & (2**80 - 1)).to_bytes(10, "big")[10 - length :])
    header = (0xFF << (8 - length)) & 0xFF if length <= 8 else 0xFF
    buf[0] ^= header
    if length > 8:
        buf[1] ^= (0xFF << (16 - length)) & 0xFF
    return bytes(buf)


_SPECIAL = re.compile(rb"[\x00\xff]")
_ESCAPES = {b"\x00": b"\x00\xff", b"\xff": b"\xff\x00"}


def _ordered_string(s: bytes) -> bytes:
    """OrderedCode::WriteString: escape 0x00 and 0xff, end with 0x00 0x01."""
    return _SPECIAL.sub(lambda m: _ESCAPES[m.group()], s) + b"\x00\x01"


def _extents(slice_proto: Any, rank: int) -> list[tuple[int, int]]:
    """(start, length) per dim; length -1 (unset in the proto) is the whole dim (kFullExtent)."""
    out = [(e.start, e.length if e.HasField("length") else -1) for e in slice_proto.extent]
    return out + [(0, -1)] * (rank - len(out))


def _slice_key(name: bytes, extents: list[tuple[int, int]]) -> bytes:
    key = _ordered_num(0) + _ordered_string(name) + _ordered_num(len(extents))
    return key + b"".join(_ordered_signed(s) + _ordered_signed(n) for s, n in extents)


def _spec(extents: list[tuple[int, int]]) -> str:
    """A slice in TensorFlow's slice-spec syntax, e.g. ``0,67:-``."""
    return ":".join("-" if n < 0 else f"{s},{n}" for s, n in extents)


# ---------------------------------------------------------------------------------------------
# Tensors


def _elements(entry: Any) -> int:
    """The number of elements of an entry's shape (exact: a product of int64 dims can overflow)."""
    return math.prod(d.size for d in entry.shape.dim)


class _Shards:
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


def _strings(buf: np.ndarray, n: int, shards: _Shards, entry: Any, name: str) -> tuple[list[bytes], int]:
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


def _value_size(entry: Any, name: str, index: str) -> int | None:
    """Bytes of the entry's ``value`` cell (None for DT_STRING and DT_VARIANT, which have none)."""
    if entry.dtype in (DT.DT_STRING, DT.DT_VARIANT):
        return None
    dims = [d.size for d in entry.shape.dim]
    n = _elements(entry)
    if entry.dtype not in _ITEMSIZE:  # a dtype newer than this reader: trust the stored size
        return None if entry.slices else entry.size
    size = n * _ITEMSIZE[entry.dtype]
    if not entry.slices and entry.size != size:
        dtype = _dtype_name(entry.dtype)
        raise _damaged(index, f"tensor `{name}` has {entry.size} bytes but {dtype} {dims} needs {size}")
    if size > _MAX_CELL:
        raise InputError(
            f"tensor `{name}` in `{index}` holds {size} bytes; tensors over 2 GiB are not supported"
        )
    return size


def _read_tensor(entry: Any, name: str, shards: _Shards, index: str, out: np.ndarray | None) -> list | None:
    """Read one unpartitioned entry and check its CRC32C. Numeric bytes go into ``out`` (a slot of
    ``_value_size`` bytes); returns the elements of a DT_STRING tensor, None for other dtypes."""
    n = _elements(entry)
    if _value_size(entry, name, index) is None:  # DT_STRING / DT_VARIANT: decoded from a scratch buffer
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


def _assemble(key: bytes, entry: Any, table: dict, shards: _Shards, index: str, out: np.ndarray | None) -> Any:
    """A partitioned tensor from its slice entries (BundleReader::GetSliceValue): numeric bytes go
    into ``out``; returns the elements of a DT_STRING tensor (None otherwise)."""
    name = one_line(key.decode("utf-8", "backslashreplace"))
    shape = [d.size for d in entry.shape.dim]
    if entry.dtype == DT.DT_STRING:
        full = np.empty(shape, dtype=object)
    elif entry.dtype in _ITEMSIZE and out is not None:
        full = out.view(f"V{_ITEMSIZE[entry.dtype]}").reshape(shape)  # any dtype, copied as opaque items
    else:
        raise ProfileFormatError(
            f"`{index}`: partitioned tensor `{name}` has dtype {_dtype_name(entry.dtype)}, which cannot "
            "be assembled from slices; save it unpartitioned"
        )
    covered = np.zeros(shape, dtype=bool)
    for proto in entry.slices:
        extents = _extents(proto, len(shape))
        if len(extents) != len(shape) or any(
            s < 0 or (n < 0 and (n != -1 or s)) or (n >= 0 and s + n > d) for (s, n), d in zip(extents, shape)
        ):
            raise _damaged(index, f"slice {_spec(extents)} of `{name}` does not fit its shape {shape}")
        region = tuple(slice(s, s + n) if n >= 0 else slice(None) for s, n in extents)
        part = tensor_bundle_pb2.BundleEntryProto()
        try:
            part.ParseFromString(table[_slice_key(key, extents)])
        except (KeyError, DecodeError):
            raise _damaged(index, f"partitioned tensor `{name}` lacks its slice {_spec(extents)}") from None
        part_shape = tuple(d.size for d in part.shape.dim)
        if part_shape != full[region].shape or part.dtype != entry.dtype:
            raise _damaged(index, f"slice {_spec(extents)} of `{name}` has shape {list(part_shape)}")
        if part.size:
            shards.check(part, f"{name}[{_spec(extents)}]")
        part_out = None if entry.dtype == DT.DT_STRING else np.empty(part.size, dtype=np.uint8)
        strings = _read_tensor(part, f"{name}[{_spec(extents)}]", shards, index, part_out)
        part_value = np.array(strings, dtype=object) if part_out is None else part_out.view(full.dtype)
        full[region] = part_value.reshape(part_shape)
        covered[region] = True
    if not covered.all():
        raise _damaged(index, f"the slices of partitioned tensor `{name}` do not cover its shape {shape}")
    return list(full.reshape(-1)) if entry.dtype == DT.DT_STRING else None


def _value_buffers(sizes: list[int | None]) -> tuple[list[tuple[int, int, np.ndarray]], list[np.ndarray | None]]:
    """One buffer per run of rows under 2 GiB (Arrow binary offsets are int32), and each row's slot in it.

    Tensors are read straight into their slot, so the bytes are copied once, from the file.
    """
    runs, start, total = [], 0, 0
    for i, size in enumerate(sizes):
        if total + (size or 0) > _MAX_CELL and i > start:
            runs.append((start, i))
            start, total = i, 0
        total += size or 0
    runs.append((start, len(sizes)))
    buffers, slots = [], []
    for a, b in runs:
        ends = np.cumsum([s or 0 for s in sizes[a:b]], dtype=np.int64)
        buf = np.empty(int(ends[-1]) if b > a else 0, dtype=np.uint8)
        buffers.append((a, b, buf))
        slots += [None if s is None else buf[e - s : e] for s, e in zip(sizes[a:b], ends.tolist())]
    return buffers, slots


def _value_column(sizes: list[int | None], buffers: list[tuple[int, int, np.ndarray]]) -> pa.ChunkedArray:
    """The filled buffers as a binary column, without copying them."""
    chunks = []
    for a, b, buf in buffers:
        run = sizes[a:b]
        offsets = np.concatenate([[0], np.cumsum([s or 0 for s in run])]).astype(np.int32)
        valid = pa.array([s is not None for s in run], type=pa.bool_()).buffers()[1]
        buffers_ = [valid, pa.py_buffer(offsets), pa.py_buffer(buf)]
        chunks.append(pa.Array.from_buffers(pa.binary(), b - a, buffers_))
    return pa.chunked_array(chunks, type=pa.binary())


def _header(index: str, table: dict[bytes, bytes]) -> Any:
    header = tensor_bundle_pb2.BundleHeaderProto()
    try:
        header.ParseFromString(table[b""])
    except (KeyError, DecodeError):
        raise _damaged(index, 'it has no bundle header (key "")') from None
    if header.endianness == tensor_bundle_pb2.BundleHeaderProto.BIG:
        raise ProfileFormatError(
            f"`{index}` is a big-endian checkpoint, which is not supported; save it again on a "
            "little-endian machine"
        )
    if header.version.min_consumer > 1 or 1 in header.version.bad_consumers:
        raise ProfileFormatError(
            f"`{index}` needs a newer checkpoint reader (min_consumer {header.version.min_consumer}, "
            "this reader is version 1); save it again with an older TensorFlow"
        )
    return header


def read_checkpoint(prefix: str | os.PathLike) -> pa.Table:
    """The ``checkpoint_tensors`` table of the V2 checkpoint at ``prefix``.

    ``prefix`` may also be the ``.index`` file or one ``.data-NNNNN-of-NNNNN`` shard. A
    partitioned variable is one row holding the assembled full tensor; its slices are not rows.
    Raises ``InputNotFoundError`` for a missing file and ``ProfileFormatError`` for a damaged or
    unsupported one.
    """
    given = os.fspath(prefix)
    base = checkpoint_prefix(given)
    index = base + ".index"
    if not os.path.isfile(index):
        raise _missing_index_error(given, base)
    table = _read_index(index)
    shards = _Shards(base, max(_header(index, table).num_shards, 1))
    rows = []
    for key, raw in table.items():
        if not key or key.startswith(b"\x00"):
            continue  # the header, or a slice key (EncodeTensorNameSlice starts with ordered-code 0)
        name = key.decode("utf-8", "backslashreplace")
        entry = tensor_bundle_pb2.BundleEntryProto()
        try:
            entry.ParseFromString(raw)
        except DecodeError:
            raise _damaged(index, f"the entry of tensor `{one_line(name)}` cannot be parsed") from None
        if any(d.size < 0 for d in entry.shape.dim) or _elements(entry) >= 1 << 62:
            raise _damaged(index, f"tensor `{one_line(name)}` has shape {[d.size for d in entry.shape.dim]}")
        rows.append((key, name, entry))
    sizes = [_value_size(entry, one_line(name), index) for _, name, entry in rows]
    strings = []
    try:
        for (_, name, entry), size in zip(rows, sizes):  # every value within the shards, before allocating
            if not entry.slices and entry.size:
                shards.check(entry, one_line(name))
            elif entry.slices and max(size or 0, _elements(entry)) > shards.total():
                dims = [d.size for d in entry.shape.dim]
                raise _damaged(index, f"partitioned tensor `{one_line(name)}` of shape {dims} needs more bytes "
                               "than its data shards hold")
        buffers, slots = _value_buffers(sizes)
        for (key, name, entry), slot in zip(rows, slots):
            if entry.slices:
                strings.append(_assemble(key, entry, table, shards, index, slot))
            else:
                strings.append(_read_tensor(entry, one_line(name), shards, index, slot))
    finally:
        shards.close()
    names = [name for _, name, _ in rows]
    shapes = [[d.size for d in entry.shape.dim] for _, _, entry in rows]
    cols = {
        "name": names,
        "dtype": [_dtype_name(entry.dtype) for _, _, entry in rows],
        "shape": shapes,
        "num_elements": [_elements(entry) for _, _, entry in rows],
        "value": _value_column(sizes, buffers),
        "string_value": strings,
    }
    # Index keys are in byte order, which is Arrow's string order: sorting would only copy the values.
    return conform("checkpoint_tensors", cols, sort=names != sorted(names))


# ---------------------------------------------------------------------------------------------
# Values as numpy


def row_to_numpy(row: Mapping[str, Any]) -> np.ndarray:
    """The value of one ``checkpoint_tensors`` row (a dict, as from ``Table.to_pylist()``) as numpy.

    Numeric arrays are read-only views of the row's bytes; DT_BFLOAT16 is widened to float32;
    DT_STRING gives an object array of ``bytes``.
    """
    dtype, shape = row["dtype"], tuple(row["shape"])
    if dtype == "DT_STRING" and row["string_value"] is not None:
        out = np.empty(len(row["string_value"]), dtype=object)
        out[:] = row["string_value"]
        return out.reshape(shape)
    if row["value"] is not None and dtype == "DT_BFLOAT16":
        bits = np.frombuffer(row["value"], dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    if row["value"] is not None and dtype in _NUMPY:
        return np.frombuffer(row["value"], dtype=_NUMPY[dtype]).reshape(shape)
    raise InputError(
        f"tensor `{row['name']}` has dtype {dtype}, which has no numpy form here; supported: "
        f"{', '.join(sorted([*_NUMPY, 'DT_BFLOAT16', 'DT_STRING']))}"
    )


def tensor_to_numpy(tensors: pa.Table, name: str) -> np.ndarray:
    """The value of tensor ``name`` of a ``checkpoint_tensors`` table as numpy (see ``row_to_numpy``)."""
    rows = tensors.filter(pc.equal(tensors.column("name"), name)).slice(0, 1).to_pylist()
    if not rows:
        raise KeyError(f"tensor `{name}` is not in the checkpoint")
    return row_to_numpy(rows[0])

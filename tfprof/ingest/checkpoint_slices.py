"""A partitioned variable of a V2 checkpoint: the index keys of its slices, and the full tensor
assembled from them (docs/TFPROF_BEHAVIOUR.md, 'Checkpoint format').

Each slice of a partitioned variable has an index key of its own, built by TensorFlow's
``EncodeTensorNameSlice`` from ordered-code bytes (it starts with ``\\x00``); the variable's own
entry lists the slices, and reading it means reading every slice into its region.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from tfprof.errors import ProfileFormatError
from tfprof.ingest.checkpoint_shards import DT, ITEMSIZE, Shards, read_tensor
from tfprof.ingest.sources import one_line
from tfprof.ingest.sstable import damaged as _damaged
from tfprof.schema.dtypes import dtype_name as _dtype_name
from tfprof.schema.proto import tensor_bundle_pb2

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


def assemble(key: bytes, entry: Any, table: dict, shards: Shards, index: str, out: np.ndarray | None) -> Any:
    """A partitioned tensor from its slice entries (BundleReader::GetSliceValue): numeric bytes go
    into ``out``; returns the elements of a DT_STRING tensor (None otherwise)."""
    name = one_line(key.decode("utf-8", "backslashreplace"))
    shape = [d.size for d in entry.shape.dim]
    if entry.dtype == DT.DT_STRING:
        full = np.empty(shape, dtype=object)
    elif entry.dtype in ITEMSIZE and out is not None:
        full = out.view(f"V{ITEMSIZE[entry.dtype]}").reshape(shape)  # any dtype, copied as opaque items
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
        strings = read_tensor(part, f"{name}[{_spec(extents)}]", shards, index, part_out)
        part_value = np.array(strings, dtype=object) if part_out is None else part_out.view(full.dtype)
        full[region] = part_value.reshape(part_shape)
        covered[region] = True
    if not covered.all():
        raise _damaged(index, f"the slices of partitioned tensor `{name}` do not cover its shape {shape}")
    return list(full.reshape(-1)) if entry.dtype == DT.DT_STRING else None

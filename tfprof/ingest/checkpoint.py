"""Read a TensorFlow V2 checkpoint ("tensor bundle") into the ``checkpoint_tensors`` table, without TensorFlow.

A V2 checkpoint with prefix ``P`` is two kinds of file (docs/TFPROF_BEHAVIOUR.md, 'Checkpoint format'):

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
from tfprof.ingest.checkpoint_shards import MAX_CELL, NUMPY, Shards, elements, read_tensor, value_size
from tfprof.ingest.checkpoint_slices import assemble
from tfprof.ingest.sources import one_line
from tfprof.ingest.sstable import FOOTER_LEN as _FOOTER_LEN
from tfprof.ingest.sstable import TABLE_MAGIC as _TABLE_MAGIC
from tfprof.ingest.sstable import crc32c
from tfprof.ingest.sstable import damaged as _damaged
from tfprof.ingest.sstable import read_index as _read_index
from tfprof.schema.conform import conform
from tfprof.schema.dtypes import dtype_name as _dtype_name
from tfprof.schema.proto import tensor_bundle_pb2

__all__ = ["read_checkpoint", "tensor_to_numpy", "row_to_numpy", "checkpoint_prefix", "crc32c"]

_SHARD_SUFFIX = re.compile(r"\.data-\d{5}-of-\d{5}$")


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



def _value_buffers(sizes: list[int | None]) -> tuple[list[tuple[int, int, np.ndarray]], list[np.ndarray | None]]:
    """One buffer per run of rows under 2 GiB (Arrow binary offsets are int32), and each row's slot in it.

    Tensors are read straight into their slot, so the bytes are copied once, from the file.
    """
    runs, start, total = [], 0, 0
    for i, size in enumerate(sizes):
        if total + (size or 0) > MAX_CELL and i > start:
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
    shards = Shards(base, max(_header(index, table).num_shards, 1))
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
        if any(d.size < 0 for d in entry.shape.dim) or elements(entry) >= 1 << 62:
            raise _damaged(index, f"tensor `{one_line(name)}` has shape {[d.size for d in entry.shape.dim]}")
        rows.append((key, name, entry))
    sizes = [value_size(entry, one_line(name), index) for _, name, entry in rows]
    strings = []
    try:
        for (_, name, entry), size in zip(rows, sizes):  # every value within the shards, before allocating
            if not entry.slices and entry.size:
                shards.check(entry, one_line(name))
            elif entry.slices and max(size or 0, elements(entry)) > shards.total():
                dims = [d.size for d in entry.shape.dim]
                raise _damaged(index, f"partitioned tensor `{one_line(name)}` of shape {dims} needs more bytes "
                               "than its data shards hold")
        buffers, slots = _value_buffers(sizes)
        for (key, name, entry), slot in zip(rows, slots):
            if entry.slices:
                strings.append(assemble(key, entry, table, shards, index, slot))
            else:
                strings.append(read_tensor(entry, one_line(name), shards, index, slot))
    finally:
        shards.close()
    names = [name for _, name, _ in rows]
    shapes = [[d.size for d in entry.shape.dim] for _, _, entry in rows]
    cols = {
        "name": names,
        "dtype": [_dtype_name(entry.dtype) for _, _, entry in rows],
        "shape": shapes,
        "num_elements": [elements(entry) for _, _, entry in rows],
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
    if row["value"] is not None and dtype in NUMPY:
        return np.frombuffer(row["value"], dtype=NUMPY[dtype]).reshape(shape)
    raise InputError(
        f"tensor `{row['name']}` has dtype {dtype}, which has no numpy form here; supported: "
        f"{', '.join(sorted([*NUMPY, 'DT_BFLOAT16', 'DT_STRING']))}"
    )


def tensor_to_numpy(tensors: pa.Table, name: str) -> np.ndarray:
    """The value of tensor ``name`` of a ``checkpoint_tensors`` table as numpy (see ``row_to_numpy``)."""
    rows = tensors.filter(pc.equal(tensors.column("name"), name)).slice(0, 1).to_pylist()
    if not rows:
        raise KeyError(f"tensor `{name}` is not in the checkpoint")
    return row_to_numpy(rows[0])

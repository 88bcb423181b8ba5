"""The Arrow side of a batch: the fill kernel's columns become the schema's tables.

Every table is in the schema's row order and its dictionaries list the values the batch uses in
the order the reference decoder first meets them, so that concatenating batches
(``concat_batches``) gives tables equal to the reference's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from tfprof.ingest.sources import damaged
from tfprof.schema import TABLES
from tfprof.schema.conform import conform


@njit(cache=True, nogil=True)
def put(buf, starts, ends, out, at):
    """Copy each ``buf[starts[i]:ends[i]]`` into ``out`` from ``at[i]`` (a slice copy: about three
    times a byte loop's speed, which numba does not vectorize)."""
    for i in range(len(starts)):
        s = starts[i]
        o = at[i]
        m = ends[i] - s
        out[o:o + m] = buf[s:s + m]


@njit(cache=True, nogil=True)
def gather(buf, starts, ends):
    """Concatenate ``buf[starts[i]:ends[i]]``; returns (data, int32 offsets)."""
    n = len(starts)
    offs = np.zeros(n + 1, np.int32)
    total = 0
    for i in range(n):
        total += ends[i] - starts[i]
        offs[i + 1] = total
    data = np.empty(max(total, 1), np.uint8)
    put(buf, starts, ends, data, offs)
    return data, offs



@njit(cache=True, nogil=True)
def first_seen(codes, n_values):
    """Renumber ``codes`` (-1 = null) in order of first appearance: (new codes, old code of each new)."""
    remap = np.full(n_values, -1, np.int64)
    order = np.empty(n_values, np.int64)
    out = np.empty(len(codes), np.int32)
    k = 0
    for i in range(len(codes)):
        c = codes[i]
        if c < 0:
            out[i] = 0
            continue
        if remap[c] < 0:
            remap[c] = k
            order[k] = c
            k += 1
        out[i] = remap[c]
    return out, order[:k]


@njit(cache=True, nogil=True)
def _group_file_order(node, step, pos):
    """Row permutation that puts each (node, step) group's rows back in file order (``pos``)."""
    n = len(node)
    perm = np.empty(n, np.int64)
    g = 0
    while g < n:
        h = g
        while h < n and node[h] == node[g] and step[h] == step[g]:
            h += 1
        for r in range(g, h):
            perm[g + pos[r]] = r
        g = h
    return perm


@njit(cache=True, nogil=True)
def _gather_spans(values, starts, lens):
    """Concatenate ``values[starts[i]:starts[i]+lens[i]]``; returns (values, int32 offsets)."""
    n = len(starts)
    offs = np.zeros(n + 1, np.int32)
    for i in range(n):
        offs[i + 1] = offs[i] + lens[i]
    out = np.empty(offs[n], values.dtype)
    for i in range(n):
        for k in range(lens[i]):
            out[offs[i] + k] = values[starts[i] + k]
    return out, offs



def checked_strings(data: np.ndarray, offsets: np.ndarray, path: Path, what: str) -> pa.StringArray:
    arr = pa.StringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data))
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        raise damaged(path, "profile", f"{what} is not valid UTF-8") from None
    return arr



def _table(name: str, columns: list) -> pa.Table:
    return pa.Table.from_arrays(columns, schema=TABLES[name].schema)


def _encode(strings: pa.Array) -> pa.DictionaryArray:
    """Dictionary-encode in order of first appearance (what ``conform`` does)."""
    return pc.dictionary_encode(strings).cast(pa.dictionary(pa.int32(), pa.string()))


def _dict(codes: np.ndarray, values: pa.Array, first_seen_order: np.ndarray | None = None) -> pa.DictionaryArray:
    """A dictionary column from codes into ``values`` (-1 = null), listing the used values in order
    of first appearance (in ``first_seen_order`` of the rows when given)."""
    n_values = max(len(values), 1)
    if first_seen_order is None:
        new, order = first_seen(codes, n_values)
    else:
        new_p, order = first_seen(codes[first_seen_order], n_values)
        new = np.empty_like(new_p)
        new[first_seen_order] = new_p
    mask = codes < 0
    indices = pa.array(new, pa.int32(), mask=mask if mask.any() else None)
    return pa.DictionaryArray.from_arrays(indices, values.take(pa.array(order)))


def batch_tables(out: tuple, index, a: int, b: int, devs: pa.Array, path: Path) -> dict[str, pa.Table]:
    """The per-node tables of node ids ``index.keys[a:b]`` from the fill kernel's ``out``."""
    (o_nodes, o_shape, o_inputs, o_types, o_osh, o_odims, o_attrs, o_frames, o_steps, o_exdev, o_execs, o_mem,
     o_omem, o_alloc, sbuf) = out
    i64 = lambda col: pa.array(col, pa.int64())  # noqa: E731
    i32 = lambda col: pa.array(col.astype(np.int32), pa.int32())  # noqa: E731

    def strings(o: np.ndarray, col: int, what: str) -> pa.StringArray:
        return checked_strings(*gather(sbuf, o[col, :], o[col + 1, :]), path, what)

    def code_strings(k: int) -> pa.DictionaryArray:
        return _code_strings(o_frames, k, sbuf, index.code_values, path)

    t = {}
    shape_off = np.zeros(b - a + 1, np.int32)
    np.cumsum(o_nodes[7, :], out=shape_off[1:])
    t["nodes"] = _table("nodes", [
        i64(o_nodes[0, :]), index.names.slice(a, b - a), _encode(strings(o_nodes, 1, "an op name")),
        pa.ListArray.from_arrays(pa.array(shape_off), i64(o_shape)), i64(o_nodes[6, :]), i64(o_nodes[5, :]),
        _dict(o_nodes[3, :], devs), _dict(o_nodes[4, :], devs)])
    t["node_inputs"] = _table("node_inputs", [
        i64(o_inputs[0, :]), i32(o_inputs[1, :]), index.names.take(pa.array(o_inputs[3, :])),
        i64(o_inputs[2, :]), i32(o_inputs[4, :])])
    t["node_types"] = conform("node_types", {"node_id": i64(o_types[0, :]),
                                             "op_type": strings(o_types, 1, "an op type")})
    dims, dims_off = _gather_spans(o_odims, o_osh[2, :], o_osh[3, :])
    t["output_shapes"] = _table("output_shapes", [
        i64(o_osh[0, :]), i32(o_osh[1, :]), pa.ListArray.from_arrays(pa.array(dims_off), i64(dims))])
    t["node_attrs"] = _table("node_attrs", [
        i64(o_attrs[0, :]), _encode(strings(o_attrs, 1, "an attr name")), _attr_values(o_attrs, sbuf, path)])
    t["node_steps"] = _table("node_steps", [i64(o_steps[c, :]) for c in range(5)]
                             + [pa.nulls(o_steps.shape[1], pa.int64())])
    perm = _group_file_order(o_exdev[0, :], o_exdev[1, :], o_exdev[3, :])
    t["exec_devices"] = _table("exec_devices", [
        i64(o_exdev[0, :]), i64(o_exdev[1, :]), _dict(o_exdev[2, :], devs, first_seen_order=perm)])
    t["execs"] = _table("execs", [
        i64(o_execs[0, :]), i64(o_execs[1, :]), _dict(o_execs[2, :], devs),
        _dict(o_execs[3, :], pa.array(["accelerator", "cpu"])), i64(o_execs[4, :]),
        i64(o_execs[5, :]), pa.nulls(o_execs.shape[1], pa.int64())])
    # ExecMemory fields 1..10 sit in columns 3..12; the table orders them differently.
    mem_cols = (3, 8, 9, 10, 11, 4, 5, 6, 7, 12)
    t["memory"] = _table("memory", [i64(o_mem[0, :]), i64(o_mem[1, :]), i32(o_mem[2, :])]
                         + [i64(o_mem[c, :]) for c in mem_cols])
    t["output_memory"] = _table("output_memory", [
        i64(o_omem[0, :]), i64(o_omem[1, :]), i32(o_omem[2, :]), i32(o_omem[3, :]), i64(o_omem[4, :]),
        pa.array(o_omem[5, :].view(np.uint64), pa.uint64())])
    t["allocations"] = _table("allocations", [i64(o_alloc[c, :]) for c in range(4)] + [  # a ProfileProto has no
        pa.nulls(o_alloc.shape[1], pa.dictionary(pa.int32(), pa.string())), pa.nulls(o_alloc.shape[1], pa.int64()),
        pa.nulls(o_alloc.shape[1], pa.int64())])
    t["code_frames"] = _table("code_frames", [
        i64(o_frames[0, :]), i32(o_frames[1, :]), code_strings(0), i32(o_frames[2, :]), code_strings(1),
        code_strings(2), i32(o_frames[3, :])])
    return t


def _attr_values(o_attrs: np.ndarray, sbuf: np.ndarray, path: Path) -> pa.Array:
    data, offs = gather(sbuf, o_attrs[3, :], o_attrs[4, :])
    values = pa.BinaryArray.from_buffers(pa.binary(), len(offs) - 1, [None, pa.py_buffer(offs), pa.py_buffer(data)])
    odd = np.flatnonzero(o_attrs[5, :] == 0)
    if not len(odd):
        return values
    # Not in canonical encoding (or not checked): let protobuf re-serialize it, as the reference does.
    from google.protobuf.message import DecodeError

    from tfprof.schema.proto import attr_value_pb2

    py = values.to_pylist()
    for r in odd:
        try:
            msg = attr_value_pb2.AttrValue.FromString(py[r])
        except (DecodeError, ValueError, RuntimeError):
            raise damaged(path, "profile", "not protobuf wire format, or truncated: an attr value "
                          "is not a valid AttrValue") from None
        py[r] = msg.SerializeToString(deterministic=True)
    return pa.array(py, pa.binary())


def _code_strings(o_frames: np.ndarray, k: int, sbuf: np.ndarray, values: pa.StringArray,
                  path: Path) -> pa.DictionaryArray:
    """Column ``k`` (file, function, line) of code_frames: an id_to_string code, or -2 for text
    given inline (whose range is in columns ``7 + 2k``, ``8 + 2k``)."""
    codes = o_frames[4 + k, :]
    inline = np.flatnonzero(codes == -2)
    if len(inline):
        extra = checked_strings(*gather(sbuf, o_frames[7 + 2 * k, inline], o_frames[8 + 2 * k, inline]),
                         path, "a code trace string")
        both = pc.dictionary_encode(pa.concat_arrays([values, extra]))
        remap = both.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        codes = np.where(codes >= 0, remap[np.maximum(codes, 0)], 0)
        codes[inline] = remap[len(values) + np.arange(len(inline))]
        values = both.dictionary
    return _dict(codes, values)

"""The ProfileProto of a profile's tables built with protobuf's generated classes: the reference
that the columnar encoder (``tfprof.views.profile_proto``) is held equal to.

What goes where is the encoder's (its module docstring). Built as fast as protobuf allows from
Python: each column turned into a list once, each node's and node-step's message made once and
kept in a dict (no map look-up per row), repeated scalars extended from lists, leaf messages
made by their constructors. Still one Python step per row: on 70,000 nodes x 50 steps it takes
7 to 13 times the encoder's time and 3 times its memory (``benchmarks/bench_proto.py``,
docs/PERFORMANCE.md), which is why the encoder exists.

The bytes: with protobuf's pure-Python runtime, ``SerializeToString(deterministic=True)`` of this
message is the encoder's output byte for byte (fields by number, map entries by key). The
default upb runtime writes the same fields and entries but its map entries in another order
(the reverse of key order for small integer keys), so there only the parsed messages compare.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import groupby, pairwise

import pyarrow as pa

from tfprof.schema.proto import tfprof_log_pb2 as pb

# ExecMemory's scalar fields (tfprof_log.proto), as `memory` columns.
_EXEC_MEMORY = (
    "memory_micros", "host_temp_bytes", "host_persistent_bytes", "accelerator_temp_bytes",
    "accelerator_persistent_bytes", "requested_bytes", "peak_bytes", "residual_bytes", "output_bytes",
    "allocator_bytes_in_use",
)  # fmt: skip


def _pylist(col: pa.Array) -> list:
    """A column as a Python list, through numpy where Arrow's own ``to_pylist`` is slow."""
    if pa.types.is_dictionary(col.type):
        values = col.dictionary.to_pylist()
        return [values[i] if i is not None else None for i in _pylist(col.indices)]
    if pa.types.is_list(col.type) and not col.null_count:
        flat = _pylist(col.flatten())
        off = (col.offsets.to_numpy() - col.offsets[0].as_py()).tolist()
        return [flat[a:b] for a, b in pairwise(off)]
    if (pa.types.is_integer(col.type) or pa.types.is_boolean(col.type)) and not col.null_count:
        return col.to_numpy(zero_copy_only=False).tolist()
    return col.to_pylist()


def _cols(table: pa.Table, *names: str) -> list[list]:
    return [_pylist(table.column(c).combine_chunks()) for c in names]


def reference_message(tables: Mapping[str, pa.Table]) -> pb.ProfileProto:
    """The ProfileProto of ``tables`` (``profile_proto.TABLES_WRITTEN`` at least), built with protobuf."""
    p = pb.ProfileProto()
    node_of = _nodes(p.nodes, tables)
    _traces(p, tables, node_of)
    _steps(tables, node_of)
    p.steps.extend(tables["steps"].column("step").to_pylist())
    info = tables["info"]
    if info.num_rows:
        p.has_trace = bool(info.column("has_trace")[0].as_py())
        p.miss_accelerator_stream = bool(info.column("miss_accelerator_stream")[0].as_py())
    return p


def _nodes(nodes_map, tables: Mapping[str, pa.Table]) -> dict:
    """Each node's own fields, inputs, op types, output shapes and attrs; node id -> message."""
    node_of = {}
    ids, names, ops, fops, cdev, hdev, shapes = _cols(
        tables["nodes"], "node_id", "name", "op", "float_ops", "canonical_device", "host_device", "shape"
    )
    for nid, name, op, f, c, h, shape in zip(ids, names, ops, fops, cdev, hdev, shapes):
        n = nodes_map[nid]
        n.name, n.op, n.id, n.float_ops = name, op, nid, f
        if c:
            n.canonical_device = c
        if h:
            n.host_device = h
        if shape:
            n.shape.extend(shape)
        node_of[nid] = n

    # Inputs: a map per node (input_idx -> producer id), and the producer's last slot.
    nid_col, idx, producer, slot = _cols(tables["node_inputs"], "node_id", "input_idx", "input_id", "output_slot")
    for nid, run in groupby(range(len(nid_col)), nid_col.__getitem__):
        rows = [i for i in run if producer[i] is not None]
        if rows:
            n = node_of[nid]
            n.inputs.update({idx[i]: producer[i] for i in rows})
            n.src_output_index.update({producer[i]: slot[i] for i in rows})

    nid_col, op_type = _cols(tables["node_types"], "node_id", "op_type")
    for nid, run in groupby(range(len(nid_col)), nid_col.__getitem__):
        node_of[nid].op_types.extend([op_type[i] for i in run])

    nid_col, slots, dims = _cols(tables["output_shapes"], "node_id", "slot", "dims")
    for nid, s, d in zip(nid_col, slots, dims):
        node_of[nid].output_shapes[s].int64_values.extend(d)

    nid_col, attr, value = _cols(tables["node_attrs"], "node_id", "attr", "value")
    for nid, a, v in zip(nid_col, attr, value):
        node_of[nid].attrs[a].MergeFromString(v)
    return node_of


def _traces(p: pb.ProfileProto, tables: Mapping[str, pa.Table], node_of: dict) -> None:
    """Code traces, their strings numbered in one sorted ``id_to_string`` table."""
    frames = tables["code_frames"]
    nid_col, lineno, fstart, files, funcs, lines = _cols(
        frames, "node_id", "lineno", "func_start_line", "file", "function", "line"
    )
    strings = sorted(set(files) | set(funcs) | set(lines))
    sid = {s: i for i, s in enumerate(strings)}
    p.id_to_string.update(enumerate(strings))
    trace = pb.CodeDef.Trace
    for nid, run in groupby(range(len(nid_col)), nid_col.__getitem__):
        node_of[nid].trace.traces.extend(
            [
                trace(lineno=lineno[i], func_start_line=fstart[i], file_id=sid[files[i]],
                      function_id=sid[funcs[i]], line_id=sid[lines[i]])
                for i in run
            ]
        )


def _steps(tables: Mapping[str, pa.Table], node_of: dict) -> None:
    """Per (node, step): the ExecProfile, made once and kept, and what goes in it."""
    exec_of = {}
    nid_col, step, runs, first, last = _cols(
        tables["node_steps"], "node_id", "step", "run_count", "all_start_micros", "latest_end_micros"
    )
    for nid, s, r, a, z in zip(nid_col, step, runs, first, last):
        e = node_of[nid].execs[s]
        e.run_count, e.all_start_micros, e.latest_end_micros = r, a, z
        exec_of[nid, s] = e

    nid_col, step, device = _cols(tables["exec_devices"], "node_id", "step", "device")
    for key, run in groupby(range(len(nid_col)), lambda i: (nid_col[i], step[i])):
        exec_of[key].devices.extend([device[i] for i in run])

    nid_col, step, device, kind, start, dur = _cols(
        tables["execs"], "node_id", "step", "device", "kind", "start_micros", "duration_micros"
    )
    tup, exec_time = pb.Tuple, pb.ExecTime
    for (nid, s, k, d), run in groupby(range(len(nid_col)), lambda i: (nid_col[i], step[i], kind[i], device[i])):
        e = exec_of[nid, s]
        times = exec_time(times=[tup(int64_values=(start[i], dur[i])) for i in run])
        (e.accelerator_execs if k == "accelerator" else e.cpu_execs)[d].MergeFrom(times)

    mem = tables["memory"]
    nid_col, step, seq = _cols(mem, "node_id", "step", "seq")
    values = _cols(mem, *_EXEC_MEMORY)
    mem_of = {}
    exec_memory = pb.ExecMemory
    for (nid, s), run in groupby(range(len(nid_col)), lambda i: (nid_col[i], step[i])):
        run = list(run)
        msgs = exec_of[nid, s].memory_execs
        before = len(msgs)
        msgs.extend([exec_memory(**{c: v[i] for c, v in zip(_EXEC_MEMORY, values)}) for i in run])
        for i, m in zip(run, msgs[before:]):
            mem_of[nid, s, seq[i]] = m

    out_mem = tables["output_memory"]
    nid_col, step, seq, slot, nbytes, ptr = _cols(out_mem, "node_id", "step", "seq", "slot", "bytes", "ptr")
    for (nid, s, q), run in groupby(range(len(nid_col)), lambda i: (nid_col[i], step[i], seq[i])):
        out = mem_of[nid, s, q].output_memory
        for i in run:
            m = out[slot[i]]
            m.bytes, m.ptr = nbytes[i], ptr[i]

    nid_col, step, at, size = _cols(tables["allocations"], "node_id", "step", "alloc_micros", "alloc_bytes")
    for (nid, s), run in groupby(range(len(nid_col)), lambda i: (nid_col[i], step[i])):
        allocs = exec_of[nid, s].allocations
        for i in run:
            a = allocs.add()
            a.alloc_micros, a.alloc_bytes = at[i], size[i]


def reference_bytes(tables: Mapping[str, pa.Table]) -> bytes:
    """``reference_message(tables)`` serialized deterministically (the encoder's bytes under the
    pure-Python runtime; see the module docstring)."""
    return reference_message(tables).SerializeToString(deterministic=True)

"""Ingest of a ProfileProto (``profile_N`` dumps, ``Profiler.serialize_to_string()``).

Two decoders fill the same tables:

* ``tables_from_message`` walks a parsed ``ProfileProto`` message in Python. It is the
  reference: simple, obviously faithful to the proto, fine for small profiles.
* ``tfprof.ingest.wire`` walks the wire format itself with numba-compiled code, writing columns
  straight into arrays. It is what ``read_profile`` uses for large files; a test checks that both
  produce identical tables on every fixture.
"""

from __future__ import annotations

import os

import pyarrow as pa

from tfprof.ingest import derive
from tfprof.ingest.sources import binary_problem, damaged, one_line, parse_binary, read_bytes
from tfprof.schema import NODE_TABLES, TABLES
from tfprof.schema.conform import conform
from tfprof.schema.proto import tfprof_log_pb2


def parse_profile(path: str | os.PathLike, data: bytes | None = None) -> tfprof_log_pb2.ProfileProto:
    """Parse ``path`` as a binary ProfileProto, checking that it holds what a profile holds."""
    if data is None:
        data = read_bytes(path, "profile")
    prof = parse_binary(tfprof_log_pb2.ProfileProto, data)
    if prof is None:
        raise damaged(path, "profile", binary_problem(tfprof_log_pb2.ProfileProto, data))
    check_profile(path, prof)
    return prof


def check_profile(path: str | os.PathLike, prof: tfprof_log_pb2.ProfileProto) -> None:
    """Reject messages of another kind that happen to parse, and profiles cut short."""
    if not prof.nodes:
        raise damaged(path, "profile", "it has no nodes")
    steps = set(prof.steps)
    for key, node in prof.nodes.items():
        if not node.name or node.id != key:
            raise damaged(path, "profile", "a node has no name or a wrong id; is this another kind of file?")
        missing = set(node.execs) - steps
        if missing:
            raise damaged(path, "profile", f"node `{one_line(node.name)}` has stats for unlisted step {min(missing)}")
        for pid in node.inputs.values():
            if pid not in prof.nodes:
                raise damaged(path, "profile", f"node `{one_line(node.name)}` has an input with unknown id {pid}")


def tables_from_message(prof: tfprof_log_pb2.ProfileProto) -> dict[str, pa.Table]:
    """Flatten a parsed ProfileProto into the tables of ``tfprof.schema`` (reference decoder)."""
    cols = {name: {c: [] for c in TABLES[name].schema.names} for name in _FROM_PROTO}
    ids = prof.id_to_string
    names = {k: n.name for k, n in prof.nodes.items()}

    def add(table: str, *values) -> None:
        for lst, v in zip(cols[table].values(), values, strict=True):
            lst.append(v)

    for nid in sorted(prof.nodes):
        n = prof.nodes[nid]
        shape = list(n.shape)
        add("nodes", nid, n.name, n.op, shape, derive.params(shape), n.float_ops,
            n.canonical_device or None, n.host_device or None)
        for idx in sorted(n.inputs):
            pid = n.inputs[idx]
            add("node_inputs", nid, idx, names[pid], pid, n.src_output_index.get(pid, 0))
        for t in n.op_types:
            add("node_types", nid, t)
        for slot in sorted(n.output_shapes):
            add("output_shapes", nid, slot, list(n.output_shapes[slot].int64_values))
        for k in sorted(n.attrs):
            add("node_attrs", nid, k, n.attrs[k].SerializeToString(deterministic=True))
        for depth, t in enumerate(n.trace.traces):
            add("code_frames", nid, depth, t.file or ids.get(t.file_id, ""), t.lineno,
                t.function or ids.get(t.function_id, ""), t.line or ids.get(t.line_id, ""), t.func_start_line)
        for step in sorted(n.execs):
            e = n.execs[step]
            add("node_steps", nid, step, e.run_count, e.all_start_micros, e.latest_end_micros, None)
            for dev in e.devices:
                add("exec_devices", nid, step, dev)
            for kind, execs in (("accelerator", e.accelerator_execs), ("cpu", e.cpu_execs)):
                for dev in sorted(execs):
                    for t in execs[dev].times:
                        start, dur = (list(t.int64_values) + [0, 0])[:2]
                        add("execs", nid, step, dev, kind, start, dur, None)
            for seq, m in enumerate(e.memory_execs):
                add("memory", nid, step, seq, m.memory_micros, m.requested_bytes, m.peak_bytes,
                    m.residual_bytes, m.output_bytes, m.host_temp_bytes, m.host_persistent_bytes,
                    m.accelerator_temp_bytes, m.accelerator_persistent_bytes, m.allocator_bytes_in_use)
                for slot in sorted(m.output_memory):
                    mem = m.output_memory[slot]
                    add("output_memory", nid, step, seq, slot, mem.bytes, mem.ptr)
            for a in e.allocations:
                add("allocations", nid, step, a.alloc_micros, a.alloc_bytes, None, None, None)  # no allocator recorded
    cols["steps"]["step"] = sorted(prof.steps)
    return finish(
        {name: conform(name, c) for name, c in cols.items()},
        has_trace=prof.has_trace,
        miss_accelerator_stream=prof.miss_accelerator_stream,
    )


def finish(tables: dict[str, pa.Table], *, has_trace: bool, miss_accelerator_stream: bool) -> dict[str, pa.Table]:
    """Add the tables a ProfileProto does not carry, or that are derived from the others."""
    tables["allocator_memory"] = TABLES["allocator_memory"].schema.empty_table()
    tables["checkpoint_tensors"] = TABLES["checkpoint_tensors"].schema.empty_table()
    tables["devices"] = derive.devices_table(tables["exec_devices"], tables["nodes"])
    tables["info"] = conform(
        "info", {"has_trace": [has_trace], "miss_accelerator_stream": [miss_accelerator_stream]}
    )
    return tables


# What a ProfileProto carries: every per-node table but the raw allocator entries, and the steps.
_FROM_PROTO = (*(t for t in NODE_TABLES if t != "allocator_memory"), "steps")

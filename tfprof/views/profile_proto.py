"""The tables written back as a ProfileProto (what tfprof's ``Profiler.serialize_to_string()`` and
``profile_<step>`` dumps hold), readable by the real tool and by ``tfprof.ingest``.

Each message is encoded a column at a time (``tfprof.views.wire_encode``): the per-node tables
are sorted by ``node_id`` and the per-step ones by ``(node_id, step, ...)``, so every repeated or
map field of a node is a contiguous run of encoded rows. Fields come in field-number order and
map entries in key order (the tables' sort order), which is what protobuf's pure-Python runtime
writes with ``SerializeToString(deterministic=True)``. ``tfprof.views.profile_proto_ref`` builds
the same message with protobuf's generated classes; tests hold the two equal, message and bytes
(``tests/test_profile_proto_ref.py``). That reference takes 7 to 13 times as long and 3 times
the memory on 70,000 nodes x 50 steps (``benchmarks/bench_proto.py``; docs/PERFORMANCE.md), so
this encoder is the writer.

What is written, field by field, follows
tfprof's own writer (docs/TFPROF_BEHAVIOUR.md, 'ProfileProto'), with these choices:

* code traces name their strings by id (``file_id``, ``function_id``, ``line_id``) in one
  ``id_to_string`` table of the distinct strings, sorted; every id used is in the table (tfprof
  aborts on a missing id);
* ``src_output_index`` has an entry per producer (the real tool derives input shapes from it),
  and ``input_shapes``/``outputs`` are left empty as tfprof leaves them;
* an input that names no node (``node_inputs.input_id`` null) cannot be an id: it is left out
  (tfprof aborts there, docs/TFPROF_BEHAVIOUR.md, 'ProfileProto' [bug]; the edge carries no
  statistics, docs/COMPATIBILITY.md row 14).

Not carried by the format: ``allocator_memory`` (only the per-allocator sums in ``memory`` are)
and ``checkpoint_tensors`` (their ``_checkpoint_variables`` op types are).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from tfprof.errors import ProfileFormatError
from tfprof.views.wire_encode import (
    Enc,
    empty,
    encode,
    group,
    message,
    raw,
    scalars,
    starts_of,
    strings,
    take,
    varints,
)

# ExecMemory's scalar fields, in field-number order (tfprof_log.proto), as `memory` columns.
_EXEC_MEMORY = (
    "memory_micros",
    "host_temp_bytes",
    "host_persistent_bytes",
    "accelerator_temp_bytes",
    "accelerator_persistent_bytes",
    "requested_bytes",
    "peak_bytes",
    "residual_bytes",
    "output_bytes",
    "allocator_bytes_in_use",
)


def profile_proto_bytes(tables: Mapping[str, pa.Table]) -> bytes:
    """The profile's tables (``TABLES_WRITTEN`` at least) as a serialized ``ProfileProto``."""
    return encode_profile(tables).tobytes()


def encode_profile(tables: Mapping[str, pa.Table]) -> np.ndarray:
    """``profile_proto_bytes`` as a numpy byte array (written to a file without a copy)."""
    t = {name: tables[name] for name in TABLES_WRITTEN}
    nodes = t["nodes"]
    node_ids = _ints(nodes, "node_id")
    steps = _ints(t["steps"], "step")
    n = len(node_ids)

    # (node, step) pairs: the parents of the per-step tables.
    ns = t["node_steps"]
    ns_node = _parent(node_ids, _ints(ns, "node_id"), "node_steps")
    ns_key = _pair_key(ns_node, _ints(ns, "step"), steps)
    if len(ns_key) > 1 and np.any(np.diff(ns_key) <= 0):
        raise ProfileFormatError("table `node_steps` is not sorted by (node_id, step), or repeats a pair")

    def per_node(table: str, rows: Enc, keep: np.ndarray | None = None, ids: np.ndarray | None = None) -> Enc:
        if ids is None:
            ids = _ints(t[table], "node_id")
            ids = ids if keep is None else ids[keep]
        return group(rows, starts_of(_parent(node_ids, ids, table), n))

    def step_parent(table: str, keep: np.ndarray | None = None) -> np.ndarray:
        tb = t[table]
        node, step = _ints(tb, "node_id"), _ints(tb, "step")
        if keep is not None:
            node, step = node[keep], step[keep]
        key = _pair_key(_parent(node_ids, node, table), step, steps)
        return _parent(ns_key, key, table)

    def per_step(table: str, rows: Enc, keep: np.ndarray | None = None) -> Enc:
        return group(rows, starts_of(step_parent(table, keep), len(ns_key)))

    exec_profile = message(
        None,
        [
            scalars(1, _ints(ns, "run_count")),
            scalars(2, _ints(ns, "all_start_micros")),
            scalars(3, _ints(ns, "latest_end_micros")),
            _exec_times(t["execs"], "accelerator", 4, step_parent, len(ns_key)),
            _exec_times(t["execs"], "cpu", 5, step_parent, len(ns_key)),
            per_step("exec_devices", strings(6, t["exec_devices"].column("device"), keep_empty=True)),
            per_step("memory", _memory_execs(t["memory"], t["output_memory"], step_parent)),
            per_step("allocations", _allocations(t["allocations"])),
        ],
    )
    execs = message(12, [scalars(1, _ints(ns, "step"), keep_zero=True), message(2, [exec_profile], keep_empty=True)],
                    keep_empty=True)

    inputs = t["node_inputs"]
    linked = ~_null(inputs, "input_id")
    input_entries = message(
        2,
        [
            scalars(1, _ints(inputs, "input_idx")[linked], keep_zero=True),
            scalars(2, _ints(inputs, "input_id", fill=0)[linked], keep_zero=True),
        ],
        keep_empty=True,
    )
    src_entries, src_nodes = _src_output_index(inputs, linked)
    frames, id_strings = _code_frames(t["code_frames"])
    node = message(
        None,
        [
            strings(1, nodes.column("name")),
            per_node("node_inputs", input_entries, linked),
            message(4, [_packed_lists(nodes.column("shape"))]),
            per_node("node_types", strings(5, t["node_types"].column("op_type"), keep_empty=True)),
            strings(6, nodes.column("canonical_device")),
            strings(7, nodes.column("host_device")),
            scalars(8, _ints(nodes, "float_ops")),
            strings(9, nodes.column("op")),
            message(10, [per_node("code_frames", frames)]),
            per_node("node_attrs", _attrs(t["node_attrs"])),
            group(execs, starts_of(ns_node, n)),
            scalars(13, node_ids),
            per_node("node_inputs", src_entries, ids=src_nodes),
            per_node("output_shapes", _output_shapes(t["output_shapes"])),
        ],
    )
    entries = message(1, [scalars(1, node_ids, keep_zero=True), message(2, [node], keep_empty=True)], keep_empty=True)
    info = t["info"]
    flag = (lambda c: bool(info.column(c)[0].as_py())) if info.num_rows else (lambda c: False)
    whole = np.array([0, n], np.int64)
    top = message(
        None,
        [
            group(entries, whole),
            scalars(2, [flag("has_trace")]),
            message(3, [group(varints(steps), np.array([0, len(steps)], np.int64))]),
            group(id_strings, np.array([0, len(id_strings)], np.int64)),
            scalars(5, [flag("miss_accelerator_stream")]),
        ],
    )
    return encode(top)


# ----------------------------------------------------------------------------------- parts


def _exec_times(execs: pa.Table, kind: str, field: int, step_parent, n_steps: int) -> Enc:
    """``accelerator_execs`` (4) or ``cpu_execs`` (5): device -> ExecTime{times: [start, dur]}.
    execs is sorted by (node_id, step, kind, device), so one kind's rows stay grouped by
    (node, step, device) in time order."""
    keep = pc.equal(execs.column("kind").cast(pa.string()), kind).to_numpy(zero_copy_only=False)
    keep = np.asarray(keep, dtype=bool)
    rows = np.flatnonzero(keep)
    if len(rows) == 0:
        return empty(n_steps)
    start, dur = _ints(execs, "start_micros")[rows], _ints(execs, "duration_micros")[rows]
    tuples = message(1, [message(1, [varints(start), varints(dur)])], keep_empty=True)
    parent = step_parent("execs", keep)
    device = _codes_by_string(execs.column("device"))[rows]
    first = np.ones(len(rows), bool)
    first[1:] = (parent[1:] != parent[:-1]) | (device[1:] != device[:-1])
    heads = np.flatnonzero(first)
    times = group(tuples, np.append(heads, len(rows)))
    names = take(raw(execs.column("device")), rows[heads])
    entry = message(field, [message(1, [names], keep_empty=True), message(2, [times], keep_empty=True)],
                    keep_empty=True)
    return group(entry, starts_of(parent[heads], n_steps))


def _memory_execs(memory: pa.Table, output_memory: pa.Table, step_parent) -> Enc:
    """``memory_execs`` (7): one ExecMemory per memory row, with its output_memory map (11)."""
    mem_seq, out_seq = _ints(memory, "seq"), _ints(output_memory, "seq")
    span = int(max(mem_seq.max(initial=0), out_seq.max(initial=0))) + 1
    mem_key = step_parent("memory") * span + mem_seq
    out_parent = _parent(mem_key, step_parent("output_memory") * span + out_seq, "output_memory")
    outputs = message(
        11,
        [
            scalars(1, _ints(output_memory, "slot"), keep_zero=True),
            message(2, [scalars(1, _ints(output_memory, "bytes")), scalars(2, _ints(output_memory, "ptr"))],
                    keep_empty=True),
        ],
        keep_empty=True,
    )
    fields = [scalars(i + 1, _ints(memory, c)) for i, c in enumerate(_EXEC_MEMORY)]
    fields.append(group(outputs, starts_of(out_parent, len(mem_key))))
    return message(7, fields, keep_empty=True)


def _allocations(allocations: pa.Table) -> Enc:
    """``allocations`` (11): AllocationRecord{alloc_micros, alloc_bytes}."""
    return message(
        11,
        [scalars(1, _ints(allocations, "alloc_micros")), scalars(2, _ints(allocations, "alloc_bytes"))],
        keep_empty=True,
    )


def _attrs(attrs: pa.Table) -> Enc:
    """``attrs`` (11): name -> serialized AttrValue (written as stored)."""
    return message(
        11,
        [strings(1, attrs.column("attr"), keep_empty=True), strings(2, attrs.column("value"), keep_empty=True)],
        keep_empty=True,
    )


def _output_shapes(shapes: pa.Table) -> Enc:
    """``output_shapes`` (15): slot -> Tuple{int64_values}."""
    dims = message(1, [_packed_lists(shapes.column("dims"))])
    return message(
        15,
        [scalars(1, _ints(shapes, "slot"), keep_zero=True), message(2, [dims], keep_empty=True)],
        keep_empty=True,
    )


def _src_output_index(inputs: pa.Table, linked: np.ndarray) -> tuple[Enc, np.ndarray]:
    """``src_output_index`` (14): producer id -> output slot, and the node id of each entry. A
    producer named twice keeps its last slot (a map, as in tfprof); entries in (node, producer)
    order."""
    slot = _ints(inputs, "output_slot")
    rows = np.flatnonzero(linked)
    node, producer = _ints(inputs, "node_id")[rows], _ints(inputs, "input_id", fill=0)[rows]
    order = np.lexsort((np.arange(len(rows)), producer, node))
    node, producer, slot = node[order], producer[order], slot[rows][order]
    last = np.ones(len(rows), bool)
    last[:-1] = (node[1:] != node[:-1]) | (producer[1:] != producer[:-1])
    entries = message(
        14, [scalars(1, producer[last], keep_zero=True), scalars(2, slot[last], keep_zero=True)], keep_empty=True
    )
    return entries, node[last]


def _code_frames(frames: pa.Table) -> tuple[Enc, Enc]:
    """``trace`` traces (one CodeDef.Trace per frame) and the ``id_to_string`` entries (4) they
    refer to: every distinct file, function and line string, sorted, numbered from 0."""
    cols = [frames.column(c).combine_chunks() for c in ("file", "function", "line")]
    dicts = [c.dictionary.to_pylist() if pa.types.is_dictionary(c.type) else pc.unique(c).to_pylist() for c in cols]
    table = sorted(set().union(*dicts))
    lookup = {s: i for i, s in enumerate(table)}
    ids = []
    for col, values in zip(cols, dicts):
        if pa.types.is_dictionary(col.type):
            code_to_id = np.array([lookup[s] for s in values], np.int64)
            idx = col.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            ids.append(code_to_id[idx] if len(idx) else np.zeros(0, np.int64))
        else:
            ids.append(np.array([lookup[s] for s in col.to_pylist()], np.int64))
    trace = message(
        1,
        [
            scalars(2, _ints(frames, "lineno")),
            scalars(5, _ints(frames, "func_start_line")),
            scalars(6, ids[0]),
            scalars(7, ids[1]),
            scalars(8, ids[2]),
        ],
        keep_empty=True,
    )
    entries = message(
        4,
        [scalars(1, np.arange(len(table)), keep_zero=True), strings(2, pa.array(table, pa.string()), keep_empty=True)],
        keep_empty=True,
    )
    return trace, entries


# ----------------------------------------------------------------------------------- helpers

TABLES_WRITTEN = (
    "nodes", "node_inputs", "node_types", "output_shapes", "node_attrs", "steps", "node_steps",
    "exec_devices", "execs", "memory", "output_memory", "allocations", "code_frames", "info",
)  # fmt: skip
"""The tables a ProfileProto is written from."""


def _ints(table: pa.Table, column: str, *, fill: int | None = None) -> np.ndarray:
    col = table.column(column)
    if fill is not None:
        col = col.fill_null(fill)
    return np.asarray(col.to_numpy(), dtype=np.uint64 if pa.types.is_uint64(col.type) else np.int64)


def _null(table: pa.Table, column: str) -> np.ndarray:
    return np.asarray(table.column(column).is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _parent(parent_keys: np.ndarray, keys: np.ndarray, table: str) -> np.ndarray:
    """Index of each key in the sorted, distinct ``parent_keys``; ``keys`` must be sorted and
    every key must be there."""
    idx = _merge_index(parent_keys, keys)
    if len(idx) and idx.min() < 0:
        raise ProfileFormatError(
            f"table `{table}` has rows for a node or step its parent table lacks, or is not in sort-key order"
        )
    return idx


@njit(cache=True, nogil=True)
def _merge_index(parents, keys):
    """One merge pass of two sorted arrays; -1 where a key has no parent or is out of order."""
    out = np.empty(len(keys), np.int64)
    j = 0
    for i in range(len(keys)):
        k = keys[i]
        while j < len(parents) and parents[j] < k:
            j += 1
        out[i] = j if j < len(parents) and parents[j] == k else -1
    return out


def _pair_key(node_idx: np.ndarray, step: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """One sortable int64 per (node index, step)."""
    pos = np.searchsorted(steps, step)
    if len(step) and (pos.max() >= len(steps) or np.any(steps[pos] != step)):
        raise ProfileFormatError("a per-step table names a step missing from `steps`")
    return node_idx.astype(np.int64) * (len(steps) + 1) + pos


def _codes_by_string(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Integer codes of a dictionary (or string) column, equal for equal strings."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    values = col.dictionary.to_pylist()
    first = {}
    canon = np.array([first.setdefault(v, i) for i, v in enumerate(values)], np.int64)
    idx = col.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return canon[idx] if len(idx) else idx


def _packed_lists(lists: pa.ChunkedArray | pa.Array) -> Enc:
    """Per row of a list<int64> column, its values as packed varints (empty for an empty list)."""
    lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    offsets = np.asarray(lists.offsets.to_numpy(), np.int64)
    values = np.asarray(lists.flatten().to_numpy(), np.int64)
    return group(varints(values), offsets - offsets[0])

"""Ingest of the raw inputs: GraphDef, RunMetadata steps, OpLogProto and checkpoint names.

``RawProfile`` replays tfprof's ingestion (docs/TFPROF_BEHAVIOUR.md, 'Ingesting a GraphDef' to 'Ingesting a checkpoint') record by record — which node gets
which id, which device is canonical, which stats are ignored — and then flattens its state into
the tables of ``tfprof.schema``. The quirks it reproduces are marked where they happen.

Reading and parsing files lives in ``read_graph``/``read_run_meta``/``read_op_log``; every
failure there is a one-line ``InputError``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import pyarrow as pa

from tfprof.ingest import derive
from tfprof.ingest.sources import damaged, parse, read_bytes
from tfprof.ingest.validate import Findings, stream_overlaps
from tfprof.schema import NODE_TABLES, TABLES
from tfprof.schema.conform import conform
from tfprof.schema.proto import graph_pb2, run_metadata_pb2, tfprof_log_pb2

# docs/TFPROF_BEHAVIOUR.md, 'Device classification': devices whose stats count as cpu time (and carry memory).
_CANONICAL = re.compile(r".*/(device:gpu|gpu|device:cpu|cpu):\d+")
_GPU_N = re.compile(r"gpu:\d+")


def is_canonical(dev: str) -> bool:
    """True for a canonical device (IsCanonicalDevice; docs/TFPROF_BEHAVIOUR.md, 'Device classification'), on a
    lower-cased string."""
    return _CANONICAL.fullmatch(dev) is not None


# --------------------------------------------------------------------------- file readers


def read_graph(path: str | os.PathLike) -> graph_pb2.GraphDef:
    """A GraphDef from a text (.pbtxt) or binary file; text is tried first, as tfprof does."""
    graph = parse(graph_pb2.GraphDef, read_bytes(path, "graph"), path, "graph", text_first=True)
    _check_graph(path, graph)
    return graph


def _check_graph(path: str | os.PathLike, graph: graph_pb2.GraphDef) -> None:
    # Another message read as a GraphDef parses "successfully" into nameless nodes.
    if not graph.node:
        raise damaged(path, "graph", "it has no nodes")
    if any(not n.name or not n.op for n in graph.node):
        raise damaged(path, "graph", "a node has no name or op; is this another kind of file?")


def read_run_meta(path: str | os.PathLike) -> run_metadata_pb2.RunMetadata:
    """A RunMetadata from a binary or text file; binary is tried first, as tfprof does."""
    if isinstance(path, run_metadata_pb2.RunMetadata):
        rm = path  # ours, already parsed: checked, not copied
    else:
        data = read_bytes(path, "run_meta")
        rm = parse(run_metadata_pb2.RunMetadata, data, path, "run_meta", plausible=_run_meta_ok)
    if not rm.HasField("step_stats"):
        raise damaged(path, "run_meta", "it has no step_stats; was the step run with FULL_TRACE?")
    if not _run_meta_ok(rm):
        raise damaged(path, "run_meta", "its step stats do not name devices; is this another kind of file?")
    return rm


def _run_meta_ok(rm: run_metadata_pb2.RunMetadata) -> bool:
    # A GraphDef read as RunMetadata puts node names where device names belong.
    return all(d.device.startswith("/") for d in rm.step_stats.dev_stats) and all(
        ns.node_name for d in rm.step_stats.dev_stats for ns in d.node_stats
    )


def read_op_log(path: str | os.PathLike) -> tfprof_log_pb2.OpLogProto:
    """An OpLogProto from a binary file (as tfprof reads it) or a text file."""
    data = read_bytes(path, "op_log")
    log = parse(tfprof_log_pb2.OpLogProto, data, path, "op_log", plausible=_op_log_ok)
    if data and not log.log_entries and not log.id_to_string:
        raise damaged(path, "op_log", "it holds no op log entries; is this another kind of file?")
    if not _op_log_ok(log):
        raise damaged(path, "op_log", "an entry has no op name; is this another kind of file?")
    return log


def _op_log_ok(log: tfprof_log_pb2.OpLogProto) -> bool:
    return all(e.name for e in log.log_entries)


# --------------------------------------------------------------------------- tfprof's model

def shape_vec(shape) -> list[int]:
    """ShapeProtoToVec (docs/TFPROF_BEHAVIOUR.md, 'Shapes and parameters'): a scalar becomes [1] (quirk); unknown rank
    becomes []."""
    if not shape.dim and not shape.unknown_rank:
        return [1]
    return [d.size for d in shape.dim]


@dataclass
class _Step:
    """tfprof's ExecStep for one node in one step."""

    run_count: int = 0
    all_start: int = 0
    latest_end: int = 0
    devices: set[str] = field(default_factory=set)
    # (kind, device, start, duration) in arrival order
    times: list[tuple[str, str, int, int]] = field(default_factory=list)
    memory: list[dict] = field(default_factory=list)
    outputs: list[tuple[int, int, int, int]] = field(default_factory=list)  # seq, slot, bytes, ptr
    allocators: list[tuple] = field(default_factory=list)
    allocations: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class _Node:
    id: int
    name: str
    op: str
    attrs: dict[str, bytes] = field(default_factory=dict)
    shape: list[int] = field(default_factory=list)
    output_shapes: dict[int, list[int]] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    op_types: set[str] = field(default_factory=set)
    float_ops: int = 0
    frames: list[tuple] | None = None
    canonical_device: str = ""
    host_device: str = ""
    steps: dict[int, _Step] = field(default_factory=dict)


class RawProfile:
    """tfprof's node table built from raw inputs, in the order tfprof applies them."""

    def __init__(self) -> None:
        self.nodes: dict[str, _Node] = {}
        self.steps: set[int] = set()
        self.id_to_string: dict[int, str] = {}
        self.has_trace = False
        self.miss_accelerator_stream = False
        self.warnings: list[str] = []
        # what the validation table reports that the tables do not keep (tfprof.ingest.validate)
        self.findings = Findings()

    def _new_node(self, name: str, op: str) -> _Node:
        node = _Node(id=len(self.nodes), name=name, op=op, op_types={op})
        self.nodes[name] = node
        return node

    # docs/TFPROF_BEHAVIOUR.md, 'Ingesting a GraphDef'
    def add_graph(self, graph: graph_pb2.GraphDef) -> None:
        added = []
        first_id = len(self.nodes)  # nodes of this GraphDef get ids from here on
        for nd in graph.node:
            if nd.name in self.nodes:
                if self.nodes[nd.name].id >= first_id:  # twice in this GraphDef, not known before
                    self.findings.add("duplicate_name", 1, [(nd.name, None, (
                        f"the GraphDef has two nodes of this name (op {self.nodes[nd.name].op}, then op {nd.op}): "
                        "the first is kept, as tfprof does"))])
                continue
            node = self._new_node(nd.name, nd.op)
            for key in sorted(nd.attr):
                value = nd.attr[key]
                node.attrs[key] = value.SerializeToString(deterministic=True)
            if "shape" in nd.attr and nd.attr["shape"].HasField("shape"):
                node.shape = shape_vec(nd.attr["shape"].shape)
            if "_output_shapes" in nd.attr:
                for i, s in enumerate(nd.attr["_output_shapes"].list.shape):
                    node.output_shapes[i] = shape_vec(s)
            added.append((node, list(nd.input)))
        for node, inputs in added:
            for s in inputs:
                # tfprof parses `name:slot` inside a DCHECK, which release builds compile out:
                # the real tool (TF 2.21) records slot 0 for every input, so do we.
                s = s.split(":", 1)[0]
                if s.startswith("^"):
                    s = s[1:]  # control inputs count as data inputs (docs/TFPROF_BEHAVIOUR.md, 'Ingesting a GraphDef')
                node.inputs.append(s)

    # docs/TFPROF_BEHAVIOUR.md, 'Ingesting an op log'
    def add_op_log(self, log: tfprof_log_pb2.OpLogProto) -> None:
        for k, v in log.id_to_string.items():
            self.id_to_string.setdefault(k, v)
        for entry in log.log_entries:
            node = self.nodes.get(entry.name)
            if node is None:
                continue
            node.op_types.update(entry.types)
            if entry.float_ops:
                node.float_ops = entry.float_ops
            if entry.HasField("code_def"):
                self.has_trace = True
                if node.frames is None:
                    node.frames = [self._frame(t) for t in entry.code_def.traces]

    def _frame(self, t) -> tuple:
        ids = self.id_to_string
        return (
            t.file or ids.get(t.file_id, ""),
            t.lineno,
            t.function or ids.get(t.function_id, ""),
            t.line or ids.get(t.line_id, ""),
            t.func_start_line,
        )

    # docs/TFPROF_BEHAVIOUR.md, 'Ingesting a checkpoint'
    def add_checkpoint_names(self, names) -> None:
        for name in names:
            node = self.nodes.get(name)
            if node is not None:
                node.op_types.add("_checkpoint_variables")

    # docs/TFPROF_BEHAVIOUR.md, 'Ingesting RunMetadata'
    def add_run_meta(self, step: int, rm: run_metadata_pb2.RunMetadata) -> None:
        if not rm.HasField("step_stats"):
            self.warnings.append(f"Invalid RunMetadata for step {step}")
            return
        self.steps.add(step)
        has_gpu = has_stream = False
        for d in rm.step_stats.dev_stats:
            dev = d.device.lower()
            has_gpu = has_gpu or "gpu" in dev
            has_stream = has_stream or "stream:all" in dev
            canonical = is_canonical(dev)
            # one GPU stream's records, for the overlap check (tfprof keeps no times of them)
            stream = [] if "/stream:" in dev and "stream:all" not in dev else None
            for ns in d.node_stats:
                name = ns.node_name.split(":", 1)[0]
                if stream is not None and ns.all_start_micros > 0:
                    stream.append((ns.all_start_micros, ns.all_start_micros + ns.op_end_rel_micros, name))
                node = self.nodes.get(name)
                if node is None:
                    if name in ("RecvTensor", "_SOURCE") or "MEMCPY" in name:
                        continue
                    # op = name (docs/TFPROF_BEHAVIOUR.md, 'Nodes made from RunMetadata')
                    node = self._new_node(name, name)
                self._add_step_stat(node, step, dev, canonical, ns)
            if stream:
                starts, ends, names = zip(*stream)
                stream_overlaps(self.findings, step, dev, starts, [_fit(e) for e in ends], list(names))
        if has_gpu and not has_stream:
            self.miss_accelerator_stream = True

    def _add_step_stat(self, node: _Node, step: int, dev: str, canonical: bool, ns) -> None:
        # docs/TFPROF_BEHAVIOUR.md, 'Device classification'
        if canonical:
            if node.canonical_device and node.canonical_device != dev:
                return  # tfprof ignores stats from a second canonical device
            if not node.canonical_device:
                node.canonical_device = dev
                node.host_device = _GPU_N.sub("cpu:0", dev)
                node.op_types.add(dev)
        st = node.steps.get(step)
        if st is None:
            st = node.steps[step] = _Step()
        # AddTimeStats (docs/TFPROF_BEHAVIOUR.md, 'Time statistics')
        st.devices.add(dev)
        start = ns.all_start_micros
        if start > 0:
            st.all_start = start if not st.all_start else min(st.all_start, start)
            dur = ns.op_end_rel_micros or 1
            st.latest_end = max(st.latest_end, _fit(start + dur))
            if "stream:all" in dev:
                st.times.append(("accelerator", dev, start, dur))
            elif canonical:
                st.times.append(("cpu", dev, start, dur))
                st.run_count += 1
        elif start < 0 and self.findings.room("negative_timestamp"):
            self.findings.add("negative_timestamp", 1, [(node.name, step, (
                f"all_start_micros {start:,} on {dev} is before 1970: the record's times and memory are "
                "ignored, as tfprof ignores a record without a start"))])
        elif start < 0:
            self.findings.add("negative_timestamp", 1)
        if dev == node.canonical_device:
            self._add_memory(node, st, step, dev, ns)

    def _add_memory(self, node: _Node, st: _Step, step: int, dev: str, ns) -> None:
        # AddMemoryStats (docs/TFPROF_BEHAVIOUR.md, 'Memory statistics')
        if ns.all_start_micros <= 0:
            self.warnings.append(f"{ns.node_name} has no start time, skipping")
            return
        seq = len(st.memory)
        rec = dict.fromkeys(
            (
                "host_temp_bytes",
                "host_persistent_bytes",
                "accelerator_temp_bytes",
                "accelerator_persistent_bytes",
                "output_bytes",
                "allocator_bytes_in_use",
            ),
            0,
        )
        rec["memory_micros"] = _fit(ns.all_start_micros + ns.op_end_rel_micros)
        gpu_allocators = 0
        for m in ns.memory:
            st.allocators.append(
                (seq, m.allocator_name, m.total_bytes, m.peak_bytes, m.live_bytes, m.allocator_bytes_in_use)
            )
            if "GPU" in m.allocator_name:
                gpu_allocators += 1
                rec["allocator_bytes_in_use"] = max(rec["allocator_bytes_in_use"], m.allocator_bytes_in_use)
                st.allocations.extend((r.alloc_micros, r.alloc_bytes, m.allocator_name, None, None) for r in m.allocation_records)
        if gpu_allocators > 1:
            self.warnings.append(f"found {gpu_allocators} gpu allocator for 1 node")
        outputs: dict[int, tuple[int, int]] = {}
        for o in ns.output:
            if o.tensor_description.HasField("allocation_description"):
                a = o.tensor_description.allocation_description
                nbytes = max(a.allocated_bytes, a.requested_bytes)
                outputs[o.slot] = (nbytes, a.ptr)
                rec["output_bytes"] += nbytes
        for slot in sorted(outputs):
            st.outputs.append((seq, slot, *outputs[slot]))
        if ns.HasField("memory_stats"):
            where = "host" if "cpu" in dev else "accelerator"
            rec[f"{where}_temp_bytes"] += ns.memory_stats.temp_memory_size
            rec[f"{where}_persistent_bytes"] += ns.memory_stats.persistent_memory_size
        persistent = rec["host_persistent_bytes"] + rec["accelerator_persistent_bytes"]
        temp = rec["host_temp_bytes"] + rec["accelerator_temp_bytes"]
        rec["residual_bytes"] = sum(m.live_bytes for m in ns.memory) + persistent
        rec["requested_bytes"] = sum(m.total_bytes for m in ns.memory) + persistent + temp
        rec["peak_bytes"] = sum(m.peak_bytes for m in ns.memory) + persistent + temp
        if max(rec.values()) > _INT64_MAX or min(rec.values()) < _INT64_MIN:  # sums of int64s may not fit one
            rec = {k: _fit(v) for k, v in rec.items()}
        st.memory.append(rec)

    # ----------------------------------------------------------------------- flatten

    def tables(self) -> dict[str, pa.Table]:
        """The profile as the tables of ``tfprof.schema`` (checkpoint_tensors left empty)."""
        nodes = sorted(self.nodes.values(), key=lambda n: n.id)
        ids = {n.name: n.id for n in nodes}
        cols: dict[str, dict[str, list]] = {name: {} for name in _COLUMNS}
        for name, columns in _COLUMNS.items():
            cols[name] = {c: [] for c in columns}
        nc, ic, tc, sc, ac = (cols[t] for t in ("nodes", "node_inputs", "node_types", "output_shapes", "node_attrs"))
        stc, dc, ec, mc, oc, alc, al = (
            cols[t] for t in ("node_steps", "exec_devices", "execs", "memory", "output_memory", "allocator_memory", "allocations")
        )
        fc = cols["code_frames"]
        for n in nodes:
            _append(nc, n.id, n.name, n.op, n.shape, derive.params(n.shape), n.float_ops,
                    n.canonical_device or None, n.host_device or None)
            for i, producer in enumerate(n.inputs):
                _append(ic, n.id, i, producer, ids.get(producer), 0)
            for t in n.op_types:
                _append(tc, n.id, t)
            for slot, dims in n.output_shapes.items():
                _append(sc, n.id, slot, dims)
            for k, v in n.attrs.items():
                _append(ac, n.id, k, v)
            for depth, f in enumerate(n.frames or ()):
                _append(fc, n.id, depth, *f)
            for step, st in n.steps.items():
                _append(stc, n.id, step, st.run_count, st.all_start, st.latest_end, None)
                for dev in st.devices:
                    _append(dc, n.id, step, dev)
                for kind, dev, start, dur in st.times:
                    _append(ec, n.id, step, dev, kind, start, dur, None)
                for seq, rec in enumerate(st.memory):
                    _append(mc, n.id, step, seq, *(rec[c] for c in _COLUMNS["memory"][3:]))
                for row in st.outputs:
                    _append(oc, n.id, step, *row)
                for row in st.allocators:
                    _append(alc, n.id, step, *row)
                for row in st.allocations:
                    _append(al, n.id, step, *row)
        cols["steps"]["step"] = sorted(self.steps)
        out = {name: conform(name, c) for name, c in cols.items()}
        out["devices"] = derive.devices_table(out["exec_devices"], out["nodes"])
        out["info"] = conform(
            "info", {"has_trace": [self.has_trace], "miss_accelerator_stream": [self.miss_accelerator_stream]}
        )
        out["checkpoint_tensors"] = conform("checkpoint_tensors", {c: [] for c in _CKPT_COLS})
        return out


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _fit(value: int) -> int:
    """``value`` saturated to int64: a sum of a record's int64 fields may not fit one (the
    validation then reports and clamps the saturated value instead of the ingest failing)."""
    return min(max(value, _INT64_MIN), _INT64_MAX)


def _append(cols: dict[str, list], *values) -> None:
    for lst, v in zip(cols.values(), values, strict=True):
        lst.append(v)


def _names(table: str) -> list[str]:
    return TABLES[table].schema.names


_COLUMNS = {t: _names(t) for t in (*NODE_TABLES, "steps")}
_CKPT_COLS = _names("checkpoint_tensors")

"""The column contract: one Arrow schema per table, each column documented with its unit.

Every reader in ``tfprof.ingest`` produces exactly these tables; every query reads them. The
documentation in ``docs/SCHEMA.md`` is generated from this module (``tools/gen_schema_doc.py``)
and a test checks that it is up to date.

Conventions
-----------
* Join keys carry the same name everywhere: ``node_id``, ``step``, ``device``.
* ``node_id`` is tfprof's own node id: the insertion order of the node (GraphDef order, then
  nodes first seen in RunMetadata), the key of ``ProfileProto.nodes``.
* Device strings are lower-cased, as tfprof stores them.
* Repeated strings are Arrow dictionaries (``pl.Categorical`` in polars).
* Rows are in the table's ``sort_key`` order (``TABLES[name].sort_key``); the order of rows that
  tie on the key is the order of the source records and is meaningful (e.g. the order of
  exec intervals within one device).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

DICT = pa.dictionary(pa.int32(), pa.string())


def _f(name: str, type_: pa.DataType, doc: str, *, nullable: bool = False, unit: str = "") -> pa.Field:
    meta = {"doc": doc}
    if unit:
        meta["unit"] = unit
    return pa.field(name, type_, nullable=nullable, metadata=meta)


@dataclass(frozen=True)
class Table:
    """A table of the profile: its schema, its grain (what one row is) and its sort key."""

    name: str
    grain: str
    doc: str
    schema: pa.Schema
    sort_key: tuple[str, ...]


TABLES: dict[str, Table] = {}
"""Every table by name, in the order they are defined below (the order of docs/SCHEMA.md)."""


def _table(name: str, grain: str, sort_key: tuple[str, ...], doc: str, *columns: pa.Field) -> Table:
    """Define table ``name`` from its columns and list it in ``TABLES``."""
    table = Table(name, grain, doc, pa.schema(list(columns)), sort_key)
    TABLES[name] = table
    return table


NODE_ID = _f("node_id", pa.int64(), "tfprof node id (insertion order; key of ProfileProto.nodes)")
STEP = _f("step", pa.int64(), "step id (the i-th --run_meta_path file is step i)")

NODES = _table(
    "nodes", "one graph node", ("node_id",),
    "Every node tfprof knows: GraphDef nodes in file order, then nodes first seen in RunMetadata (for those, `op` "
    "equals the name, as in tfprof).",
    NODE_ID,
    _f("name", pa.string(), "node name, unique"),
    _f("op", DICT, "NodeDef op type (e.g. MatMul); for RunMetadata-only nodes the node name"),
    _f("shape", pa.list_(pa.int64()),
        "the `shape` attr as tfprof stores it: scalar -> [1], unknown dims -1, no attr or unknown rank -> []"),
    _f("params", pa.int64(), "parameters: product of `shape` when every dim >= 0, else 0", unit="count"),
    _f("float_ops", pa.int64(), "static float operations from the op log (0 if none)", unit="flops"),
    _f("canonical_device", DICT,
        "first canonical device (…/device:cpu:0, …/gpu:0) seen in RunMetadata; null if never run", nullable=True),
    _f("host_device", DICT, "canonical_device with gpu:N replaced by cpu:0", nullable=True),
)

NODE_INPUTS = _table(
    "node_inputs", "one input edge of a node", ("node_id", "input_idx"),
    "Inputs in NodeDef order. Control inputs (`^x`) are inputs like any other, as in tfprof.",
    NODE_ID,
    _f("input_idx", pa.int32(), "position of the input in NodeDef.input"),
    _f("input_name", pa.string(), "producer node name (`^` and `:slot` removed)"),
    _f("input_id", pa.int64(), "producer node_id; null when no such node exists", nullable=True),
    _f("output_slot", pa.int32(),
        "producer output slot as tfprof records it. The real tool (TF 2.21) parses the `:slot` of an input only in "
        "debug builds, so from a GraphDef this is always 0"),
)

NODE_TYPES = _table(
    "node_types", "one (node, op type) pair", ("node_id", "op_type"),
    "The op types used by account_type_regexes: the op, the canonical device, op-log types such as "
    "_trainable_variables, and _checkpoint_variables. Sorted byte-wise per node.",
    NODE_ID,
    _f("op_type", DICT, "an op type of the node"),
)

OUTPUT_SHAPES = _table(
    "output_shapes", "one output slot of a node", ("node_id", "slot"),
    "Static output shapes from the `_output_shapes` attr.",
    NODE_ID,
    _f("slot", pa.int32(), "output slot"),
    _f("dims", pa.list_(pa.int64()), "dims (scalar -> [1], unknown dim -1, unknown rank [])"),
)

NODE_ATTRS = _table(
    "node_attrs", "one attr of a node", ("node_id", "attr"),
    "NodeDef attrs, each value a serialized AttrValue (decode with tfprof.schema.proto.attr_value_pb2).",
    NODE_ID,
    _f("attr", DICT, "attr name"),
    _f("value", pa.binary(), "serialized AttrValue"),
)

NODE_FLOPS = _table(
    "node_flops", "one node whose op type has a FLOPs shape rule", ("node_id",),
    "What the FLOPs rules say about a node's `nodes.float_ops` (tfprof.schema.flops_rules): the rule, and for the "
    "rules that count multiply-accumulates (matrix products, convolutions) the MACs, one multiply-add each, so "
    "float_ops = 2 * macs. Derived at ingest from `op` and `float_ops`; nodes of other op types have no row (no "
    "rule: 0 MACs). Ours, not tfprof's: stores written before it existed read it as empty.",
    NODE_ID,
    _f("macs", pa.int64(), "multiply-accumulates: float_ops // 2 for a MAC-counting rule, else 0", unit="count"),
    _f("flops_formula", DICT, "the rule's name, e.g. `matmul`, `conv2d`, `binary` (tfprof.queries.flops.FORMULAS)"),
    _f("estimated", pa.bool_(),
        "float_ops (and macs) are our estimate (a foreign trace's recorded input shapes), not TensorFlow's op log"),
)

STEPS = _table(
    "steps", "one step", ("step",),
    "Steps that have RunMetadata, ascending.",
    STEP,
)

NODE_STEPS = _table(
    "node_steps", "one node in one step", ("node_id", "step"),
    "The per-step execution summary of a node (tfprof's ExecStep / ExecProfile).",
    NODE_ID,
    STEP,
    _f("run_count", pa.int64(), "executions on the canonical device in this step", unit="count"),
    _f("all_start_micros", pa.int64(),
        "earliest start of any record of this node in the step (0 if none)", unit="us since epoch"),
    _f("latest_end_micros", pa.int64(), "latest start+duration in the step", unit="us since epoch"),
    _f("float_ops", pa.int64(),
        "the float operations of the node's executions in this step, summed, each from its own recorded input shapes "
        "(Kineto traces with `record_shapes`; 0 where no rule applies); null where the input has no per-execution "
        "count (tfprof's own profiles, XSpace), whose views use `nodes.float_ops` times `run_count`",
        unit="flops", nullable=True),
)

EXEC_DEVICES = _table(
    "exec_devices", "one device a node ran on in one step", ("node_id", "step", "device"),
    "Every device of the step's records, including /stream:N and /memcpy ones that count for nothing.",
    NODE_ID,
    STEP,
    _f("device", DICT, "device (lower-cased)"),
)

EXECS = _table(
    "execs", "one execution interval of a node on one device in one step", ("node_id", "step", "kind", "device"),
    "Time records: accelerator intervals (…/stream:all devices) and cpu intervals (canonical devices).",
    NODE_ID,
    STEP,
    _f("device", DICT, "device (lower-cased)"),
    _f("kind", DICT, "`accelerator` or `cpu`"),
    _f("start_micros", pa.int64(), "start", unit="us since epoch"),
    _f("duration_micros", pa.int64(), "op_end_rel_micros, 0 rounded up to 1", unit="us"),
    _f("duration_ns", pa.int64(), "the exact duration of a foreign profile's execution (Kineto, XSpace), which "
       "`duration_micros` rounds to whole us; null for tfprof's own profiles, whose records are whole us",
       unit="ns", nullable=True),
)

MEMORY = _table(
    "memory", "one memory record of a node in one step (one per canonical-device execution)",
    ("node_id", "step", "seq"),
    "tfprof's ExecMemory: bytes summed over the allocators of one execution.",
    NODE_ID,
    STEP,
    _f("seq", pa.int32(), "index of the record within the node's step"),
    _f("memory_micros", pa.int64(), "start + op_end_rel_micros", unit="us since epoch"),
    _f("requested_bytes", pa.int64(), "sum of total_bytes + temp + persistent", unit="bytes"),
    _f("peak_bytes", pa.int64(), "sum of peak_bytes + temp + persistent", unit="bytes"),
    _f("residual_bytes", pa.int64(), "sum of live_bytes + persistent", unit="bytes"),
    _f("output_bytes", pa.int64(), "sum over outputs of max(allocated, requested)", unit="bytes"),
    _f("host_temp_bytes", pa.int64(), "memory_stats temp size on cpu devices", unit="bytes"),
    _f("host_persistent_bytes", pa.int64(), "memory_stats persistent size on cpu devices", unit="bytes"),
    _f("accelerator_temp_bytes", pa.int64(), "memory_stats temp size elsewhere", unit="bytes"),
    _f("accelerator_persistent_bytes", pa.int64(), "memory_stats persistent size elsewhere", unit="bytes"),
    _f("allocator_bytes_in_use", pa.int64(), "max bytes in use of the GPU allocators", unit="bytes"),
)

OUTPUT_MEMORY = _table(
    "output_memory", "one output tensor of one memory record", ("node_id", "step", "seq", "slot"),
    "Output allocations of a node's execution.",
    NODE_ID,
    STEP,
    _f("seq", pa.int32(), "memory record index (memory.seq)"),
    _f("slot", pa.int32(), "output slot"),
    _f("bytes", pa.int64(), "max(allocated_bytes, requested_bytes)", unit="bytes"),
    _f("ptr", pa.uint64(), "allocation address"),
)

ALLOCATOR_MEMORY = _table(
    "allocator_memory", "one allocator of one memory record", ("node_id", "step", "seq", "allocator"),
    "The raw AllocatorMemoryUsed entries behind a memory record: a RunMetadata's, and a foreign trace's per "
    "allocator (Kineto: the device of its `[memory]` instants, `cpu` or `cuda:0`; XSpace: the `allocator_name` of "
    "its allocator events; docs/FOREIGN.md). A ProfileProto keeps only the sums in `memory`.",
    NODE_ID,
    STEP,
    _f("seq", pa.int32(), "memory record index (memory.seq)"),
    _f("allocator", DICT, "allocator name (e.g. cpu, GPU_0_bfc)"),
    _f("total_bytes", pa.int64(), "bytes requested from this allocator", unit="bytes"),
    _f("peak_bytes", pa.int64(), "peak bytes of this allocator during the op", unit="bytes"),
    _f("live_bytes", pa.int64(), "bytes still allocated after the op", unit="bytes"),
    _f("allocator_bytes_in_use", pa.int64(), "allocator bytes in use after the op", unit="bytes"),
)

ALLOCATIONS = _table(
    "allocations", "one allocation record of a node in one step", ("node_id", "step"),
    "Allocation and deallocation events of the GPU allocators (negative bytes = deallocation), in the order "
    "recorded.",
    NODE_ID,
    STEP,
    _f("alloc_micros", pa.int64(), "time of the event", unit="us since epoch"),
    _f("alloc_bytes", pa.int64(), "bytes allocated (negative: freed)", unit="bytes"),
    _f("allocator", DICT, "the allocator (a RunMetadata's `allocator_name`, Kineto's device `cpu` or `cuda:0`, "
       "XSpace's `allocator_name`); null where the source names none (a ProfileProto)", nullable=True),
    _f("bytes_in_use", pa.int64(), "what the allocator held after the event, where the source records it "
       "(Kineto's `Total Allocated`, XSpace's `bytes_allocated`); null elsewhere", unit="bytes", nullable=True),
    _f("bytes_reserved", pa.int64(), "what the allocator had reserved (cached) after the event, where the source "
       "records it (Kineto's `Total Reserved`); null elsewhere", unit="bytes", nullable=True),
)

CODE_FRAMES = _table(
    "code_frames", "one Python frame of the call stack that created a node", ("node_id", "depth"),
    "From op-log code traces; depth 0 is the outermost caller.",
    NODE_ID,
    _f("depth", pa.int32(), "frame index, 0 = outermost"),
    _f("file", DICT, "source file path"),
    _f("lineno", pa.int32(), "line number of the call"),
    _f("function", DICT, "function name"),
    _f("line", DICT, "source text of the line (may be empty)"),
    _f("func_start_line", pa.int32(), "first line of the function"),
)

CHECKPOINT_TENSORS = _table(
    "checkpoint_tensors", "one tensor of a checkpoint", ("name",),
    "Tensors of a TensorFlow V2 checkpoint (--checkpoint_path). Partition slices are not rows; a partitioned variable "
    "is one row with its full shape and its assembled value.",
    _f("name", pa.string(), "tensor (variable) name"),
    _f("dtype", DICT, "DataType name, e.g. DT_FLOAT"),
    _f("shape", pa.list_(pa.int64()), "dims ([] for a scalar)"),
    _f("num_elements", pa.int64(), "product of dims", unit="count"),
    _f("value", pa.binary(), "numeric values, little-endian, row-major (null for DT_STRING)", nullable=True),
    _f("string_value", pa.list_(pa.binary()), "elements of a DT_STRING tensor", nullable=True),
)

DEVICES = _table(
    "devices", "one device", ("device",),
    "Every device named in the step stats, with tfprof's classification (docs/TFPROF_BEHAVIOUR.md, 'Device classification').",
    _f("device", DICT, "device (lower-cased)"),
    _f("is_canonical", pa.bool_(), "…/(device:)cpu|gpu:N: its time counts as cpu time"),
    _f("is_accelerator_stream", pa.bool_(), "contains stream:all: its time counts as accelerator time"),
    _f("on_accelerator", pa.bool_(), "contains `gpu`"),
    _f("on_cpu", pa.bool_(), "contains `cpu`"),
)

INFO = _table(
    "info", "the profile (one row)", (),
    "Profile-wide flags.",
    _f("has_trace", pa.bool_(), "some node has a code trace"),
    _f("miss_accelerator_stream", pa.bool_(),
        "GPU devices were seen without a stream:all device (tfprof then under-reports GPU time)"),
    _f("rank", pa.int64(), "the process's rank in a distributed job, as the trace records it (Kineto's "
        "`distributedInfo`); null where it records none", nullable=True),
    _f("world_size", pa.int64(), "the job's number of ranks, as the trace records it; null where it records none",
        nullable=True),
    _f("host", pa.string(), "the host the trace was captured on (an XSpace's first host name); null where it "
        "records none", nullable=True),
    _f("framework", pa.string(), "the framework that wrote the profile, where the file says so (`jax`: an XSpace "
        "whose `/host:metadata` plane has a `jax_version` stat); null where it does not", nullable=True),
)

VALIDATION = _table(
    "validation", "one finding of the checks every load runs, or the rest of one check's findings, counted", (),
    "What the checks of `tfprof check` found in the data (`tfprof.schema.checks.CHECKS` lists them): for each check, "
    "up to five rows naming a node and step, then one row counting the others. Values the clamp rule kept out of the "
    "totals are in the other tables as counted (e.g. 0 for a negative duration); the detail gives the value as read. "
    "Ordered errors first, then warnings, then info, each by check.",
    _f("severity", DICT, "`error` (the data is wrong), `warning` (suspicious) or `info` (normal but notable)"),
    _f("code", DICT, "the check's stable identifier, e.g. `negative_duration`"),
    _f("node", pa.string(),
        "the node's name; null for a row that counts the rest, or a profile-wide finding", nullable=True),
    _f("step", pa.int64(), "the step; null where the finding is not about one step", nullable=True),
    _f("count", pa.int64(), "records the row stands for: 1 for a named one, the rest for a counting row", unit="count"),
    _f("detail", pa.string(), "what was found, with the values as read and what was done with them"),
)

# Tables of foreign profiles (Kineto JSON, XSpace: docs/FOREIGN.md); empty for tfprof's own inputs.

TRACE_EVENTS = _table(
    "trace_events", "one event of a foreign trace: a span, or an instant", ("start_ns",),
    "Every span (Chrome-trace `X`, `B`/`E` pairs; XSpace events) and instant (`i`/`I`) of a Kineto or XSpace "
    "profile, as recorded: durations are inclusive (a span's children included). Op events also become nodes; "
    "`node_id` and `step` link them.",
    _f("event_id", pa.int64(), "position of the event in the file (Kineto) or in plane/line/event order (XSpace)"),
    _f("process", DICT, "process name (Kineto `process_name` metadata, else the pid) or XSpace plane name"),
    _f("thread", DICT, "thread name (Kineto `thread_name` metadata, else the tid) or XSpace line name"),
    _f("category", DICT, "Kineto `cat` (cpu_op, kernel, python_function, …); XSpace: the event's display name",
        nullable=True),
    _f("name", DICT, "event name as recorded"),
    _f("phase", DICT, "`X` for a span (B/E pairs and XSpace events included), `i` for an instant"),
    _f("start_ns", pa.int64(), "start", unit="ns since epoch"),
    _f("duration_ns", pa.int64(), "inclusive duration (0 for an instant)", unit="ns"),
    _f("node_id", pa.int64(), "the node this event is an execution of; null for events that are not ops",
        nullable=True),
    _f("step", pa.int64(), "the step of an op event; null for other events", nullable=True),
    _f("args", pa.string(), "the event's args (Kineto) or stats (XSpace) as JSON text; null when none",
        nullable=True),
)

COUNTERS = _table(
    "counters", "one sample of a counter series", ("name", "series", "time_ns"),
    "Counter samples: Chrome-trace `C` events (one series per arg) and the allocator totals of PyTorch's `[memory]` "
    "events (series `Total Allocated` and `Total Reserved`).",
    _f("process", DICT, "process name of the sample"),
    _f("name", DICT, "counter name (the event name)"),
    _f("series", DICT, "series within the counter (the arg key)"),
    _f("time_ns", pa.int64(), "time of the sample", unit="ns since epoch"),
    _f("value", pa.float64(), "value of the series from this time on"),
)

FLOWS = _table(
    "flows", "one flow arrow between two events", ("from_ns", "flow_id"),
    "Chrome-trace flow events (`s` -> `f`, same `cat` and `id`: e.g. PyTorch's forward -> backward links) and XSpace "
    "producer/consumer ids (`_p` -> `_c` stats).",
    _f("flow_id", pa.string(), "the flow's id as recorded"),
    _f("category", DICT, "flow category (Kineto `cat`; XSpace: the producer/consumer type)", nullable=True),
    _f("from_ns", pa.int64(), "time of the flow's start", unit="ns since epoch"),
    _f("to_ns", pa.int64(), "time of the flow's end; null when the end is missing", unit="ns since epoch",
        nullable=True),
    _f("from_event", pa.int64(), "trace_events.event_id of the span the flow starts in (null: none)", nullable=True),
    _f("to_event", pa.int64(), "trace_events.event_id of the span the flow ends in (null: none)", nullable=True),
)

KERNELS = _table(
    "kernels", "one GPU event of a foreign trace: a kernel, a memcpy or a memset", ("device", "stream", "start_ns"),
    "The accelerator activity of a Kineto or XSpace profile, each event linked through the runtime call that launched "
    "it (same `correlation`) to the innermost op enclosing that call on its thread; the op's node gets the event's "
    "time as accelerator time (docs/FOREIGN.md, 'GPU events'). Empty for tfprof's own profiles and CPU-only traces.",
    _f("event_id", pa.int64(), "trace_events.event_id of the GPU event"),
    _f("node_id", pa.int64(), "the node of the op that launched the event; null when it links to no op (the event "
       "then has a node of its own under `[unlinked GPU events]`)", nullable=True),
    STEP,
    _f("device", DICT, "the GPU, `/device:gpu:<N>`"),
    _f("stream", DICT, "the stream within the GPU (Kineto's `stream` arg, else the number in the thread name, else "
       "the thread name)"),
    _f("name", DICT, "the event name as recorded (a kernel's mangled name, `Memcpy HtoD (Pageable -> Device)`, …)"),
    _f("start_ns", pa.int64(), "start", unit="ns since epoch"),
    _f("duration_ns", pa.int64(), "duration", unit="ns"),
    _f("correlation", pa.int64(), "the id joining the event to its runtime launch call; null when the trace has none",
       nullable=True),
    _f("kind", DICT, "`compute`, `communication` (NCCL/RCCL collectives), `memcpy_htod`, `memcpy_dtoh`, "
       "`memcpy_dtod`, `memcpy_other` or `memset`"),
)

FOREIGN_NO_SOURCE: dict[str, str] = {
    "kineto": "params and float_ops (no graph), output bytes and temp/persistent bytes (no allocator breakdown)",
    "xspace": "params and float_ops (no graph), every memory field (no allocation events)",
    # an XSpace whose allocator recorded MemoryAllocation/MemoryDeallocation events (TensorFlow 2's BFC allocator)
    "xspace_memory": "params and float_ops (no graph), output bytes and temp/persistent bytes (no allocator breakdown)",
}
"""For each foreign format (``Profile.source``), the fields tfprof's views print that it has no source for."""

DERIVED_NODE_TABLES: tuple[str, ...] = ("node_flops",)
"""Tables keyed by node that no reader decodes: the ingest derives them from each batch's ``nodes``
(``tfprof.ingest.validate``)."""

NODE_TABLES: tuple[str, ...] = tuple(
    name for name, t in TABLES.items() if t.schema.names[0] == "node_id" and name not in DERIVED_NODE_TABLES
)
"""The tables keyed by node (first column ``node_id``) that readers decode: what a streaming ingest writes in
batches (with ``DERIVED_NODE_TABLES``)."""

PUBLIC_NAMES = {
    "parameters": "params",
    "total_parameters": "total_params",
    "runs": "run_count",
    "definitions": "definition_count",
}
"""The columns of the views' query frames whose names differ in the public tables (what
``--format json|csv`` prints, ``tfprof.view`` returns and diff compares)."""

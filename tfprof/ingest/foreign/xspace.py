"""XSpace protobufs (``.xplane.pb`` from TensorFlow 2's and JAX's profilers, XProf) as tfprof's tables.

Planes are processes, lines threads, events spans (docs/FOREIGN.md has the rules). Ops are the
events of a TensorFlow graph (named ``<node path>:<op type>``, the type also the metadata's display
name) and the events of executed HLO instructions (stat ``hlo_op``), whose scope path is the
instruction's ``metadata.op_name`` in the program's HLO proto (``/host:metadata`` plane). Events with
a ``step_num`` stat mark steps; without any, each ``tf_function_call`` event starts the next step.
On the kernels engine protobuf (upb) never sees the events, the many: ``xwalk`` outlines the file
(where each line lies) and hands protobuf the space without its lines (planes, metadata, errors),
and ``xevents`` decodes the events off the raw bytes into columns. The reference engine lets
protobuf decode everything and walks its messages in Python; both give the same frame.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
from google.protobuf import message as _message

from tfprof import kernels
from tfprof.errors import ProfileFormatError
from tfprof.ingest.foreign import build, codes, hlo, memory, trace_table, xcheck, xevents, xwalk
from tfprof.ingest.foreign.progress import Tell, part, silent
from tfprof.ingest.sources import one_line
from tfprof.schema.proto import xplane_pb2

TASK_ENVIRONMENT = "Task Environment"
# Times are kept as int64 ns: a line's start must leave room for its events' offsets and
# durations (int64 ps each, so under 9.3e15 ns) within int64 ns, or they would wrap.
MAX_LINE_NS = 8.9e18
METADATA_PLANE = "/host:metadata"
MEMORY_EVENTS = ("MemoryAllocation", "MemoryDeallocation")  # TensorFlow's BFC allocator's TraceMe instants


def looks_like_xspace(path: Path) -> bool:
    """True when file ``path`` starts as an XSpace does (``xcheck.looks_like_xspace``)."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
        whole = not f.read(1)
    return xcheck.looks_like_xspace(head, whole)


def _space(path: Path, data: bytes) -> xplane_pb2.XSpace:
    """Protobuf's decoding of the whole XSpace ``data``, or the error that says what is wrong with it."""
    space = xplane_pb2.XSpace()
    try:
        space.ParseFromString(data)
    except (_message.DecodeError, ValueError, RuntimeError) as exc:
        raise ProfileFormatError(xcheck.damaged(path, data, one_line(str(exc)) or "it cannot decode it")) from None
    return space


def _skeleton(outline: xwalk.Outline | None) -> xplane_pb2.XSpace | None:
    """Protobuf's decoding of the outline's skeleton (the space without its lines); None when it does
    not decode (the whole file's decoding then says why)."""
    if outline is None:
        return None
    space = xplane_pb2.XSpace()
    try:
        space.ParseFromString(outline.skeleton)
    except (_message.DecodeError, ValueError, RuntimeError):
        return None
    return space


def _check(path: Path, space: xplane_pb2.XSpace, events: list[int]) -> None:
    empty = xcheck.nothing_captured(path, space, events)
    if empty:
        raise ProfileFormatError(empty)
    if not any(p.name for p in space.planes):
        raise ProfileFormatError(f"`{path}` {xcheck.LOOKS} none of its planes has a name; it is damaged")


def _value(stat, names: dict[int, str]):
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    if kind == "ref_value":
        return names.get(value, "")
    return value.hex() if kind == "bytes_value" else value


def read(path: Path, data, tell: Tell = silent) -> dict[str, pa.Table]:
    """The tables of the XSpace ``data`` (read from ``path``): its bytes, or a list holding them,
    which is emptied so that the bytes are freed once the events are decoded. The kernels engine
    decodes the events off the wire (``xwalk``, ``xevents``) and lets protobuf decode the rest; the
    reference engine, and the kernels on bytes the walk does not read, let protobuf decode the whole space.
    ``tell`` is told how far the read has got (``progress``)."""
    data = data.pop() if isinstance(data, list) else data
    tell(0, "events")
    buf = np.frombuffer(data, np.uint8)
    outline = xwalk.walk(buf) if kernels.enabled() else None
    space = _skeleton(outline)
    if space is None:
        outline, space = None, _space(path, data)
    if outline is None:
        events = xcheck.plane_events(space)
        lines = [(p, line.name or str(line.id), line.timestamp_ns) for p, plane in enumerate(space.planes)
                 for line in plane.lines]
    else:
        events = np.bincount(outline.lines[:, xwalk.L_PLANE], outline.lines[:, xwalk.L_EVENTS],
                             len(space.planes)).astype(np.int64).tolist()
        lines = [(p, bytes(buf[s:e]).decode() or str(i), ts) for p, i, s, e, ts in outline.lines[
            :, [xwalk.L_PLANE, xwalk.L_ID, xwalk.L_NAME_S, xwalk.L_NAME_E, xwalk.L_TS]].tolist()]
    _check(path, space, events)
    start_ns, programs, jax = 0, {}, False
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        if plane.name == TASK_ENVIRONMENT:
            start_ns = next((_start_ns(path, _value(s, names)) for s in plane.stats
                             if names.get(s.metadata_id) == "profile_start_time"), 0)
        if plane.name == METADATA_PLANE:
            jax = jax or any(names.get(s.metadata_id) == "jax_version" for s in plane.stats)
            for meta in plane.event_metadata.values():
                for s in meta.stats:
                    if names.get(s.metadata_id) == "Hlo Proto":
                        programs[meta.name] = hlo.instructions(s.bytes_value)
    _check_line_starts(path, space, lines, start_ns)
    tell(0.1, "events")
    found = xevents.frame_and_args(buf, outline, space, start_ns) if outline is not None else None
    if found is None:
        if outline is not None:  # an event the kernels do not read: protobuf says what is wrong, or reads it
            space = _space(path, data)
        raw = _raw_reference(space, start_ns)
        found = raw.drop("args"), raw["args"]
        del raw
    raw, args = found
    del outline, buf, data, found
    tell(0.4, "ops")
    ev = _classify(raw.with_row_index("event_id").with_columns(pl.col("event_id").cast(pl.Int64)), args, programs,
                   jax)
    del raw
    if not (ev["role"] == "op").any():
        raise ProfileFormatError(xcheck.no_ops(path, space, int(sum(events)), events))
    owned = [ev]  # build takes the events over
    del ev
    job = {"host": space.hostnames[0] if space.hostnames else None, "framework": "jax" if jax else None}
    return build.build(owned, args=args, job=job, tell=part(tell, 0.48, 1))


def _start_ns(path: Path, value) -> int:
    """The session's start (``profile_start_time``) in ns, or an error naming the file."""
    try:
        start = int(value)
    except (TypeError, ValueError, OverflowError):
        start = None
    if start is None or abs(start) > MAX_LINE_NS:
        raise ProfileFormatError(f"`{path}`: its `profile_start_time` {one_line(str(value))} is not a time in ns "
                                 "within ±8.9e18 (1970 ± 282 years); the XSpace is damaged")
    return start


def _check_line_starts(path: Path, space: xplane_pb2.XSpace, lines: list[tuple[int, str, int]], start_ns: int) -> None:
    """Every line's start in ns (the session's start plus its own) within ``MAX_LINE_NS``; ``lines``:
    (plane index, name, timestamp_ns) of each."""
    for p, name, ts in lines:
        if abs(start_ns + ts) > MAX_LINE_NS:
            raise ProfileFormatError(
                f"`{path}`: line `{one_line(name)}` of plane `{one_line(space.planes[p].name)}` starts at "
                f"{start_ns + ts} ns, beyond ±8.9e18 ns (1970 ± 282 years), more than int64 ns hold "
                "with its events; the XSpace is damaged")


def _raw_reference(space: xplane_pb2.XSpace, start_ns: int) -> pl.DataFrame:
    """One row per event, in the planes', lines' and events' order: a Python walk over protobuf's
    messages (the reference engine; ``xevents.columns`` builds the same frame on whole columns)."""
    cols = {c: [] for c in ("process", "thread", "name", "display", "start_ns", "dur_ns", "args", "hlo_op",
                            "hlo_module", "program_id", "step_num", "function_call", "producer", "consumer",
                            "correlation", "tf_op", "requested_bytes")}
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        metas = plane.event_metadata
        for line in plane.lines:
            base_ps = (start_ns + line.timestamp_ns) * 1000
            for e in line.events:
                meta = metas[e.metadata_id]
                stats = {names.get(s.metadata_id, ""): _value(s, names) for s in (*meta.stats, *e.stats)}
                cols["process"].append(plane.name)
                cols["thread"].append(line.name or str(line.id))
                cols["name"].append(meta.name)
                cols["display"].append(meta.display_name or None)
                cols["start_ns"].append((base_ps + e.offset_ps + 500) // 1000)
                cols["dur_ns"].append((e.duration_ps + 500) // 1000)
                cols["args"].append(json.dumps(stats, default=str) if stats else None)
                cols["hlo_op"].append(stats.get("hlo_op"))
                cols["hlo_module"].append(stats.get("hlo_module"))
                cols["program_id"].append(stats.get("program_id"))
                cols["step_num"].append(stats.get("step_num"))
                cols["function_call"].append("tf_function_call" in stats)
                cols["producer"].append(_flow(stats, "_p", "_pt"))
                cols["consumer"].append(_flow(stats, "_c", "_ct"))
                for column, stat in (("correlation", "correlation_id"), ("tf_op", "tf_op"),
                                     ("requested_bytes", "requested_bytes")):
                    cols[column].append(stats.get(stat))
    names = dict.fromkeys(("process", "thread", "name", "display"), pl.Categorical)
    return pl.DataFrame(cols, schema_overrides={**names, "program_id": pl.Int64, "step_num": pl.Int64, "args": pl.String,
                                               "hlo_op": pl.String, "hlo_module": pl.String,
                                               "producer": pl.String, "consumer": pl.String, "correlation": pl.Int64,
                                               "tf_op": pl.String, "requested_bytes": pl.Int64})


def _flow(stats: dict, id_key: str, type_key: str) -> str | None:
    return f"{stats.get(type_key, '')}:{stats[id_key]}" if id_key in stats else None


def _classify(raw: pl.DataFrame, args: pl.Series | pa.Array, programs: dict, jax: bool = False) -> pl.DataFrame:
    """The reader's event frame (``build.EVENT_COLUMNS`` but ``args``, and the flow ends after the
    events) from the raw one (``args``: each raw event's ``args``, apart: only the memory
    instants' are read here). ``jax``: the space says JAX wrote it, so no event is a TensorFlow op
    (JAX's own events are named ``<what>:<detail>`` too: ``ThenExecuteCallback:…``)."""
    raw = raw.lazy().with_columns((pl.col("hlo_module") + "(" + pl.col("program_id").cast(pl.String) + ")")
                                  .alias("_program")).collect()
    raw = raw.lazy().with_columns(_by_metadata(raw.lazy().select("process", "name", "display").collect(),
                                               raw["_meta"].to_numpy() if "_meta" in raw.columns else None)
                                  ).drop("_meta", strict=False).collect()
    if jax:
        raw = raw.with_columns(pl.lit(False).alias("_tf_op"))
    # (a narrow frame, the names still categoricals: the events themselves are not copied)
    raw = raw.with_columns(hlo.executed(raw.lazy().select(
        "_program", "hlo_op", pl.when(pl.col("_gpu").is_not_null()).then(pl.col("name")).alias("kernel"),
    ).collect(), programs))
    name, display, gpu, tf_op, is_memory = (pl.col(c) for c in ("name", "display", "_gpu", "_tf_op", "_memory"))
    # an HLO instruction run on the host (on a GPU plane, XProf's derived `XLA Ops` line repeats the kernels)
    hlo_op = pl.col("hlo_op").is_not_null() & pl.col("_end").not_() & gpu.is_null()
    # a kernel or copy on a GPU stream (XProf's derived lines, e.g. `TensorFlow Ops`, carry no correlation id)
    device_op = gpu.is_not_null() & (pl.col("correlation").is_not_null() | pl.col("tf_op").is_not_null())
    # one that ran an HLO instruction is that instruction's execution, whatever launched it
    own_op = device_op & pl.col("_instr").is_not_null()
    has_steps = raw["step_num"].is_not_null().any()
    step = pl.col("step_num").is_not_null() if has_steps else pl.col("function_call")
    scope = pl.col("_op_name").str.split(";").list.first().fill_null("")
    instr = pl.coalesce("_instr", "hlo_op")
    hlo_path = pl.when(scope != "").then(scope + "/" + instr).otherwise(instr)
    launched = pl.col("correlation").is_in(raw.lazy().filter(gpu.is_null()).select("correlation").collect()
                                           ["correlation"].drop_nulls().implode())
    # the name columns stay categoricals (the event's own text columns are cast, null on most events)
    cat = pl.Categorical
    ev = raw.lazy().with_columns(
        pl.when(is_memory).then(pl.lit("i", cat)).otherwise(pl.lit("X", cat)).alias("phase"),
        display.alias("category"),
        pl.when(hlo_op | tf_op | device_op).then(pl.lit("op", cat)).when(step).then(pl.lit("step", cat))
        .when(is_memory).then(pl.lit("memory", cat)).otherwise(pl.lit("other", cat)).alias("role"),
        # a GPU event nobody launched on the host is named by the op its stats name, else by itself
        pl.when(own_op | hlo_op).then(hlo_path.cast(cat)).when(device_op & launched).then(name)
        .when(device_op).then(pl.coalesce(_node_path(pl.col("tf_op")).cast(cat), name))
        .when(tf_op).then(pl.col("_tf_path")).otherwise(name).alias("label"),
        pl.when(own_op | hlo_op).then(pl.coalesce("_opcode", "hlo_op").cast(cat)).when(device_op).then(name)
        .otherwise(display).alias("op_type"),
        own_op.alias("own_op"),
        pl.col("_device").alias("device"),
        gpu.is_not_null().alias("accelerator"),
        pl.when(is_memory).then(pl.when(name == MEMORY_EVENTS[0]).then(pl.col("requested_bytes"))
                             .otherwise(-pl.col("requested_bytes"))).alias("mem_bytes"),
        pl.lit(None, pl.String).alias("flow_id"),
    ).drop("_gpu", "_tf_op", "_memory", "_end", "_tf_path", "_device", "_instr", "_opcode", "_op_name",
           "_program").collect()
    if not has_steps:  # tf.function calls, numbered in time order (ties in the events' order)
        steps = np.flatnonzero((ev["role"] == "step").to_numpy())
        number = np.empty(len(steps), np.int64)
        number[np.argsort(ev["start_ns"].to_numpy()[steps], kind="stable")] = np.arange(len(steps))
        ev = ev.lazy().with_columns(pl.Series("step_num", [], pl.Int64).extend_constant(None, ev.height)
                                    .scatter(steps, number)).collect()
    rows = np.flatnonzero((ev["role"] == "memory").to_numpy())
    mem_args = pl.Series(trace_table.texts_at(args, rows))  # (Arrow's take would join an array's chunks first)
    ev = ev.lazy().with_columns(memory.scattered(pl.DataFrame({"args": mem_args}).select(
        allocator=pl.col("args").str.json_path_match("$.allocator_name"),
        in_use=pl.col("args").str.json_path_match("$.bytes_allocated").cast(pl.Int64, strict=False)),
        rows, ev.height)).collect()
    ev = _place_memory(ev)
    return pl.concat([ev, _flow_events(ev)], how="diagonal_relaxed")


def _by_metadata(keys: pl.DataFrame, meta: np.ndarray | None) -> list[pl.Series]:
    """What an event's plane and metadata alone say (``keys``: its ``process``, ``name`` and
    ``display``), worked out once per distinct triple and gathered back per event: ``_gpu`` (the
    plane's GPU number, null off a GPU), ``_device``, ``_tf_op`` (a TensorFlow op off the GPU:
    named ``<path>:<type>``, its display name the type), ``_tf_path`` (that name without its type),
    ``_memory`` (an allocator instant off the GPU) and ``_end`` (an ``end: …`` event). ``meta``:
    a number per event that tells those triples apart where the reader has one (``xevents``), so
    that they need not be told apart by their text."""
    first, inverse = codes.distinct(*keys) if meta is None else codes.distinct_keys(meta)
    name, display = pl.col("name"), pl.col("display")
    gpu = pl.col("process").str.extract(r"^/device:GPU:(\d+)$", 1)
    found = keys[first].with_columns(pl.all().cast(pl.String)).select(
        gpu.cast(pl.Categorical).alias("_gpu"),
        pl.when(gpu.is_not_null()).then("/device:gpu:" + gpu).otherwise(pl.lit("/device:cpu:0"))
        .cast(pl.Categorical).alias("_device"),
        (display.is_not_null() & name.str.ends_with(":" + display.fill_null("")) & gpu.is_null()).alias("_tf_op"),
        name.str.head(name.str.len_chars() - display.str.len_chars() - 1).cast(pl.Categorical).alias("_tf_path"),
        (name.is_in(list(MEMORY_EVENTS)) & gpu.is_null()).alias("_memory"),
        name.str.starts_with("end: ").alias("_end"),
    )
    at = pl.Series(inverse)
    return [found[c].gather(at) for c in found.columns]


def _node_path(tf_op: pl.Expr) -> pl.Expr:
    """A ``tf_op`` stat as a node path: ``<path>:<type>`` loses its type (a node name has no ``:``)."""
    return tf_op.str.replace(r":[^:/]*$", "")


def _place_memory(ev: pl.DataFrame) -> pl.DataFrame:
    """Allocation instants moved into the op their ``tf_op`` stat names, so that nesting charges them
    to it: onto the thread of that op's last execution starting at or before the instant (else its
    first after), at the instant's time held within that execution. An instant whose ``tf_op`` names
    no op stays where it is (charged to the op around it on its own thread, if any)."""
    mem = ev.lazy().filter((pl.col("role") == "memory") & pl.col("tf_op").is_not_null()).select(
        "event_id", "start_ns", _node_path(pl.col("tf_op")).alias("_path")).collect().sort("start_ns")
    if mem.height == 0:
        return ev
    ops = ev.lazy().filter((pl.col("role") == "op") & pl.col("accelerator").not_()).select(
        pl.col("label").cast(pl.String).alias("_path"), pl.col("start_ns").alias("_from"), (pl.col("start_ns") + pl.col("dur_ns"))
        .alias("_to"), pl.col("process").alias("_process"), pl.col("thread").alias("_thread")).collect().sort("_from")
    found = [mem.join_asof(ops, left_on="start_ns", right_on="_from", by="_path", strategy=how,
                            check_sortedness=False) for how in ("backward", "forward")]
    cols = ("_from", "_to", "_process", "_thread")
    placed = found[0].with_columns(*(pl.when(pl.col("_from").is_not_null()).then(pl.col(c))
                                     .otherwise(found[1][c]).alias(c) for c in cols)).select("event_id", *cols)
    at = pl.col("start_ns").clip(pl.col("_from"), pl.max_horizontal(pl.col("_from"), pl.col("_to") - 1))
    placed = placed.filter(pl.col("_from").is_not_null()).join(ev.select("event_id", "start_ns"), on="event_id",
                                                               maintain_order="left").select("event_id", *cols, at)
    rows = placed["event_id"].to_numpy()  # (an event's id is its row)
    return ev.lazy().with_columns(ev[c].scatter(rows, placed[f]) for c, f in (
        ("process", "_process"), ("thread", "_thread"), ("start_ns", "start_ns"))).collect()


def _flow_events(ev: pl.DataFrame) -> pl.DataFrame:
    """One instant per flow end: at the start of the producing event, at the start of the consuming
    one. Only what build reads of a flow end is kept (where it lies, its flow; and, as its event's,
    ``correlation`` and ``accelerator``, which build reads before it looks at roles): the rest is null."""
    ends = []
    for column, role in (("producer", "flow_start"), ("consumer", "flow_end")):
        ends.append(ev.lazy().filter(pl.col(column).is_not_null()).select(
            "process", "thread", "start_ns", "correlation", "accelerator",
            pl.lit("i", pl.Categorical).alias("phase"), pl.lit(role, pl.Categorical).alias("role"),
            pl.lit(0, pl.Int64).alias("dur_ns"), pl.col(column).alias("flow_id"),
            pl.col(column).str.split(":").list.first().cast(pl.Categorical).alias("category")).collect())
    top = ev["event_id"].max() + 1
    return pl.concat(ends).with_columns((pl.int_range(pl.len()) + top).cast(pl.Int64).alias("event_id"))

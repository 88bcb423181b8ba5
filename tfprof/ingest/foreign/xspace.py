"""XSpace protobufs (``.xplane.pb`` from TensorFlow 2's and JAX's profilers, XProf) as tfprof's tables.

Planes are processes, lines threads, events spans (docs/FOREIGN.md has the rules). Ops are the
events of a TensorFlow graph (named ``<node path>:<op type>``, the type also the metadata's display
name) and the events of executed HLO instructions (stat ``hlo_op``), whose scope path is the
instruction's ``metadata.op_name`` in the program's HLO proto (``/host:metadata`` plane). Events with
a ``step_num`` stat mark steps; without any, each ``tf_function_call`` event starts the next step.
Planes, lines and metadata are decoded by protobuf (upb); the events, the many, by ``xevents``'
numba walk over the raw bytes into columns (the reference engine walks protobuf's messages in
Python instead; both give the same frame).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
from google.protobuf import message as _message

from tfprof import kernels
from tfprof.errors import ProfileFormatError
from tfprof.ingest.foreign import build, hlo, xevents
from tfprof.ingest.sources import one_line
from tfprof.schema.proto import xplane_pb2

TASK_ENVIRONMENT = "Task Environment"
# Times are kept as int64 ns: a line's start must leave room for its events' offsets and
# durations (int64 ps each, so under 9.3e15 ns) within int64 ns, or they would wrap.
MAX_LINE_NS = 8.9e18
METADATA_PLANE = "/host:metadata"


def looks_like_xspace(path: Path) -> bool:
    """True when the first plane of file ``path`` decodes as an XPlane with a printable name."""
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    if head[:1] != b"\x0a":  # XSpace.planes, field 1, length-delimited
        return False
    size, pos, shift = 0, 1, 0
    while pos < len(head) and pos < 11:
        b = head[pos]
        size |= (b & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not b & 0x80:
            break
    plane = xplane_pb2.XPlane()
    try:
        plane.ParseFromString(head[pos:pos + size] if pos + size <= len(head) else Path(path).read_bytes()[pos:pos + size])
    except (_message.DecodeError, ValueError, RuntimeError):
        return False
    return bool(plane.name) and plane.name.isprintable() and bool(plane.lines or plane.event_metadata or plane.stats)


def _space(path: Path, data: bytes) -> xplane_pb2.XSpace:
    space = xplane_pb2.XSpace()
    try:
        space.ParseFromString(data)
    except (_message.DecodeError, ValueError, RuntimeError) as exc:
        raise ProfileFormatError(f"`{path}` is not a valid XSpace ({one_line(str(exc)) or 'protobuf cannot decode it'}); "
                                 "check that the file is complete") from None
    if not space.planes or not any(p.name for p in space.planes):
        raise ProfileFormatError(f"`{path}` is not a valid XSpace (no named planes)")
    return space


def _value(stat, names: dict[int, str]):
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    if kind == "ref_value":
        return names.get(value, "")
    return value.hex() if kind == "bytes_value" else value


def read(path: Path, data: bytes) -> dict[str, pa.Table]:
    """The tables of the XSpace ``data`` (read from ``path``)."""
    space = _space(path, data)
    start_ns, programs = 0, {}
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        if plane.name == TASK_ENVIRONMENT:
            start_ns = next((_start_ns(path, _value(s, names)) for s in plane.stats
                             if names.get(s.metadata_id) == "profile_start_time"), 0)
        if plane.name == METADATA_PLANE:
            for meta in plane.event_metadata.values():
                for s in meta.stats:
                    if names.get(s.metadata_id) == "Hlo Proto":
                        programs[meta.name] = hlo.instructions(s.bytes_value)
    _check_line_starts(path, space, start_ns)
    raw = xevents.columns(space, data, start_ns, _value) if kernels.enabled() else None
    if raw is None:
        raw = _raw_reference(space, start_ns)
    ev = _classify(raw.with_row_index("event_id").with_columns(pl.col("event_id").cast(pl.Int64)), programs)
    if ev.filter(pl.col("role") == "op").height == 0:
        raise ProfileFormatError(f"`{path}` is an XSpace without op events (TensorFlow graph ops or HLO instructions)")
    return build.build(ev)


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


def _check_line_starts(path: Path, space: xplane_pb2.XSpace, start_ns: int) -> None:
    """Every line's start in ns (the session's start plus its own) within ``MAX_LINE_NS``."""
    for plane in space.planes:
        for line in plane.lines:
            if abs(start_ns + line.timestamp_ns) > MAX_LINE_NS:
                raise ProfileFormatError(
                    f"`{path}`: line `{one_line(line.name or str(line.id))}` of plane `{one_line(plane.name)}` starts at "
                    f"{start_ns + line.timestamp_ns} ns, beyond ±8.9e18 ns (1970 ± 282 years), more than int64 ns hold "
                    "with its events; the XSpace is damaged")


def _raw_reference(space: xplane_pb2.XSpace, start_ns: int) -> pl.DataFrame:
    """One row per event, in the planes', lines' and events' order: a Python walk over protobuf's
    messages (the reference engine; ``xevents.columns`` builds the same frame on whole columns)."""
    cols = {c: [] for c in ("process", "thread", "name", "display", "start_ns", "dur_ns", "args", "hlo_op",
                            "hlo_module", "program_id", "step_num", "function_call", "producer", "consumer")}
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
    return pl.DataFrame(cols, schema_overrides={"program_id": pl.Int64, "step_num": pl.Int64, "args": pl.String,
                                               "display": pl.String, "hlo_op": pl.String, "hlo_module": pl.String,
                                               "producer": pl.String, "consumer": pl.String})


def _flow(stats: dict, id_key: str, type_key: str) -> str | None:
    return f"{stats.get(type_key, '')}:{stats[id_key]}" if id_key in stats else None


def _classify(raw: pl.DataFrame, programs: dict) -> pl.DataFrame:
    scopes = pl.DataFrame(
        [(module, name, opcode, op_name) for module, ins in programs.items() for name, (opcode, op_name) in ins.items()],
        schema={"_program": pl.String, "hlo_op": pl.String, "_opcode": pl.String, "_op_name": pl.String}, orient="row")
    raw = raw.with_columns((pl.col("hlo_module") + "(" + pl.col("program_id").cast(pl.String) + ")").alias("_program"))
    raw = raw.join(scopes, on=["_program", "hlo_op"], how="left").sort("event_id")
    name, display = pl.col("name"), pl.col("display")
    tf_op = display.is_not_null() & name.str.ends_with(":" + display.fill_null(""))
    hlo_op = pl.col("hlo_op").is_not_null() & name.str.starts_with("end: ").not_()
    has_steps = raw["step_num"].is_not_null().any()
    step = pl.col("step_num").is_not_null() if has_steps else pl.col("function_call")
    scope = pl.col("_op_name").str.split(";").list.first().fill_null("")
    gpu = pl.col("process").str.extract(r"^/device:GPU:(\d+)$", 1)
    ev = raw.with_columns(
        pl.lit("X").alias("phase"),
        display.alias("category"),
        pl.when(hlo_op | tf_op).then(pl.lit("op")).when(step).then(pl.lit("step"))
        .when(pl.col("producer").is_not_null()).then(pl.lit("other")).otherwise(pl.lit("other")).alias("role"),
        pl.when(hlo_op).then(pl.when(scope != "").then(scope + "/" + pl.col("hlo_op")).otherwise(pl.col("hlo_op")))
        .when(tf_op).then(name.str.head(name.str.len_chars() - display.str.len_chars() - 1)).otherwise(name)
        .alias("label"),
        pl.when(hlo_op).then(pl.coalesce("_opcode", "hlo_op")).otherwise(display).alias("op_type"),
        pl.when(gpu.is_not_null()).then("/device:gpu:" + gpu).otherwise(pl.lit("/device:cpu:0")).alias("device"),
        gpu.is_not_null().alias("accelerator"),
        pl.lit(None, pl.Int64).alias("mem_bytes"),
        pl.lit(None, pl.String).alias("flow_id"),
    )
    if not has_steps:  # tf.function calls, numbered in time order
        ev = ev.with_columns(pl.when(pl.col("role") == "step").then(
            pl.col("start_ns").rank("ordinal").over("role") - 1).cast(pl.Int64).alias("step_num"))
    return pl.concat([ev, _flow_events(ev)], how="diagonal_relaxed")


def _flow_events(ev: pl.DataFrame) -> pl.DataFrame:
    """One instant per flow end: at the start of the producing event, at the start of the consuming one."""
    ends = []
    for column, role in (("producer", "flow_start"), ("consumer", "flow_end")):
        ends.append(ev.filter(pl.col(column).is_not_null()).with_columns(
            pl.lit("i").alias("phase"), pl.lit(role).alias("role"), pl.lit(0, pl.Int64).alias("dur_ns"),
            pl.col(column).alias("flow_id"), pl.col(column).str.split(":").list.first().alias("category")))
    top = ev["event_id"].max() + 1
    return pl.concat(ends).with_columns((pl.int_range(pl.len()) + top).cast(pl.Int64).alias("event_id"))

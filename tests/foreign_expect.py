"""Expected facts about a foreign profile, computed straight from the raw file, independently of tfprof's readers.

Kineto / Chrome-trace JSON is read with Python's own ``json`` and ``gzip``; XSpace with the protobuf runtime and
the vendored ``xplane_pb2`` (the only tfprof import here, and it is only the message layout). Nothing here shares
code with ``tfprof.ingest``, so a reader's tables can be held against these numbers: when both agree, neither
copied the other's mistake.

``kineto_expect(path)`` and ``xspace_expect(path)`` return plain dicts of counts, sums and name sets.
Durations are summed exactly: Kineto ``dur`` (microseconds with up to three decimals) as integer nanoseconds,
XSpace ``duration_ps`` as integer picoseconds.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

from tfprof.schema.proto import xplane_pb2

STEP_PREFIX = "ProfilerStep#"
MEMORY_EVENT = "[memory]"
MODULE_PREFIX = "nn.Module: "


# ---------------------------------------------------------------- Kineto / Chrome trace JSON


def load_trace_events(path: str | Path) -> tuple[dict, list[dict]]:
    """The top-level object (empty for the array form) and its list of events; gzip is detected by magic bytes."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    if isinstance(doc, list):
        return {}, doc
    return doc, doc.get("traceEvents", [])


def _ns(dur_us) -> int:
    """Kineto writes microseconds with three decimals; whole nanoseconds, in decimal (an epoch
    time in µs times 1000 is beyond a double's exact integers), so sums are exact."""
    return round(Decimal(repr(float(dur_us))) * 1000)


def kineto_expect(path: str | Path) -> dict:
    top, events = load_trace_events(path)
    ph = Counter(e.get("ph") for e in events)
    complete = [e for e in events if e.get("ph") == "X"]
    per_op: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for e in complete:
        acc = per_op[(e.get("cat", ""), e["name"])]
        acc[0] += 1
        acc[1] += _ns(e.get("dur", 0))
    steps = {e["name"]: _ns(e["dur"]) for e in complete if e["name"].startswith(STEP_PREFIX)}
    memory = [e for e in events if e.get("name") == MEMORY_EVENT]
    mem_bytes = [int(e.get("args", {}).get("Bytes", 0)) for e in memory]
    pids = {e.get("pid") for e in events if "pid" in e}
    threads = {(e.get("pid"), e.get("tid")) for e in events if "pid" in e and "tid" in e}
    arg_keys = Counter(k for e in events for k in (e.get("args") or {}))
    names = {(m["pid"], m["tid"]): m["args"]["name"] for m in events if m.get("ph") == "M" and m.get("name") == "thread_name"}
    return {
        "top_keys": sorted(top),
        "events": len(events),
        "ph_counts": dict(ph),
        "steps_ns": steps,  # ProfilerStep#N -> duration, ns
        "complete_by_cat_name": {k: tuple(v) for k, v in per_op.items()},  # (cat, name) -> (count, total ns)
        "cat_counts": dict(Counter(e.get("cat") for e in events)),
        "distinct_pids": len(pids),
        "distinct_threads": len(threads),  # (pid, tid) pairs
        "thread_names": names,
        "memory_events": len(memory),
        "memory_alloc_bytes": sum(b for b in mem_bytes if b > 0),
        "memory_free_bytes": -sum(b for b in mem_bytes if b < 0),
        "arg_key_counts": dict(arg_keys),
        "modules": sorted({e["name"][len(MODULE_PREFIX):] for e in complete if e["name"].startswith(MODULE_PREFIX)}),
        "shapes_events": sum(1 for e in complete if "Input Dims" in (e.get("args") or {})),
        "flows": sum(1 for e in events if e.get("ph") in ("s", "f", "t")),
    }


def _sequence(e: dict):
    return (e.get("args") or {}).get("Sequence number")


def kineto_gradients(path: str | Path) -> Counter:
    """(enclosing module names, forward op, backward node) -> count, for each backward pass op of a
    PyTorch trace, found the way its own flows and numbers say. With ``fwdbwd`` flows (PyTorch 2):
    the ``s`` end sits on the forward op's start, the ``f`` end on the start of the op named after the
    autograd node (``ConvolutionBackward0``). Without them (PyTorch 1.8): each op named
    ``…Backward<N>`` with a ``Sequence number`` and no such op around it, and the op of that number
    (not one of those nor inside one) that started last before it."""
    _, events = load_trace_events(path)
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator")]
    at = defaultdict(list)
    for e in ops:
        at[e["pid"], e["tid"], e["ts"]].append(e)
    modules = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e["name"].startswith(MODULE_PREFIX):
            modules[e["pid"], e["tid"]].append(e)

    def inside(e: dict, outer: dict) -> bool:
        return outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"]

    def chain(e: dict) -> tuple:
        around = sorted((m for m in modules[e["pid"], e["tid"]] if inside(e, m)), key=lambda m: (m["ts"], -m["dur"]))
        return tuple(m["name"][len(MODULE_PREFIX):] for m in around)

    out: Counter = Counter()
    flows = defaultdict(dict)
    for e in events:
        if e.get("cat") == "fwdbwd" and e.get("ph") in ("s", "f"):
            flows[e["id"]][e["ph"]] = min(at[e["pid"], e["tid"], e["ts"]], key=lambda o: o["dur"])
    if flows:
        for ends in flows.values():
            out[chain(ends["s"]), ends["s"]["name"], ends["f"]["name"]] += 1
        return out
    backward = [e for e in ops if re.search(r"Backward\d*$", e["name"]) and _sequence(e) is not None]
    by_thread = defaultdict(list)
    for e in backward:
        by_thread[e["pid"], e["tid"]].append(e)
    inner = {id(e) for e in backward for o in by_thread[e["pid"], e["tid"]] if o is not e and inside(e, o)}
    nested = {id(e) for e in ops for o in by_thread[e["pid"], e["tid"]] if inside(e, o)}
    for root in (e for e in backward if id(e) not in inner):
        candidates = [e for e in ops if id(e) not in nested and e["pid"] == root["pid"]
                      and _sequence(e) == _sequence(root) and e["ts"] <= root["ts"]]
        if candidates:
            forward = max(candidates, key=lambda e: (e["ts"], -e["dur"]))
            out[chain(forward), forward["name"], root["name"]] += 1
    return out


# ---------------------------------------------------------------- XSpace


def load_xspace(path: str | Path) -> xplane_pb2.XSpace:
    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(path).read_bytes())
    return space


def _wire_fields(buf: bytes):
    """Yield (field number, wire type, value) of one protobuf message: ints for varint/fixed, bytes for LEN."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = int.from_bytes(buf[i : i + 8], "little"), i + 8
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i : i + size], i + size
        elif wire == 5:
            value, i = int.from_bytes(buf[i : i + 4], "little"), i + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield field, wire, value


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _first(buf: bytes, number: int, default=b""):
    return next((v for f, w, v in _wire_fields(buf) if f == number and w == 2), default)


def hlo_op_names(hlo_proto: bytes) -> dict[str, dict[str, tuple[str, str]]]:
    """Per computation, instruction name -> (opcode, metadata.op_name) from a serialized xla.HloProto.

    Field numbers (xla/service/hlo.proto, xla/xla_data.proto): HloProto.hlo_module 1; HloModuleProto.computations 3;
    HloComputationProto name 1, instructions 2; HloInstructionProto name 1, opcode 2, metadata 7;
    OpMetadata op_type 1, op_name 2.
    """
    out: dict[str, dict[str, tuple[str, str]]] = {}
    module = _first(hlo_proto, 1)
    for field, wire, comp in _wire_fields(module):
        if field != 3 or wire != 2:
            continue
        instructions = {}
        for f, w, ins in _wire_fields(comp):
            if f == 2 and w == 2:
                name, opcode, meta = (_first(ins, k) for k in (1, 2, 7))
                instructions[name.decode()] = (opcode.decode(), _first(meta, 2).decode())
        out[_first(comp, 1).decode()] = instructions
    return out


def _stat_value(stat: xplane_pb2.XStat, stat_names: dict[int, str]):
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    return stat_names.get(value, "") if kind == "ref_value" else value


def _note(stats, names: dict[int, str], used: set[str], strings: dict[str, set[str]]) -> None:
    """Record the names of these stats in `used` and their string values (refs resolved) in `strings`."""
    for s in stats:
        name = names.get(s.metadata_id, "")
        used.add(name)
        value = _stat_value(s, names)
        if isinstance(value, str):
            strings[name].add(value)


def xspace_expect(path: str | Path) -> dict:
    space = load_xspace(path)
    planes = []
    by_event: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    display: dict[tuple[str, str], str] = {}
    stat_names_used: dict[str, set[str]] = {}
    str_stats: dict[str, dict[str, set[str]]] = {}
    programs: dict[str, dict] = {}
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        used: set[str] = set()
        strings: dict[str, set[str]] = defaultdict(set)

        _note(plane.stats, names, used, strings)
        for meta in plane.event_metadata.values():
            _note(meta.stats, names, used, strings)
            if meta.display_name:
                display[(plane.name, meta.name)] = meta.display_name
            hlo = next((s.bytes_value for s in meta.stats if names.get(s.metadata_id) == "Hlo Proto"), None)
            if hlo is not None:
                programs[meta.name] = hlo_op_names(hlo)
        line_events = Counter()
        for line in plane.lines:
            line_events[line.name] += len(line.events)
            for e in line.events:
                acc = by_event[(plane.name, plane.event_metadata[e.metadata_id].name)]
                acc[0] += 1
                acc[1] += e.duration_ps
                _note(e.stats, names, used, strings)
        planes.append(
            {
                "name": plane.name,
                "lines": len(plane.lines),
                "events": sum(line_events.values()),
                "line_events": dict(line_events),
                "event_metadata": len(plane.event_metadata),
                "stat_metadata": len(plane.stat_metadata),
            }
        )
        stat_names_used[plane.name] = used
        str_stats[plane.name] = dict(strings)
    return {
        "hostnames": list(space.hostnames),
        "errors": list(space.errors),
        "planes": planes,
        "events_by_plane_name": {k: tuple(v) for k, v in by_event.items()},  # (plane, name) -> (count, total ps)
        "display_names": display,  # (plane, event name) -> display_name, where one is set
        "stat_names_used": stat_names_used,  # plane -> names of stats attached anywhere in it
        "string_stats": str_stats,  # plane -> stat name -> string values (ref_value resolved)
        "programs": programs,  # /host:metadata program -> computation -> instruction -> (opcode, op_name)
    }


# ---------------------------------------------------------------- XSpace memory and GPU events

MEMORY_EVENTS = {"MemoryAllocation": 1, "MemoryDeallocation": -1}


def _plain_stats(stats, names: dict[int, str]) -> dict:
    return {names.get(s.metadata_id, ""): _stat_value(s, names) for s in stats}


def xspace_memory_expect(path: str | Path) -> dict:
    """Per node path, the allocator events charged to it and its highest running sum of bytes in one execution.

    An allocation instant (``MemoryAllocation`` +``requested_bytes``, ``MemoryDeallocation`` -``requested_bytes``)
    belongs to the TensorFlow op its ``tf_op`` stat names: that op's last execution starting at or before the
    instant, else its first after; an instant whose ``tf_op`` names no op event belongs to the op event enclosing it
    on its own line, if any. Times are whole ns as xplane.proto defines them (line ns + event ps); walked in Python.
    """
    space = load_xspace(path)
    execs, instants = [], []  # (path, start, end, line key); (order, tf_op, time, line key, bytes, allocator, in use)
    for p, plane in enumerate(space.planes):
        if plane.name.startswith("/device:"):
            continue
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for li, line in enumerate(plane.lines):
            for e in line.events:
                meta = plane.event_metadata[e.metadata_id]
                t = line.timestamp_ns * 1000 + e.offset_ps
                if meta.display_name and meta.name.endswith(":" + meta.display_name):
                    execs.append((meta.name[: -len(meta.display_name) - 1], t, t + e.duration_ps, (p, li)))
                elif meta.name in MEMORY_EVENTS:
                    stats = _plain_stats((*meta.stats, *e.stats), names)
                    instants.append((len(instants), stats.get("tf_op"), t, (p, li),
                                     MEMORY_EVENTS[meta.name] * int(stats.get("requested_bytes") or 0),
                                     stats.get("allocator_name", ""), stats.get("bytes_allocated")))
    by_path = defaultdict(list)
    for i, (op, start, _, _) in enumerate(execs):
        by_path[op].append((start, i))
    owner = {}
    for order, tf_op, t, line, *_ in instants:
        runs = sorted(by_path.get(tf_op or "", []))
        if runs:
            before = [i for s, i in runs if s <= t]
            owner[order] = before[-1] if before else runs[0][1]
            continue
        around = [(s, i) for i, (_, s, end, key) in enumerate(execs) if key == line and s <= t <= end]
        if around:
            owner[order] = max(around)[1]
    per_exec = defaultdict(list)
    allocators: Counter = Counter()
    for order, _, _, _, nbytes, allocator, in_use in instants:
        if order in owner:
            per_exec[owner[order]].append((nbytes, allocator, in_use))
            allocators[allocator] += 1
    nodes: dict[str, dict] = defaultdict(lambda: {"events": 0, "alloc_bytes": 0, "free_bytes": 0, "peak_bytes": 0,
                                                  "in_use": 0})
    for i, amounts in per_exec.items():
        node = nodes[execs[i][0]]
        node["events"] += len(amounts)
        node["alloc_bytes"] += sum(b for b, _, _ in amounts if b > 0)
        node["free_bytes"] -= sum(b for b, _, _ in amounts if b < 0)
        live: dict[str, int] = defaultdict(int)  # per allocator: tfprof sums each allocator's peak
        peak: dict[str, int] = defaultdict(int)
        last: dict[str, int] = {}
        for b, allocator, in_use in amounts:
            live[allocator] += b
            peak[allocator] = max(peak[allocator], live[allocator])
            last[allocator] = int(in_use or 0)
        node["peak_bytes"] = max(node["peak_bytes"], sum(peak.values()))
        # what a GPU allocator (tfprof: its name holds `GPU`) held after the execution's last instant on it
        node["in_use"] = max(node["in_use"], max((v for k, v in last.items() if "GPU" in k), default=0))
    return {"instants": len(instants), "charged": len(owner), "nodes": dict(nodes), "allocators": dict(allocators)}


def xspace_correlations(path: str | Path) -> dict[str, Counter]:
    """Plane name -> how many events carry each ``correlation_id`` (host launch calls and GPU kernels/copies)."""
    out: dict[str, Counter] = {}
    for plane in load_xspace(path).planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        ids = Counter(v for line in plane.lines for e in line.events
                      for k, v in _plain_stats((*plane.event_metadata[e.metadata_id].stats, *e.stats), names).items()
                      if k == "correlation_id")
        if ids:
            out[plane.name] = ids
    return out


def subtract_children(spans: list[list]) -> list[list]:
    """Each span ``[start, end, key, self, ...]`` of one thread or line, with ``self`` (its length on entry) less
    the lengths of the spans directly inside it: a stack walk in start order, longest first at a tie. Returns the
    spans, sorted so."""
    spans.sort(key=lambda s: (s[0], -s[1]))
    stack: list[list] = []
    for span in spans:
        while stack and not span[1] <= stack[-1][1]:
            stack.pop()
        if stack:
            stack[-1][3] -= span[1] - span[0]
        stack.append(span)
    return spans

"""What the advisor's GPU checks should find in a Kineto trace, from the raw JSON (``json``/``gzip`` only).

Plain Python over the list of events, sharing no code with ``tfprof.queries.advisor``: the rules
of docs/ADVISOR.md ('GPU checks') written out again with loops and sorted lists, so a mistake in
the columnar queries shows up as a difference. Times are integer ns (Kineto's microseconds x 1000,
rounded), ``event_id`` is the event's index in ``traceEvents``.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

DEVICE = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
          "Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}
LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel",
            "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "hipLaunchKernel", "hipExtLaunchKernel",
            "hipLaunchCooperativeKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel"}
SYNCS = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "hipDeviceSynchronize",
         "hipStreamSynchronize", "hipEventSynchronize", "synchronize", "synchronizeStream",  # MTIA's
         "aten::item", "aten::_local_scalar_dense"}
STEP = "ProfilerStep#"
MAX_SPACING_NS = 50_000


def load(path: str | Path) -> list[dict]:
    if str(path).endswith(".xplane.pb"):
        return xspace_events(path)
    raw = Path(path).read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _ns(us) -> int:
    """Kineto's µs as written (the shortest text of the parsed number) in whole ns, in decimal:
    an epoch time in µs times 1000 is beyond a double's exact integers."""
    return round(Decimal(repr(float(us))) * 1000)


def device_ops(events: list[dict]) -> list[dict]:
    out = []
    for i, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") in DEVICE:
            a = e.get("args") or {}
            start = _ns(e["ts"])
            out.append({"id": i, "name": e["name"], "kind": DEVICE[e["cat"]], "device": str(a.get("device", e["pid"])),
                        "stream": str(a.get("stream", e["tid"])), "corr": a.get("correlation"), "start": start,
                        "end": start + _ns(e.get("dur", 0)), "bytes": a.get("bytes")})
    return out


def host_calls(events: list[dict]) -> dict[int, dict]:
    """correlation -> the first host span carrying it."""
    out = {}
    for i, e in enumerate(events):
        a = e.get("args") or {}
        if e.get("ph") == "X" and e.get("cat") not in DEVICE and a.get("correlation") is not None:
            start = _ns(e["ts"])
            out.setdefault(int(a["correlation"]), {"id": i, "name": e["name"], "thread": (e["pid"], e["tid"]),
                                                   "start": start, "dur": _ns(e.get("dur", 0))})
    return out


def marker_spans(events: list[dict]) -> dict[int, list[int]]:
    """step -> [earliest start, latest end] of its host-side ``ProfilerStep#N`` markers."""
    spans: dict[int, list[int]] = {}
    for e in events:
        name = str(e.get("name", ""))
        if e.get("ph") == "X" and name.startswith(STEP) and not str(e.get("cat", "")).startswith("gpu_"):
            n, start = int(name[len(STEP):]), _ns(e["ts"])
            lo, hi = spans.get(n, [start, start])
            spans[n] = [min(lo, start), max(hi, start + _ns(e["dur"]))]
    return spans


def windows(events: list[dict], ops: list[dict]) -> list[tuple[int, int, int]]:
    """(step, start, end) in time order."""
    marks = marker_spans(events)
    starts = [_ns(e["ts"]) for e in events  # spans and instants: what trace_events keeps
              if e.get("ph") in ("X", "i", "I") and not str(e.get("name", "")).startswith(STEP)]
    marks = {n: span for n, span in marks.items() if any(span[0] <= t <= span[1] for t in starts)}
    if not marks:
        return [(0, min(o["start"] for o in ops), max(o["end"] for o in ops))] if ops else []
    order = sorted(marks.items(), key=lambda kv: (kv[1][0], kv[0]))
    last_start = order[-1][1][0]
    tail = max([o["end"] for o in ops if o["start"] >= last_start], default=last_start)
    out = []
    for k, (step, (start, end)) in enumerate(order):
        out.append((step, start, order[k + 1][1][0] if k + 1 < len(order) else max(end, tail)))
    return out


def step_at(wins: list[tuple[int, int, int]], t: int) -> int:
    found = wins[0][0]
    for step, start, _ in wins:
        if start <= t:
            found = step
    return found


def merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [tuple(x) for x in out]


def idle(events: list[dict]) -> dict[tuple[int, str], tuple[int, int]]:
    """(step, device) -> (window ns, idle ns)."""
    ops = device_ops(events)
    wins = windows(events, ops)
    out = {}
    for device in {o["device"] for o in ops}:
        busy = merge([(o["start"], o["end"]) for o in ops if o["device"] == device])
        for step, ws, we in wins:
            used = sum(max(0, min(e, we) - max(s, ws)) for s, e in busy)
            out[(step, device)] = (we - ws, we - ws - used)
    return out


def short_kernels(events: list[dict]) -> dict[str, tuple[int, int]]:
    """kernel name -> (short kernels, kernels joined to a launch), names with a short one."""
    calls = host_calls(events)
    count: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for o in device_ops(events):
        call = calls.get(o["corr"]) if o["corr"] is not None else None
        if o["kind"] == "kernel" and call and (call["name"] in LAUNCHES or call["name"] == o["name"]):  # XSpace
            count[o["name"]][1] += 1
            count[o["name"]][0] += (o["end"] - o["start"]) < call["dur"]
    return {k: tuple(v) for k, v in count.items() if v[0]}


def syncs(events: list[dict]) -> dict[int, tuple[int, int]]:
    """step -> (outermost syncs, their ns)."""
    wins = windows(events, device_ops(events))
    found = sorted(((e["pid"], e["tid"]), _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
                   for e in events if e.get("ph") == "X" and e.get("name") in SYNCS)
    out: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    reach: dict = {}
    for thread, s, e in sorted(found, key=lambda x: (x[0], x[1], -x[2])):
        if thread not in reach or s >= reach[thread]:
            out[step_at(wins, s)][0] += 1
            out[step_at(wins, s)][1] += e - s
        reach[thread] = max(reach.get(thread, e), e)
    return {k: tuple(v) for k, v in out.items()}


def pageable(events: list[dict]) -> dict[str, tuple[int, int, int]]:
    """copy name -> (count, ns, bytes)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for o in device_ops(events):
        if o["kind"] == "memcpy" and "HtoD" in o["name"] and "Pageable" in o["name"]:
            acc = out[o["name"]]
            acc[0] += 1
            acc[1] += o["end"] - o["start"]
            acc[2] += o["bytes"] or 0
    return {k: tuple(v) for k, v in out.items()}


def exposed_comm(events: list[dict]) -> dict[str, tuple[int, int]]:
    """device -> (communication ns, exposed ns)."""
    kernels = [o for o in device_ops(events) if o["kind"] == "kernel"]
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for o in kernels:
        if "nccl" in o["name"].lower() or "rccl" in o["name"].lower():
            busy = merge([(k["start"], k["end"]) for k in kernels if k["device"] == o["device"]
                          and "nccl" not in k["name"].lower() and "rccl" not in k["name"].lower()])
            hidden = sum(max(0, min(e, o["end"]) - max(s, o["start"])) for s, e in busy)
            out[o["device"]][0] += o["end"] - o["start"]
            out[o["device"]][1] += o["end"] - o["start"] - hidden
    return {k: tuple(v) for k, v in out.items()}


def launch_bound(events: list[dict], gaps: dict | None = None) -> dict[tuple[int, str], tuple[int, int, int]]:
    """(step, device) -> (ops with an earlier op on their stream, launch-bound ones, their gap ns);
    ``gaps``, when given, gets each device's launch-bound gaps as (start, end) intervals."""
    ops = device_ops(events)
    wins = windows(events, ops)
    calls = host_calls(events)
    by_thread: dict = defaultdict(list)
    for c in calls.values():
        by_thread[c["thread"]].append(c["start"])
    previous = {}
    for starts in by_thread.values():
        starts.sort()
        for a, b in zip(starts, starts[1:]):
            previous.setdefault(b, b - a)
    spacing = {corr: previous.get(c["start"]) for corr, c in calls.items()}
    streams: dict = defaultdict(list)
    for o in ops:
        streams[(o["device"], o["stream"])].append(o)
    out: dict = defaultdict(lambda: [0, 0, 0])
    for (device, _), group in streams.items():
        group.sort(key=lambda o: (o["start"], o["end"]))
        reach = None
        for o in group:
            if reach is not None:
                acc = out[(step_at(wins, o["start"]), device)]
                acc[0] += 1
                gap = max(0, o["start"] - reach)
                call = calls.get(o["corr"])
                gap_spacing = spacing.get(o["corr"])
                if gap > 0 and call and call["start"] >= reach and gap_spacing is not None \
                        and gap_spacing <= MAX_SPACING_NS:
                    acc[1] += 1
                    acc[2] += gap
                    if gaps is not None:
                        gaps.setdefault(device, []).append((reach, o["start"]))
            reach = o["end"] if reach is None else max(reach, o["end"])
    return {k: tuple(v) for k, v in out.items()}


def _minus(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of the disjoint sorted intervals ``a`` that no interval of ``b`` covers."""
    out = []
    for s, e in a:
        for bs, be in b:
            if be <= s or bs >= e:
                continue
            if bs > s:
                out.append((s, bs))
            s = max(s, be)
        if s < e:
            out.append((s, e))
    return out


def bound_idle(events: list[dict]) -> dict[tuple[int, str], tuple[int, int]]:
    """(step, device) -> (the device's idle ns, the idle ns inside some stream's launch-bound gap):
    the gaps with every device operation taken out, cut at the step's window."""
    gaps: dict = {}
    found = launch_bound(events, gaps)
    ops = device_ops(events)
    wins = windows(events, ops)
    out = {}
    for step, device in found:
        _, ws, we = next(w for w in wins if w[0] == step)
        busy = merge([(o["start"], o["end"]) for o in ops if o["device"] == device])
        free = _minus(merge(gaps.get(device, [])), busy)
        used = sum(max(0, min(e, we) - max(s, ws)) for s, e in busy)
        out[(step, device)] = (we - ws - used, sum(max(0, min(e, we) - max(s, ws)) for s, e in free))
    return out


def xspace_events(path: str | Path) -> list[dict]:
    """An XSpace capture's GPU events and launch calls as the Kineto events above read them, from
    the protobuf runtime alone: an event of a ``/device:GPU:N`` plane carrying a ``correlation_id``
    stat is a device event (``Memcpy``/``Memset`` in its name: a copy or memset) on the stream
    numbered in its line's name; a host event carrying one is the call that launched it (TensorFlow
    names a launch after its kernel). A host event with a ``step_num`` stat N is step N's marker,
    written as a ``ProfilerStep#N`` span; without any, each ``tf_function_call`` event is, numbered
    in time order. Times: the line's ns plus the event's ps, as us."""
    from tfprof.schema.proto import xplane_pb2

    space = xplane_pb2.XSpace.FromString(Path(path).read_bytes())
    out, numbered, calls = [], [], []
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        gpu = re.fullmatch(r"/device:GPU:(\d+)", plane.name)
        for line in plane.lines:
            stream = re.search(r"(?i)stream\D*?(\d+)", line.name)
            for e in line.events:
                meta = plane.event_metadata[e.metadata_id]
                stats = {names.get(st.metadata_id): st for st in (*meta.stats, *e.stats)}
                start_ps = line.timestamp_ns * 1000 + e.offset_ps
                span = {"ph": "X", "cat": "user_annotation", "pid": plane.name, "tid": line.name,
                        "ts": start_ps / 1e6, "dur": e.duration_ps / 1e6}
                if not gpu and "step_num" in stats:
                    num = stats["step_num"]
                    numbered.append({**span, "name": f"{STEP}{num.int64_value or num.uint64_value}"})
                if not gpu and "tf_function_call" in stats:
                    calls.append((start_ps, len(calls), span))
                if "correlation_id" not in stats:
                    continue
                st = stats["correlation_id"]
                corr = st.int64_value or st.uint64_value
                event = {"ph": "X", "name": meta.name, "pid": plane.name, "tid": line.name,
                         "ts": start_ps / 1e6, "dur": e.duration_ps / 1e6, "args": {"correlation": corr}}
                if gpu:
                    low = meta.name.lower()
                    event["cat"] = "gpu_memcpy" if "memcpy" in low else "gpu_memset" if "memset" in low else "kernel"
                    event["args"].update(device=int(gpu.group(1)), stream=stream.group(1) if stream else line.name)
                else:
                    event["cat"] = "cuda_runtime"
                out.append(event)
    marks = numbered or [{**span, "name": f"{STEP}{n}"} for n, (_, _, span) in enumerate(sorted(calls, key=lambda c: c[:2]))]
    return out + marks


def peer_windows(events: list[dict], ops: list[dict], window: str) -> list[tuple[int, int, int]]:
    """(step, start, end) under ``tfprof steps --window``: ``next`` as ``windows``; ``marker``,
    each marker's own span (earliest start to latest end of the step's markers); ``kernels``, the
    span of the device events whose launch call starts in the step's ``next`` window (all device
    events by their own start when no launch call is in the trace)."""
    wins = windows(events, ops)
    if window == "marker" and wins:
        spans = marker_spans(events)
        return [(step, start, spans[step][1]) if step in spans else (step, start, end) for step, start, end in wins]
    if window == "kernels" and wins:
        calls = host_calls(events)
        launched = [(o, calls[o["corr"]]["start"]) for o in ops if o["corr"] is not None and o["corr"] in calls]
        by_step: dict[int, list[int]] = {}
        for o, at in launched or [(o, o["start"]) for o in ops]:
            lo, hi = by_step.get(step_at(wins, at), [o["start"], o["end"]])
            by_step[step_at(wins, at)] = [min(lo, o["start"]), max(hi, o["end"])]
        return sorted(((s, lo, hi) for s, (lo, hi) in by_step.items()), key=lambda w: (w[1], w[0]))
    return wins


def breakdown(events: list[dict], window: str = "next", drop_last_step: bool = False,
              total: bool = False) -> dict[tuple[int | None, str], tuple[int, ...]]:
    """(step, device) -> (window, compute, exposed communication, copies and memsets, idle,
    communication in all, communication hidden by compute), ns: each part the busy time of a
    union of intervals cut at the window (``tfprof steps``, docs/FOREIGN.md); the peers'
    windows, the last step left out (of two or more) and a whole-trace row (step None: first
    window's start to last one's end) as its options ask."""
    ops = device_ops(events)
    wins = peer_windows(events, ops, window)
    if drop_last_step and len(wins) > 1:
        wins = wins[:-1]
    if total and wins:
        wins = wins + [(None, min(w[1] for w in wins), max(w[2] for w in wins))]

    def comm(o: dict) -> bool:
        return o["kind"] == "kernel" and ("nccl" in o["name"].lower() or "rccl" in o["name"].lower())

    def busy(chosen: list[dict], ws: int, we: int) -> int:
        return sum(max(0, min(e, we) - max(s, ws)) for s, e in merge([(o["start"], o["end"]) for o in chosen]))

    out = {}
    for device in {o["device"] for o in ops}:
        mine = [o for o in ops if o["device"] == device]
        compute = [o for o in mine if o["kind"] == "kernel" and not comm(o)]
        with_comm = [o for o in mine if o["kind"] == "kernel"]
        for step, ws, we in wins:
            c, cc, a, m = (busy(x, ws, we) for x in (compute, with_comm, mine, [o for o in mine if comm(o)]))
            out[(step, device)] = (we - ws, c, cc - c, a - cc, we - ws - a, m, m - (cc - c))
    return out


UNLINKED_DEVICE = (*DEVICE, "mtia_ccp_events")  # MTIA's device events, which carry no correlation id here
OPS = ("cpu_op", "operator", "Operator")  # the categories of PyTorch's ops


def unlinked(events: list[dict], wins: list[tuple[int | None, int, int]]) -> dict[tuple[int | None, str], tuple[int, ...]]:
    """(step, device) -> busy ns in the window of the device events linked to no op, per reason:
    (no correlation id, no launch call carries it, its launch call is inside no op on its thread)."""
    calls = host_calls([e for e in events if e.get("cat") not in UNLINKED_DEVICE])
    ops: dict = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in OPS:
            ops[(e["pid"], e["tid"])].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0))))
    per: dict = defaultdict(lambda: ([], [], []))
    devices = set()
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in UNLINKED_DEVICE:
            continue
        a = e.get("args") or {}
        device, start = str(a.get("device", e["pid"])), _ns(e["ts"])
        devices.add(device)
        corr, interval = a.get("correlation"), (start, start + _ns(e.get("dur", 0)))
        if corr is None:
            per[device][0].append(interval)
        elif int(corr) not in calls:
            per[device][1].append(interval)
        else:
            call = calls[int(corr)]
            end = call["start"] + call["dur"]
            if not any(s <= call["start"] and end <= e_ for s, e_ in ops[call["thread"]]):
                per[device][2].append(interval)
    out = {}
    for device in devices:
        for step, ws, we in wins:
            out[(step, device)] = tuple(sum(max(0, min(e, we) - max(s, ws)) for s, e in merge(x))
                                        for x in per[device])
    return out

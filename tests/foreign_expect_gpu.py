"""Expected facts about Kineto GPU traces (and memory outside ops), from the raw JSON with Python's own
``json`` and ``gzip`` only, independently of tfprof's readers (as tests/foreign_expect.py does for the rest).

``kineto_gpu_expect`` links each GPU event (kernel, memcpy, memset) to the runtime call with the same
``correlation`` arg and that call to the innermost framework op around it on its thread, by a plain
stack walk per thread; ``kineto_cpu_self_ns`` gives each op type's self time; ``kineto_memory_outside_ops``
the ``[memory]`` instants no op holds. Durations are integer ns.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from foreign_expect import MEMORY_EVENT, STEP_PREFIX, _ns, load_trace_events, subtract_children

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset",  # Memcpy & co: PyTorch 1.8
                  "mtia_ccp_events")  # Meta's MTIA
MTIA_MARKS = ("event_record", "event_wait")  # MTIA stream events that are no work
CPU_OP_CATEGORIES = ("cpu_op", "Operator")


def _thread(e: dict) -> tuple[str, str]:
    return str(e.get("pid")), str(e.get("tid"))


def _cpu_ops(events: list[dict]) -> list[dict]:
    """The framework ops: ``cpu_op``/``Operator`` spans, not the ``ProfilerStep#N`` markers."""
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in CPU_OP_CATEGORIES
            and not e["name"].startswith(STEP_PREFIX)]


def _innermost_ops(ops: list[dict], probes: list[dict]) -> list[dict | None]:
    """For each span of ``probes``, the innermost op of ``ops`` on its thread that holds it in time
    (None: none), by a stack walk per thread over (start, longest first), ops before probes."""
    found: list[dict | None] = [None] * len(probes)
    by_thread: dict[tuple, list] = defaultdict(list)
    for e in ops:
        by_thread[_thread(e)].append((_ns(e["ts"]), -(_ns(e["ts"]) + _ns(e.get("dur", 0))), 0, -1, e))
    for i, e in enumerate(probes):
        by_thread[_thread(e)].append((_ns(e["ts"]), -(_ns(e["ts"]) + _ns(e.get("dur", 0))), 1, i, e))
    for items in by_thread.values():
        items.sort(key=lambda t: t[:4])
        stack: list[tuple[int, int, dict]] = []
        for start, neg_end, is_probe, i, e in items:
            while stack and not (stack[-1][0] <= start and -neg_end <= stack[-1][1]):
                stack.pop()
            if is_probe:
                found[i] = stack[-1][2] if stack else None
            else:
                stack.append((start, -neg_end, e))
    return found


def kineto_gpu_expect(path: str | Path) -> dict:
    """Facts of a Kineto GPU trace: each GPU event (kernel, memcpy, memset) linked through its
    ``correlation`` arg to the runtime/driver call with the same one, and that call to the
    innermost framework op around it on its thread. Durations in integer ns."""
    _, events = load_trace_events(path)
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES
           and not (e.get("cat") == "mtia_ccp_events" and e.get("name") in MTIA_MARKS)]
    launches: dict[int, dict] = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        cat = (e.get("cat") or "").lower()
        if e.get("ph") == "X" and corr is not None and ("runtime" in cat or "driver" in cat):
            launches.setdefault(corr, e)
    calls = [launches.get((g.get("args") or {}).get("correlation")) for g in gpu]
    ops = _cpu_ops(events)
    holders = _innermost_ops(ops, [c for c in calls if c is not None])
    holder = iter(holders)
    op_of = [next(holder) if c is not None else None for c in calls]
    names = {(e.get("pid"), e.get("tid")): (e.get("args") or {}).get("name")
             for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    per_op: Counter = Counter()
    per_unlinked: Counter = Counter()
    per_stream: Counter = Counter()
    per_kind: Counter = Counter()
    by_op_kernel: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    unlinked = 0
    for g, op in zip(gpu, op_of):
        args = g.get("args") or {}
        ns = _ns(g["dur"])
        # the stream Kineto records, else the thread's name (an MTIA `DMA_REQUEST` thread), else its id
        stream = args.get("stream", names.get((g.get("pid"), g.get("tid")), g.get("tid")))
        per_stream[(f"/device:gpu:{args.get('device', g.get('pid'))}", str(stream))] += ns
        per_kind[_gpu_kind(g)] += 1
        if op is None:
            unlinked += 1
            per_unlinked[g["name"]] += ns
        else:
            per_op[op["name"]] += ns
            acc = by_op_kernel[(op["name"], g["name"])]
            acc[0] += 1
            acc[1] += ns
    return {
        "gpu_events": len(gpu),
        "unlinked": unlinked,
        "accelerator_ns_by_op": dict(per_op),  # op name -> GPU ns of the events it launched
        "unlinked_ns_by_name": dict(per_unlinked),  # GPU event name -> ns, of the events no op launched
        "by_op_kernel": {k: tuple(v) for k, v in by_op_kernel.items()},  # (op name, GPU event name) -> (runs, ns)
        "ns_by_stream": dict(per_stream),  # (device, stream) -> ns
        "count_by_kind": dict(per_kind),
        "gpu_ns": sum(_ns(g["dur"]) for g in gpu),
        "steps": _steps_with_ops(events),
    }


def _steps_with_ops(events: list[dict]) -> list[int]:
    """The N of each ``ProfilerStep#N`` span on a host thread that holds the start of some
    framework op (a GPU-side copy of the marker, or a marker recorded after the last op, is no
    step of its own)."""
    starts = sorted(_ns(e["ts"]) for e in _cpu_ops(events))
    found = set()
    for e in events:
        if e.get("ph") == "X" and e.get("name", "").startswith(STEP_PREFIX) and e.get("cat") != "gpu_user_annotation":
            lo, hi = _ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0))
            if any(lo <= t <= hi for t in starts):
                found.add(int(e["name"][len(STEP_PREFIX):]))
    return sorted(found)


def _gpu_kind(e: dict) -> str:
    """The kind of a GPU event, from Kineto's category and name."""
    cat, name = e.get("cat", "").lower(), e["name"]
    if "memset" in cat:
        return "memset"
    if cat == "mtia_ccp_events" and name == "dma_request":  # the direction is an arg: HOST_TO_DEVICE
        way = str((e.get("args") or {}).get("direction", ""))
        return {"HOST_TO_DEVICE": "memcpy_htod", "DEVICE_TO_HOST": "memcpy_dtoh",
                "DEVICE_TO_DEVICE": "memcpy_dtod"}.get(way, "memcpy_other")
    if "memcpy" in cat:
        for word, kind in (("HtoD", "memcpy_htod"), ("DtoH", "memcpy_dtoh"), ("DtoD", "memcpy_dtod")):
            if word in name:
                return kind
        return "memcpy_other"
    return "communication" if "nccl" in name.lower() or "rccl" in name.lower() else "compute"


def kineto_cpu_self_ns(path: str | Path) -> dict[str, int]:
    """Op name -> the summed self time (ns) of the framework ops of a trace: each op's span less
    the spans of the ops directly inside it, by a stack walk per thread."""
    _, events = load_trace_events(path)
    by_thread: dict[tuple, list] = defaultdict(list)
    for e in _cpu_ops(events):
        start = _ns(e["ts"])
        by_thread[_thread(e)].append([start, start + _ns(e["dur"]), e["name"], _ns(e["dur"])])
    out: Counter = Counter()
    for spans in by_thread.values():
        for _, _, name, self_ns in subtract_children(spans):
            out[name] += max(self_ns, 0)
    return dict(out)


def kineto_memory_outside_ops(path: str | Path) -> dict:
    """The ``[memory]`` instants that no framework op holds (per thread, by time): how many, and
    the bytes they allocate and free."""
    _, events = load_trace_events(path)
    memory = [{**e, "dur": 0} for e in events if e.get("name") == MEMORY_EVENT]
    holders = _innermost_ops(_cpu_ops(events), memory)
    outside = [int(e["args"]["Bytes"]) for e, op in zip(memory, holders) if op is None]
    return {"count": len(outside), "alloc_bytes": sum(b for b in outside if b > 0),
            "free_bytes": -sum(b for b in outside if b < 0)}


def kineto_allocator_memory(path: str | Path) -> dict[str, tuple[int, int, int, int]]:
    """Per allocator (``cpu``, ``cuda:N``: the instant's ``Device Type`` and ``Device Id``), over the
    op executions holding ``[memory]`` instants (innermost op on the thread, by time): (executions,
    bytes allocated, the sum of each execution's peak: the highest running sum of its instants on
    that allocator in file order, at least 0, and the sum of what each kept: its net bytes, at least 0)."""
    _, events = load_trace_events(path)
    memory = [{**e, "dur": 0} for e in events if e.get("name") == MEMORY_EVENT]
    running: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0, 0])  # (op, allocator) -> sum, peak, total
    for e, op in zip(memory, _innermost_ops(_cpu_ops(events), memory), strict=True):
        if op is None:
            continue
        kind = int(e["args"]["Device Type"])
        allocator = "cpu" if kind == 0 else f"{'cuda' if kind == 1 else kind}:{e['args']['Device Id']}"
        acc = running[(id(op), allocator)]
        size = int(e["args"]["Bytes"])
        acc[0] += size
        acc[1] = max(acc[1], acc[0])
        acc[2] += max(size, 0)
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for (_, allocator), (net, peak, total) in running.items():
        acc = out[allocator]
        acc[0] += 1
        acc[1] += total
        acc[2] += peak
        acc[3] += max(net, 0)
    return {k: tuple(v) for k, v in out.items()}


def xspace_hlo_kernels(path: str | Path) -> dict:
    """Facts of an XSpace from a JAX GPU run, from the protobuf runtime and ``hlo_op_names``' own
    walk of the HLO protos: each event of a ``/device:GPU:N`` plane that carries a ``correlation_id``
    is a GPU event; the HLO instruction it ran is the one its ``hlo_op`` stat names in its program
    (``<hlo_module>(<program_id>)``), else, when that stat names a command buffer, the instruction
    whose name with each ``.`` as ``_`` is the kernel's name. Its node path: the instruction's
    ``op_name`` (first of a ``;`` list) then the instruction. Durations in integer ns."""
    from foreign_expect import _plain_stats, hlo_op_names, load_xspace

    space = load_xspace(path)
    programs: dict[str, dict[str, tuple[str, str]]] = {}
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for meta in plane.event_metadata.values():
            for s in meta.stats:
                if names.get(s.metadata_id) == "Hlo Proto":
                    programs[meta.name] = {i: v for comp in hlo_op_names(s.bytes_value).values() for i, v in comp.items()}
    per_path: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    opcode: dict[str, str] = {}
    events = unresolved = 0
    for plane in space.planes:
        if not plane.name.startswith("/device:GPU:"):
            continue
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for line in plane.lines:
            for e in line.events:
                meta = plane.event_metadata[e.metadata_id]
                stats = _plain_stats((*meta.stats, *e.stats), names)
                if stats.get("correlation_id") is None:
                    continue
                events += 1
                program = programs.get(f"{stats.get('hlo_module')}({stats.get('program_id')})", {})
                instr = stats.get("hlo_op") if stats.get("hlo_op") in program else next(
                    (i for i in program if i.replace(".", "_") == meta.name), None)
                if instr is None:
                    unresolved += 1
                    continue
                kind, op_name = program[instr]
                scope = op_name.split(";")[0]
                path = f"{scope}/{instr}" if scope else instr
                per_path[path][0] += 1
                per_path[path][1] += (e.duration_ps + 500) // 1000
                opcode[path] = kind
    return {"gpu_events": events, "unresolved": unresolved,
            "by_path": {k: tuple(v) for k, v in per_path.items()},  # node path -> (kernels, ns)
            "opcode": opcode}

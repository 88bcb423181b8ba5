"""Cut one profiler step out of a Kineto GPU trace, keeping every event its GPU attribution needs.

Usage: python tools/slice_kineto_gpu.py SOURCE OUT --step 'ProfilerStep#N' [--ms MS] [--used-metadata]

SOURCE is a Kineto Chrome trace (plain or gzip); OUT is written as gzip (no name, time stamp 0,
so the same input gives the same bytes). Only Python's ``json`` and ``gzip`` are used.

What is kept, from the window [start, end] of the step's ``ProfilerStep#N`` span:

- every metadata (``M``) event;
- every host event (not a kernel, memcpy or memset, not a launch flow) whose ``ts`` lies in the
  window: ops, runtime calls, annotations, ``[memory]`` instants, forward/backward flows;
- every GPU event (``kernel``/``gpu_memcpy``/``gpu_memset``, PyTorch 1.8's ``Kernel``/``Memcpy``/
  ``Memset``) whose ``correlation`` is that of a kept runtime call, wherever it ran (a kernel
  launched late in the step may run after it ends), and the launch flows (``ac2g``, 1.8's
  ``async``) whose id is such a correlation.

So each kept GPU event keeps its launch call and the ops around that call, and a GPU event
launched in another step is not kept. A GPU event that carries no correlation (an MTIA
``dma_request``) is kept when its ``ts`` lies in the window.

``--ms MS`` ends the window MS milliseconds after the step's start (a long step's first part);
``--used-metadata`` keeps only the ``M`` events of the processes and threads kept events are on,
each once (an MTIA capture names some 62,000 device threads, most of them empty, and repeats its
device's process name for each). The top-level object is kept as it is, but its events.
tests/fixtures/foreign/README.md lists the fixtures made with it and the commands.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events"}
LAUNCH_FLOWS = {"ac2g", "async"}


def _ns(us) -> int:
    return round(float(us) * 1000)


def slice_step(doc: dict, step: str, ms: float | None = None, used_metadata: bool = False) -> dict:
    """``doc`` (a Kineto trace object) with only the events of step ``step`` (see the module doc)."""
    events = doc["traceEvents"]
    (mark,) = [e for e in events if e.get("ph") == "X" and e.get("name") == step]
    start, end = _ns(mark["ts"]), _ns(mark["ts"]) + _ns(mark["dur"])
    if ms is not None:
        end = min(end, start + round(ms * 1_000_000))

    def launch_flow(e: dict) -> bool:
        return e.get("ph") in ("s", "f", "t") and e.get("cat") in LAUNCH_FLOWS

    def host(e: dict) -> bool:
        return e.get("cat") not in GPU_CATEGORIES and not launch_flow(e)

    kept_host = [e for e in events if e.get("ph") != "M" and host(e) and "ts" in e and start <= _ns(e["ts"]) <= end]
    launched = {(e.get("args") or {}).get("correlation") for e in kept_host if e.get("ph") == "X"} - {None}
    kept = {id(e) for e in kept_host}
    out = []
    for e in events:
        if e.get("ph") == "M" or id(e) in kept:
            out.append(e)
        elif e.get("cat") in GPU_CATEGORIES and (e.get("args") or {}).get("correlation") in launched:
            out.append(e)
        elif (e.get("cat") in GPU_CATEGORIES and (e.get("args") or {}).get("correlation") is None
              and start <= _ns(e["ts"]) <= end):
            out.append(e)
        elif launch_flow(e) and e.get("id") in launched:
            out.append(e)
    if used_metadata:
        threads = {(e.get("pid"), e.get("tid")) for e in out if e.get("ph") != "M"}
        pids = {pid for pid, _ in threads}
        seen: set[str] = set()
        kept_out = []
        for e in out:
            if e.get("ph") == "M":
                on = (e.get("pid"), e.get("tid")) in threads if e.get("name", "").startswith("thread_") \
                    else e.get("pid") in pids
                text = json.dumps(e, sort_keys=True)
                if not on or text in seen:  # (a process's name is repeated once per thread)
                    continue
                seen.add(text)
            kept_out.append(e)
        out = kept_out
    return {**doc, "traceEvents": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--step", required=True, help="the step span's name, e.g. ProfilerStep#6")
    parser.add_argument("--ms", type=float, help="end the window this many ms after the step's start")
    parser.add_argument("--used-metadata", action="store_true",
                        help="keep only the M events of the processes and threads of kept events")
    args = parser.parse_args()
    raw = args.source.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    sliced = slice_step(doc, args.step, args.ms, args.used_metadata)
    text = json.dumps(sliced, separators=(",", ":")).encode()
    args.out.write_bytes(gzip.compress(text, compresslevel=9, mtime=0))
    print(f"{args.out}: {len(sliced['traceEvents']):,} of {len(doc['traceEvents']):,} events, "
          f"{args.out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()

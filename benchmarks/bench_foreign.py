"""Time the foreign-profile readers (docs/FOREIGN.md) on scaled-up copies of the committed captures.

    python benchmarks/bench_foreign.py            # Kineto CNN x100 (~52 MB), XSpace TF2 x300 (~7.5 MB), JAX x300
    python benchmarks/bench_foreign.py --quick    # x10 / x30 copies, for CI (< 30 s)
    python benchmarks/bench_foreign.py --kineto-copies 20 --xspace-copies 50

The scaled inputs are built from tests/fixtures/foreign/ (written once per size under the temp
directory and reused): a Kineto trace gets its events (not the ``M`` metadata) copied N times,
each copy shifted by the span of the whole trace, with ``ProfilerStep#K`` renumbered and flow ids
made unique per copy; an XSpace gets each line's events copied N times, each copy shifted by the
line's span, so the copies never overlap. Each input is read once to load (or compile) the numba
kernels, then timed ``--repeat`` times through ``tfprof.ingest.foreign.read`` (the whole ingest:
parse, classification, nesting, every table, validation); the best run is reported as seconds,
MB/s of the file and events/s of the trace. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "foreign"
os.environ.setdefault("TFPROF_ENGINE", "kernels")


def _kineto_scaled(source: Path, copies: int, out: Path) -> int:
    """Write ``source``'s trace with its events copied ``copies`` times; returns the event count."""
    raw = source.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M"]
    start = min(float(e["ts"]) for e in timed if "ts" in e)
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed if "ts" in e) - start + 1.0
    steps = sorted({int(e["name"].split("#")[1]) for e in timed if e.get("name", "").startswith("ProfilerStep#")})
    scaled = list(meta)
    for k in range(copies):
        for e in timed:
            c = dict(e)
            if "ts" in c:
                c["ts"] = round(float(c["ts"]) + k * span, 3)
            if c.get("name", "").startswith("ProfilerStep#"):
                c["name"] = f"ProfilerStep#{int(c['name'].split('#')[1]) + k * len(steps)}"
            if c.get("ph") in ("s", "f", "t") and "id" in c:
                c["id"] = f"{c['id']}.{k}"
            scaled.append(c)
    doc["traceEvents"] = scaled
    out.write_text(json.dumps(doc))
    return len(scaled)


def _xspace_scaled(source: Path, copies: int, out: Path) -> int:
    """Write ``source``'s XSpace with each line's events copied ``copies`` times; returns the event count."""
    from tfprof.schema.proto import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(source.read_bytes())
    total = 0
    for plane in space.planes:
        for line in plane.lines:
            events = list(line.events)
            if not events:
                continue
            span = max(e.offset_ps + e.duration_ps for e in events) + 1_000_000
            for k in range(1, copies):
                for e in events:
                    c = line.events.add()
                    c.CopyFrom(e)
                    c.offset_ps = e.offset_ps + k * span
            total += len(line.events)
    out.write_bytes(space.SerializeToString())
    return total


def scaled_copy(name: str, copies: int, cache: Path | None = None) -> Path:
    """The fixture ``name`` of tests/fixtures/foreign/ scaled ``copies`` times (Kineto or XSpace by
    its suffix), written once under ``cache`` (the temp directory's tfprof-bench-foreign by default)
    and reused; a file appears whole or not at all."""
    kineto = ".json" in name
    cache = cache or Path(tempfile.gettempdir()) / "tfprof-bench-foreign"
    cache.mkdir(exist_ok=True)
    out = cache / f"{name.split('.')[0]}-x{copies}.{'json' if kineto else 'xplane.pb'}"
    if not out.exists():
        print(f"writing {out} ...", file=sys.stderr, flush=True)
        tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
        (_kineto_scaled if kineto else _xspace_scaled)(FIXTURES / name, copies, tmp)
        tmp.rename(out)
    return out


def _time(path: Path, kind: str, repeat: int) -> float:
    from tfprof.ingest import foreign

    foreign.read(path, kind)  # load (or compile) the kernels, warm the file cache
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        foreign.read(path, kind)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small copies (x10 Kineto, x30 XSpace), one timed run")
    p.add_argument("--kineto-copies", type=int, default=None)
    p.add_argument("--xspace-copies", type=int, default=None)
    p.add_argument("--repeat", type=int, default=None)
    args = p.parse_args(argv)
    kc = args.kineto_copies or (10 if args.quick else 100)
    xc = args.xspace_copies or (30 if args.quick else 300)
    repeat = args.repeat or (1 if args.quick else 3)
    cache = Path(tempfile.gettempdir()) / "tfprof-bench-foreign"
    cache.mkdir(exist_ok=True)
    inputs = [
        ("kineto", "torch_cnn.pt.trace.json", kc, _kineto_scaled),
        ("kineto", "torch_transformer.pt.trace.json.gz", kc, _kineto_scaled),
        ("xspace", "tf2_keras.xplane.pb", xc, _xspace_scaled),
        ("xspace", "jax_mlp.xplane.pb", xc, _xspace_scaled),
    ]
    print("| input | copies | MB | events | seconds | MB/s | events/s |\n|---|---|---|---|---|---|---|")
    for kind, name, copies, make in inputs:
        out = cache / f"{name.split('.')[0]}-x{copies}.{'json' if kind == 'kineto' else 'xplane.pb'}"
        count_file = out.with_suffix(out.suffix + ".events")
        if not out.exists() or not count_file.exists():
            count_file.write_text(str(make(FIXTURES / name, copies, out)))
        events = int(count_file.read_text())
        seconds = _time(out, kind, repeat)
        mb = out.stat().st_size / 1e6
        print(f"| {out.name} | {copies} | {mb:.1f} | {events:,} | {seconds:.2f} | {mb / seconds:.0f} | "
              f"{events / seconds:,.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

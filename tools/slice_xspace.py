"""Cut a small test fixture out of a large XSpace: some planes, the events of one time window.

    python tools/slice_xspace.py SRC DST --plane /host:CPU --plane /device:GPU:4 --ms 4

The window starts at the first kernel (an event on a ``Compute`` stream line) of the first GPU plane
kept that carries a ``correlation_id`` whose launch (a host event with the same ``correlation_id``) is kept too, and lasts ``--ms``
milliseconds. Only the protobuf runtime is used (tfprof's vendored ``xplane_pb2``, the message
layout): planes keep their id, name, stats and every line (id, name, start), each line keeps the
events that lie wholly inside the window, each plane keeps the event metadata those events use and
the stat metadata that its stats name or point at (``ref_value``). The other planes are dropped.
tests/fixtures/foreign/README.md says which fixture was made with which arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tfprof.schema.proto import xplane_pb2  # noqa: E402


def _abs_ps(line, event) -> tuple[int, int]:
    start = line.timestamp_ns * 1000 + event.offset_ps
    return start, start + event.duration_ps


def _window(space: xplane_pb2.XSpace, width_ps: int) -> tuple[int, int]:
    names = [{k: m.name for k, m in p.stat_metadata.items()} for p in space.planes]
    launched = set()
    for p, plane in enumerate(space.planes):
        if plane.name.startswith("/device:"):
            continue
        for line in plane.lines:
            for e in line.events:
                launched.update(s.int64_value or s.uint64_value for s in e.stats
                                if names[p].get(s.metadata_id) == "correlation_id")
    for p, plane in enumerate(space.planes):
        if not plane.name.startswith("/device:GPU"):
            continue
        starts = [_abs_ps(line, e)[0] for line in plane.lines if "Compute" in line.name for e in line.events
                  if any(names[p].get(s.metadata_id) == "correlation_id" and (s.int64_value or s.uint64_value) in launched
                         for s in e.stats)]
        if starts:
            return min(starts), min(starts) + width_ps
    raise SystemExit("no GPU event with a launch on the host among the planes kept")


def slice_space(space: xplane_pb2.XSpace, planes: list[str], width_ps: int) -> xplane_pb2.XSpace:
    """The planes named ``planes`` of ``space``, each line cut to the window (see the module doc)."""
    kept = xplane_pb2.XSpace()
    kept.hostnames.extend(space.hostnames)
    for plane in space.planes:
        if plane.name in planes:
            kept.planes.add().CopyFrom(plane)
    begin, end = _window(kept, width_ps)
    for plane in kept.planes:
        used = set()
        for line in plane.lines:
            inside = [e for e in line.events if begin <= _abs_ps(line, e)[0] and _abs_ps(line, e)[1] <= end]
            del line.events[:]
            line.events.extend(inside)
            used.update(e.metadata_id for e in inside)
        for key in [k for k in plane.event_metadata if k not in used]:
            del plane.event_metadata[key]
        stats = [*plane.stats, *(s for m in plane.event_metadata.values() for s in m.stats),
                 *(s for line in plane.lines for e in line.events for s in e.stats)]
        named = {s.metadata_id for s in stats} | {s.ref_value for s in stats if s.WhichOneof("value") == "ref_value"}
        for key in [k for k in plane.stat_metadata if k not in named]:
            del plane.stat_metadata[key]
    return kept


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--plane", action="append", required=True, help="a plane to keep (repeat)")
    ap.add_argument("--ms", type=float, default=4.0, help="length of the time window in milliseconds")
    args = ap.parse_args(argv)
    space = xplane_pb2.XSpace()
    space.ParseFromString(args.src.read_bytes())
    out = slice_space(space, args.plane, int(args.ms * 1e9))
    args.dst.write_bytes(out.SerializeToString(deterministic=True))
    events = sum(len(line.events) for p in out.planes for line in p.lines)
    print(f"{args.dst}: {args.dst.stat().st_size:,} bytes, {len(out.planes)} planes, {events:,} events")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

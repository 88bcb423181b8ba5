"""Time the protos tfprof writes: the ProfileProto both ways, and the view protos.

    python benchmarks/bench_proto.py                    # the fixtures, then 70,000 nodes x 50 steps
    python benchmarks/bench_proto.py --quick            # the fixtures, then 2,000 nodes x 3 steps
    python benchmarks/bench_proto.py --profile /tmp/synth_70k_50.pb --repeat 1

ProfileProto (``Profiler.serialize_to_string``), from the tables in memory: our columnar encoder
(``tfprof.views.profile_proto``, numba kernels) against protobuf's runtime
(``tfprof.views.profile_proto_ref``: the message built with the generated classes, then
``SerializeToString(deterministic=True)``). Medians of ``--repeat`` runs (the runtime:
``--runtime-repeat``), after one unmeasured run of the encoder (numba's start). On the fixtures
it also checks that both give the same message. The view protos (GraphNodeProto of scope and
graph, MultiGraphNodeProto of op and code; ``ViewResult.proto``) have no hand encoder: they are
built with the runtime, timed once per view after the view itself. Options: tfprof's defaults
(max_depth 10) with select micros, bytes, params. Prints Markdown tables; fails only on errors
or a mismatch, never on timing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# These benchmarks time the compiled kernels (tfprof.kernels), whatever the state of numba's
# cache; child processes inherit the setting.
os.environ.setdefault("TFPROF_ENGINE", "kernels")
sys.path.insert(0, str(ROOT))

import tfprof
from tfprof.errors import OptionError
from tfprof.schema.proto import tfprof_log_pb2
from tfprof.views.profile_proto import TABLES_WRITTEN, profile_proto_bytes
from tfprof.views.profile_proto_ref import reference_message

FIXTURES = ("cnn", "rnn", "multistep", "gpu_tiny")
VIEWS = ("scope", "graph", "op", "code")


def _median_time(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def profile_proto_row(name: str, prof, repeat: int, runtime_repeat: int, check: bool) -> tuple:
    """(case, nodes, MB, encoder s, runtime build s, runtime serialize s, ratio, same message)."""
    tables = {t: prof.table(t) for t in TABLES_WRITTEN}
    profile_proto_bytes(tables)  # numba's start
    ours_s, ours = _median_time(lambda: profile_proto_bytes(tables), repeat)
    build_s, message = _median_time(lambda: reference_message(tables), runtime_repeat)
    ser_s, size = _median_time(lambda: len(message.SerializeToString(deterministic=True)), runtime_repeat)
    if size != len(ours):
        raise SystemExit(f"{name}: the runtime wrote {size} bytes, the encoder {len(ours)}")
    same = "–"
    if check:
        if tfprof_log_pb2.ProfileProto.FromString(ours) != message:
            raise SystemExit(f"{name}: the encoder's message differs from the runtime's")
        same = "yes"
    total = build_s + ser_s
    return (name, tables["nodes"].num_rows, len(ours) / 1e6, ours_s, build_s, ser_s, total / ours_s, same)


def view_proto_rows(name: str, prof) -> list[tuple]:
    """(case, view, view s, proto s, proto messages) per view that the profile has."""
    from tfprof.api import run_view

    rows = []
    opts = {"max_depth": 10, "select": ["micros", "bytes", "params"]}
    for cmd in VIEWS:
        try:
            view_s, result = _median_time(lambda c=cmd: run_view(prof, c, opts), 1)
        except OptionError:  # the code view of a profile without code traces
            continue
        proto_s, proto = _median_time(lambda r=result: r.proto, 1)
        rows.append((name, cmd, view_s, proto_s, _count(proto)))
    return rows


def _count(msg) -> int:
    """Messages in a view proto's tree (children, and graph nodes of a multi node)."""
    if msg is None:
        return 0
    return 1 + sum(_count(c) for c in msg.children) + len(getattr(msg, "graph_nodes", ()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=70_000)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--profile", type=Path, help="a synthetic ProfileProto to reuse instead of generating one")
    ap.add_argument("--quick", action="store_true", help="small size for CI (2,000 nodes x 3 steps)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of the encoder per case (median)")
    ap.add_argument("--runtime-repeat", type=int, default=1, help="runs of the runtime per case (median)")
    ap.add_argument("--no-views", action="store_true", help="only the ProfileProto")
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes, args.steps = 2_000, 3
    synth = args.profile
    if synth is None:
        synth = Path(tempfile.mkdtemp(prefix="tfprof-bench-proto-")) / f"synth_{args.nodes}_{args.steps}.pb"
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "synth.py"), "--nodes", str(args.nodes),
             "--steps", str(args.steps), "--out", str(synth)],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
    cases = [(f, ROOT / "tests" / "fixtures" / f / "profile.pb", True) for f in FIXTURES]
    cases.append((f"synthetic {synth.name}", synth, args.quick))
    proto_rows, view_rows = [], []
    for name, path, check in cases:
        prof = tfprof.load(path)
        proto_rows.append(profile_proto_row(name, prof, args.repeat, args.runtime_repeat, check))
        if not args.no_views:
            view_rows += view_proto_rows(name, prof)
        del prof

    print("\nProfileProto from the tables in memory: columnar encoder vs protobuf runtime (median seconds)\n")
    print("| profile | nodes | MB | encoder s | runtime: build s | runtime: serialize s | runtime / encoder "
          "| same message |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, nodes, mb, ours, build, ser, ratio, same in proto_rows:
        print(f"| {name} | {nodes:,} | {mb:.1f} | {ours:.4f} | {build:.4f} | {ser:.4f} | {ratio:.1f}× | {same} |")
    if view_rows:
        print("\nView protos (protobuf runtime only), after the view\n")
        print("| profile | view | view s | proto s | proto messages |")
        print("|---|---|---:|---:|---:|")
        for name, cmd, view_s, proto_s, count in view_rows:
            print(f"| {name} | {cmd} | {view_s:.3f} | {proto_s:.3f} | {count:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

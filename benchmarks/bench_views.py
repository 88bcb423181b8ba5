"""Time the four views on a synthetic profile opened from a Parquet store.

    python benchmarks/bench_views.py                    # 70,000 nodes x 50 steps
    python benchmarks/bench_views.py --nodes 2000 --steps 3 --quick

For each view: the query on a freshly opened store (reads the columns it needs and builds the
profile's static frames), the same query again on that profile (cached frames), and query plus
text report. Numba's one-time start in a process (~0.35 s, paid by the first compiled kernel
of any view) is measured separately, before the views. Options: tfprof's command-line defaults (max_depth 10, select micros)
plus bytes and params. Prints a Markdown table; fails only on errors, never on timing.
"""

from __future__ import annotations

import argparse
import os
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

from tfprof import Profile  # noqa: E402
from tfprof.api import (
    ingest_to_store,  # noqa: E402
    run_view,  # noqa: E402
)
from tfprof.queries.code import code  # noqa: E402
from tfprof.queries.graph import graph  # noqa: E402
from tfprof.queries.op import op_view  # noqa: E402
from tfprof.queries.options import Options  # noqa: E402
from tfprof.queries.scope import scope  # noqa: E402

QUERIES = {"scope": scope, "graph": graph, "op": op_view, "code": code}


def _timed(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=70_000)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--store", type=Path, help="reuse this store instead of generating one")
    ap.add_argument("--quick", action="store_true", help="small size for CI (2,000 nodes x 3 steps)")
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes, args.steps = 2_000, 3
    with tempfile.TemporaryDirectory(prefix="tfprof-bench-views-") as tmp:  # the generated store goes with it
        _run(args, Path(tmp))
    return 0


def _run(args: argparse.Namespace, work: Path) -> None:
    store = args.store
    if store is None:
        pb = work / f"synth_{args.nodes}_{args.steps}.pb"
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "synth.py"), "--nodes", str(args.nodes),
             "--steps", str(args.steps), "--out", str(pb)],
            check=True, stdout=subprocess.DEVNULL,
        )
        store = work / "store"
        ingest_to_store(store, profile_path=pb)
    opts = Options(max_depth=10, select=("micros", "bytes", "params"))
    from tfprof.api import warm_up

    numba_start, _ = _timed(warm_up)
    rows = []
    for cmd, query in QUERIES.items():
        prof = Profile.open(store)  # nothing read or cached yet
        first, _ = _timed(lambda: query(prof, opts))
        again, _ = _timed(lambda: query(prof, opts))
        report, result = _timed(lambda: run_view(prof, cmd, opts))
        lines = result.text.count("\n")
        rows.append((cmd, first, again, report, lines))
    counts = Profile.open(store).row_counts()
    print(f"\nViews on {counts['nodes']:,} nodes x {counts['steps']} steps ({counts['execs']:,} exec records)\n")
    print(f"numba start (once per process): {numba_start:.3f} s\n")
    print("| view | query, fresh store (s) | query again (s) | query + text report (s) | report lines |")
    print("|---|---|---|---|---|")
    for cmd, first, again, report, lines in rows:
        print(f"| {cmd} | {first:.3f} | {again:.3f} | {report:.3f} | {lines:,} |")


if __name__ == "__main__":
    sys.exit(main())

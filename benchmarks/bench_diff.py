"""Time ``tfprof diff`` of two synthetic profiles after both are ingested.

    python benchmarks/bench_diff.py                          # 705,000 nodes x 5 steps, seeds 1 and 2
    python benchmarks/bench_diff.py --nodes 70000 --quick    # smaller
    python benchmarks/bench_diff.py --stores A B             # reuse two stores

For each view: ``run_diff`` on freshly opened stores (the point diff: one view run per side,
the match on path keys, deltas and order; then with the noise band, whose per-step samples come
from the same engine pass), and the text report, made a block at a time as the command line
writes it. Options: max_depth 10000 (every row), select micros and params. Prints a Markdown
table; fails only on errors, never on timing.
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
os.environ.setdefault("TFPROF_ENGINE", "kernels")
sys.path.insert(0, str(ROOT))

from tfprof import Profile  # noqa: E402
from tfprof.api import ingest_to_store, warm_up  # noqa: E402
from tfprof.api.diff import run_diff  # noqa: E402


def _store(work: Path, nodes: int, steps: int, seed: int) -> Path:
    pb = work / f"synth_{nodes}_{steps}_{seed}.pb"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "synth.py"), "--nodes", str(nodes), "--steps",
                    str(steps), "--seed", str(seed), "--out", str(pb)], check=True, stdout=subprocess.DEVNULL)
    store = work / f"store_{seed}"
    ingest_to_store(store, profile_path=pb)
    pb.unlink()
    return store


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=705_000)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--stores", nargs=2, type=Path)
    ap.add_argument("--views", default="scope,graph,op,code")
    ap.add_argument("--quick", action="store_true", help="2,000 nodes x 3 steps")
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes, args.steps = 2_000, 3
    if args.stores:
        a_store, b_store = args.stores
    else:
        work = Path(tempfile.mkdtemp(prefix="tfprof-bench-diff-"))
        a_store, b_store = (_store(work, args.nodes, args.steps, seed) for seed in (1, 2))
    warm_up()
    opts = {"max_depth": 10_000, "select": ["micros", "params"]}
    rows = []
    for cmd in args.views.split(","):
        a, b = Profile.open(a_store), Profile.open(b_store)
        # each result is dropped once measured: two code diffs of 705k-node profiles (8M rows
        # each) held beside the banded run do not fit in 24 GB
        point, n = _timed(lambda: run_diff(a, b, cmd, opts, noise_band=False).frame.height)
        again, _ = _timed(lambda: run_diff(a, b, cmd, opts, noise_band=False).frame.height)
        band, banded = _timed(lambda: run_diff(a, b, cmd, opts))
        text, _ = _timed(lambda r=banded: sum(len(piece) for piece in r.text_blocks()))  # as the CLI writes it
        rows.append((cmd, point, again, band, text, n, banded.frame["significant"].sum()))
        del banded
    counts = Profile.open(a_store).row_counts()
    print(f"\ndiff of two {counts['nodes']:,}-node x {counts['steps']}-step profiles (stores {a_store}, {b_store})\n")
    print("| view | point diff, fresh stores s | again s | with noise band s | text s | rows | significant |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for cmd, point, again, band, text, n, sig in rows:
        print(f"| {cmd} | {point:.3f} | {again:.3f} | {band:.3f} | {text:.3f} | {n:,} | {sig:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

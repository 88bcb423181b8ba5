"""Time ``tfprof ranks`` on a synthetic distributed job (``synth_kineto.write_job``: one small
Kineto trace per rank, one straggler), read on one thread and on a thread per core.

    python benchmarks/bench_ranks.py --ranks 1024
    python benchmarks/bench_ranks.py --ranks 64 --quick

Each run is a fresh ``tfprof ranks DIR --table ranks --format csv`` process; prints seconds, the
process's peak memory (its RSS high-water mark) and whether the straggler was found, as a
Markdown table. Fails only on errors, never on timing.
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from synth_kineto import write_job  # noqa: E402

_CHILD = """
import resource, sys, tfprof
job = tfprof.ranks(sys.argv[1], workers=int(sys.argv[2]))
print(",".join(str(r) for r in job.ranks.filter("straggler")["rank"]))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="one thread per core only")
    args = ap.parse_args()
    straggler = args.ranks // 3
    with tempfile.TemporaryDirectory(prefix="bench_ranks_") as tmp:
        paths = write_job(tmp, args.ranks, steps=args.steps, straggler=straggler)
        size = sum(p.stat().st_size for p in paths)
        rows = []
        for workers in ([os.cpu_count() or 1] if args.quick else [1, os.cpu_count() or 1]):
            t = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", _CHILD, tmp, str(workers)], check=True, capture_output=True,
                                  text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            seconds = time.perf_counter() - t
            found, peak_kb = done.stdout.split()
            rows.append((workers, seconds, int(peak_kb) / 1024, found == str(straggler)))
    print(f"\n`tfprof ranks` on {args.ranks:,} ranks × {args.steps} steps ({size / 1e6:.1f} MB of traces)\n")
    print("| threads | seconds | ms per rank | peak MB | straggler found |\n|---:|---:|---:|---:|---|")
    for workers, seconds, peak, ok in rows:
        print(f"| {workers} | {seconds:.1f} | {1000 * seconds / args.ranks:.0f} | {peak:,.0f} | {'yes' if ok else 'NO'} |")


if __name__ == "__main__":
    main()

"""Make a catalog of N runs × M nodes from the synthetic generator, then time the same queries on
DuckDB (local, the default engine) and on Spark local mode: seconds and peak memory.

    python benchmarks/make_catalog.py --runs 10 --nodes 200000 --out /tmp/cat          # make it
    python benchmarks/make_catalog.py --out /tmp/cat --measure [--spark-python .venv-spark/bin/python]

Each run is ``synth.py --seed i`` (so runs differ) ingested with ``tfprof ingest --catalog``; the
synthetic ProfileProto is deleted once added (``--first K`` finishes a catalog cut short). The
one-run queries read ``run-003``. Each measurement is a separate ``tfprof`` process
(no resident server); its peak memory is the largest sum of RSS over the process and all its
descendants (Spark's JVM included), sampled every 50 ms from /proc.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

QUERIES = {
    "scope view, runs summed (--max_depth 3)": ["scope", "--catalog", "{cat}", "--runs", "{runs}", "--aggregate", "sum",
                                               "--max_depth", "3", "--select", "micros"],
    "SQL: time per run": ["sql", "select run, count(*) as n, sum(duration_micros) as us from execs group by run "
                                 "order by run", "--catalog", "{cat}"],
    "SQL: slowest op types over all runs": [
        "sql", "select n.op, avg(e.duration_micros) as mean_us, count(*) as n from execs e join nodes n on "
               "n.run = e.run and n.node_id = e.node_id group by n.op order by mean_us desc limit 10",
        "--catalog", "{cat}"],
    "SQL: one run's slowest op types (its partitions only)": [
        "sql", "select n.op, avg(e.duration_micros) as mean_us, count(*) as n from execs e join nodes n on "
               "n.run = e.run and n.node_id = e.node_id where e.run = 'run-003' and n.run = 'run-003' group by n.op "
               "order by mean_us desc limit 10", "--catalog", "{cat}"],
    "op view, runs summed": ["op", "--catalog", "{cat}", "--runs", "{runs}", "--aggregate", "sum", "--max_depth", "10",
                             "--select", "micros"],
    "code view, runs summed (--max_depth 4)": ["code", "--catalog", "{cat}", "--runs", "{runs}", "--aggregate", "sum",
                                              "--max_depth", "4", "--select", "micros"],
    "scope view of one run (--max_depth 3)": ["scope", "--catalog", "{cat}", "--run", "run-003", "--max_depth", "3",
                                              "--select", "micros"],
}


def _tree_rss(root: int) -> tuple[int, int]:
    """RSS in bytes of ``root`` and all its descendants, and of ``root`` alone (from /proc)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            parents[int(entry)] = int(fields[1])
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        kids = [p for p, pp in parents.items() if pp == pid and p not in tree]
        tree.update(kids)
        frontier += kids
    return sum(rss.get(p, 0) for p in tree), rss.get(root, 0)


def timed(cmd: list[str], env: dict) -> tuple[float, int, str, int]:
    """Run ``cmd``; (seconds, peak bytes of its process tree, stdout, peak bytes of its own
    process: the Python driver, without Spark's JVM)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak = [0, 0]

    def sample() -> None:
        while proc.poll() is None:
            tree, own = _tree_rss(proc.pid)
            peak[0], peak[1] = max(peak[0], tree), max(peak[1], own)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err.decode()[-2000:]}")
    return seconds, peak[0], out.decode(), peak[1]


def make(args, env: dict) -> None:
    per_run = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.first, args.runs):
            pb = Path(tmp) / f"run{i}.pb"
            subprocess.run([sys.executable, str(HERE / "synth.py"), "--nodes", str(args.nodes), "--steps",
                            str(args.steps), "--seed", str(i), "--out", str(pb)], check=True, env=env)
            seconds, peak, _, _ = timed([sys.executable, "-m", "tfprof", "ingest", "--catalog", str(args.out), "--run",
                                      f"run-{i:03d}", "--tag", f"seed={i}", str(pb)], env)
            per_run.append(seconds)
            print(f"added run-{i:03d}: {seconds:.1f} s, peak {peak / 2**20:,.0f} MiB", flush=True)
            pb.unlink()
    size = sum(f.stat().st_size for f in Path(args.out).rglob("*") if f.is_file())
    print(f"catalog {args.out}: {args.runs} runs x {args.nodes:,} nodes, {size / 2**20:,.0f} MiB on disk, "
          f"{sum(per_run) / max(len(per_run), 1):.1f} s per add")


def measure(args, env: dict) -> None:
    engines = [("duckdb (local)", sys.executable, [])]
    if args.spark_python:
        engines.append(("spark local[*]", args.spark_python, ["--engine", "spark"]))
    print("| query | engine | seconds | peak memory | Python's own peak |")
    print("| --- | --- | ---: | ---: | ---: |")
    for label, argv in QUERIES.items():
        if args.only and args.only not in label:
            continue
        outputs = {}
        for engine, python, extra in engines:
            cmd = [python, "-m", "tfprof", *[a.format(cat=args.out, runs=args.pattern) for a in argv], *extra]
            seconds, peak, out, own = timed(cmd, env)
            outputs[engine] = out
            print(f"| {label} | {engine} | {seconds:.1f} | {peak / 2**20:,.0f} MiB | {own / 2**20:,.0f} MiB |",
                  flush=True)
        if len(set(outputs.values())) != 1:
            raise SystemExit(f"{label}: the engines printed different results")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--first", type=int, default=0, help="start at run FIRST (to finish a catalog cut short)")
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--measure", action="store_true", help="time the queries on an existing catalog")
    ap.add_argument("--pattern", default="*", help="the runs the aggregated views read (a glob; default all)")
    ap.add_argument("--only", help="time only the queries whose label contains this (e.g. SQL, view)")
    ap.add_argument("--spark-python", help="a Python with pyspark (e.g. .venv-spark/bin/python) to time Spark too")
    args = ap.parse_args()
    env = {**os.environ, "TFPROF_SERVER": "0", "PYTHONPATH": str(HERE.parent)}
    if args.measure:
        measure(args, env)
    else:
        make(args, env)


if __name__ == "__main__":
    main()

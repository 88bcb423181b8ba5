"""Time (and measure the memory of) ingesting a large ProfileProto.

    python benchmarks/bench_ingest.py                  # 70,000 nodes x 50 steps (generated once, reused)
    python benchmarks/bench_ingest.py --quick          # 2,000 nodes x 3 steps, for CI (< 1 minute)
    python benchmarks/bench_ingest.py --profile FILE   # any ProfileProto

Every phase runs in a fresh Python process, which reports its own wall time and peak RSS
(``ru_maxrss``), so phases do not share warm caches or memory:

* ``protobuf parse``: ``ProfileProto.ParseFromString`` (what the reference decoder starts with);
* ``reference decode`` (``--with-reference``, always in ``--quick``): ``tables_from_message``;
* ``wire decode``: ``tfprof.ingest.wire`` scan + every batch, dropped as it comes (no output);
* ``wire -> parquet``: the same batches written by a plain per-table ``ParquetWriter`` loop;
* ``ingest_to_store``: the project's own store writer (``tfprof.store``), whatever decoder it uses;
* ``reopen store``: ``Profile.open`` of that store, row counts and the ``nodes`` table;
* ``numba compile (cold)`` / ``numba load (warm)``: the first decode in a process with an empty
  numba cache directory, then again with the cache it left.

Import time and numba's one-time start (the first compiled call in a process) are reported
inside the phases' notes. Prints a Markdown table; fails only when a phase fails.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# These benchmarks time the compiled kernels (tfprof.kernels), whatever the state of numba's
# cache; child processes inherit the setting.
os.environ.setdefault("TFPROF_ENGINE", "kernels")
SMALL = ROOT / "tests" / "fixtures" / "cnn" / "profile.pb"  # has code traces: every ingest kernel runs


# ----------------------------------------------------------------------------- phases (children)


def _phase_parse(profile: Path, out: Path) -> dict:
    t0 = time.perf_counter()
    from tfprof.schema.proto import tfprof_log_pb2

    t1 = time.perf_counter()
    data = profile.read_bytes()
    msg = tfprof_log_pb2.ProfileProto()
    msg.ParseFromString(data)
    t2 = time.perf_counter()
    execs = sum(len(n.execs) for n in msg.nodes.values())
    return {"wall": t2 - t1, "import": t1 - t0, "note": f"{len(msg.nodes)} nodes, {execs} node-steps"}


def _phase_reference(profile: Path, out: Path) -> dict:
    from tfprof.ingest.profile_proto import parse_profile, tables_from_message

    t = time.perf_counter()
    tables = tables_from_message(parse_profile(profile))
    return {"wall": time.perf_counter() - t, "note": f"{sum(t.num_rows for t in tables.values())} rows"}


def _phase_decode(profile: Path, out: Path) -> dict:
    t0 = time.perf_counter()
    from tfprof.ingest import wire

    t1 = time.perf_counter()
    reader = wire.ProfileReader(profile)
    reader.index  # the scan (and numba's start in this process)
    t2 = time.perf_counter()
    rows = batches = 0
    for batch in reader.batches():
        batches += 1
        rows += sum(t.num_rows for t in batch.values())
    rows += sum(t.num_rows for t in reader.profile_tables().values())
    t3 = time.perf_counter()
    return {"wall": t3 - t1, "import": t1 - t0, "scan": t2 - t1, "batches": t3 - t2,
            "note": f"{rows:,} rows in {batches} batches; scan (incl. numba start) {t2 - t1:.2f} s, "
                    f"batches {t3 - t2:.2f} s"}


def _phase_parquet(profile: Path, out: Path) -> dict:
    t0 = time.perf_counter()
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tfprof.ingest import wire
    from tfprof.schema import TABLES

    t1 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    writers: dict[str, pq.ParquetWriter] = {}

    def write(batch: dict[str, pa.Table]) -> None:
        for name, table in batch.items():
            w = writers.get(name)
            if w is None:
                schema = TABLES[name].schema
                # Dictionary encoding only where the column is a dictionary: trying it on every
                # int64 column doubles the writing time for nothing.
                dict_cols = [f.name for f in schema if pa.types.is_dictionary(f.type)]
                w = writers[name] = pq.ParquetWriter(out / f"{name}.parquet", schema, compression="lz4",
                                                     use_dictionary=dict_cols)
            w.write_table(table)

    reader = wire.ProfileReader(profile)
    for batch in reader.batches():
        write(batch)
    write(reader.profile_tables())
    for w in writers.values():
        w.close()
    t2 = time.perf_counter()
    size = sum(p.stat().st_size for p in out.glob("*.parquet"))
    return {"wall": t2 - t1, "import": t1 - t0, "note": f"{size / 1e6:.1f} MB of Parquet (lz4)"}


def _phase_store(profile: Path, out: Path) -> dict:
    t0 = time.perf_counter()
    from tfprof.api import ingest_to_store

    t1 = time.perf_counter()
    _, counts = ingest_to_store(out, profile_path=profile)
    t2 = time.perf_counter()
    size = sum(p.stat().st_size for p in out.glob("*.parquet"))
    return {"wall": t2 - t1, "import": t1 - t0, "note": f"{sum(counts.values()):,} rows, {size / 1e6:.1f} MB"}


def _phase_reopen(profile: Path, out: Path) -> dict:
    t0 = time.perf_counter()
    from tfprof import Profile

    t1 = time.perf_counter()
    prof = Profile.open(out)
    counts = prof.row_counts()
    t2 = time.perf_counter()
    prof.table("nodes")
    t3 = time.perf_counter()
    return {"wall": t2 - t1, "import": t1 - t0,
            "note": f"open + row counts ({counts['execs']:,} execs); reading `nodes` {t3 - t2:.3f} s more"}


def _phase_jit(profile: Path, out: Path) -> dict:
    """Ingest a small profile with code traces into a store: compiles (or loads) every kernel
    an ingest uses, the decoder's and the indexes' (code trie, layout)."""
    t0 = time.perf_counter()
    from tfprof.api import ingest_to_store

    t1 = time.perf_counter()
    ingest_to_store(out / "jit-store", profile_path=SMALL, force=True)  # the cold run's store is replaced
    return {"wall": time.perf_counter() - t1, "import": t1 - t0}


PHASES = {
    "parse": _phase_parse,
    "reference": _phase_reference,
    "decode": _phase_decode,
    "parquet": _phase_parquet,
    "store": _phase_store,
    "reopen": _phase_reopen,
    "jit": _phase_jit,
}


def _child(phase: str, profile: Path, out: Path) -> None:
    result = PHASES[phase](profile, out)
    result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


# ----------------------------------------------------------------------------- driver


def _run(phase: str, profile: Path, out: Path, *, env: dict | None = None, timeout: float = 900) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--phase", phase, "--profile", str(profile),
           "--out", str(out)]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    process = time.perf_counter() - t
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process"] = process
    return result


def _row(label: str, r: dict, note: str = "") -> str:
    if "error" in r:
        return f"| {label} | – | – | – | {r['error']} |"
    extra = r.get("note", "")
    if "import" in r:
        extra = (extra + "; " if extra else "") + f"imports {r['import']:.2f} s"
    if note:
        extra = (extra + "; " if extra else "") + note
    return f"| {label} | {r['wall']:.2f} | {r['process']:.2f} | {r['rss_mb']:.0f} | {extra} |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=70_000)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--profile", type=Path, help="benchmark this ProfileProto instead of a synthetic one")
    ap.add_argument("--quick", action="store_true", help="2,000 nodes x 3 steps (CI)")
    ap.add_argument("--with-reference", action="store_true", help="also time the reference decoder (slow)")
    ap.add_argument("--regenerate", action="store_true", help="generate the synthetic profile even if cached")
    ap.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.phase:
        _child(a.phase, a.profile, a.out)
        return 0
    if a.quick:
        a.nodes, a.steps = 2_000, 3
    work = Path(tempfile.mkdtemp(prefix="tfprof-bench-ingest-"))
    lines = []
    try:
        profile = a.profile
        if profile is None:
            profile = Path(tempfile.gettempdir()) / f"tfprof_synth_{a.nodes}_{a.steps}.pb"
            if a.regenerate or not profile.is_file():
                t = time.perf_counter()
                subprocess.run([sys.executable, str(ROOT / "benchmarks" / "synth.py"), "--nodes", str(a.nodes),
                                "--steps", str(a.steps), "--out", str(profile)], check=True, cwd=ROOT)
                lines.append(f"generated in {time.perf_counter() - t:.1f} s")
        size = profile.stat().st_size
        print(f"\n{profile}: {size / 1e6:.1f} MB; {os.cpu_count()} CPUs; "
              f"{'; '.join(lines) or 'reused'}\n", flush=True)
        rows = ["| phase | wall s | process s | peak RSS MB | notes |", "|---|---:|---:|---:|---|"]
        failed = False

        def add(label: str, r: dict, note: str = "") -> dict:
            nonlocal failed
            failed |= "error" in r
            rows.append(_row(label, r, note))
            print(rows[-1], flush=True)
            return r

        # One numba cache for every phase: compiled once (cold), then loaded (warm) by the others.
        env = {"NUMBA_CACHE_DIR": str(work / "numba-cache")}
        add("numba compile (cold, empty cache)", _run("jit", profile, work, env=env), "cnn fixture")
        add("numba load (warm cache)", _run("jit", profile, work, env=env),
            "cnn fixture; numba's start + loading the kernels")
        add("protobuf parse (reference's first step)", _run("parse", profile, work, env=env))
        if a.with_reference or a.quick:
            add("reference decode (tables_from_message)", _run("reference", profile, work, env=env, timeout=3600))
        add("wire decode (scan + batches)", _run("decode", profile, work, env=env))
        add("wire -> Parquet (ParquetWriter loop)", _run("parquet", profile, work / "pq", env=env))
        store = work / "store"
        r = add("ingest_to_store (tfprof.store)", _run("store", profile, store, env=env, timeout=1800))
        if "error" not in r:
            add("reopen store (Profile.open)", _run("reopen", profile, store, env=env))
        print("\n" + "\n".join(rows))
        print("\nwall: the phase's own work, after imports; process: the whole child process "
              "(interpreter, imports, numba start, exit).")
        return 1 if failed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""Fuzz the readers, each for a bounded time: ``python fuzz/run.py [--seconds N] [READER ...]``.

Each reader (default: all of ``contract.READERS``) runs as its own process (``harness.py``)
under libFuzzer's limits: ``-max_total_time`` (``--seconds``), ``-rss_limit_mb``, and
``-timeout`` per input. The corpus starts from the seeds (``make_corpus.py``, rebuilt from the
fixtures on every run) and grows in ``fuzz/corpus/<reader>/``; a crashing, hanging or
memory-hungry input is saved as ``fuzz/crashes/<reader>/{crash,timeout,oom}-<sha1>`` and the
runner exits with status 1. Each run's numbers (executions, coverage, crashes) are printed and
appended to ``fuzz/logs/runs.jsonl``; libFuzzer's output is in ``fuzz/logs/<reader>.log``.

``--boundscheck`` compiles the numba kernels with bounds checks (into a cache of their own,
``fuzz/.numba-boundscheck``; the first run compiles them, a few minutes): an out-of-bounds read
in a kernel then raises ``IndexError``, a crash, instead of reading past the buffer unseen.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

_STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+)(?: corp: (\d+)/)?", re.M)
_UNITS = re.compile(r"^stat::number_of_executed_units: (\d+)", re.M)


def fuzz(reader: str, seconds: int, *, rss_mb: int, timeout: int, boundscheck: bool, seeds: Path,
         seed: int = 0) -> dict:
    """Run ``reader``'s harness for ``seconds``; its numbers, and the saved crash if any."""
    corpus, crashes, logs = HERE / "corpus" / reader, HERE / "crashes" / reader, HERE / "logs"
    for d in (corpus, crashes, logs):
        d.mkdir(parents=True, exist_ok=True)
    before = set(crashes.iterdir())
    env = dict(os.environ)
    if boundscheck:
        env.update(NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(HERE / ".numba-boundscheck"))
    with tempfile.TemporaryDirectory(prefix=f"tfprof-fuzz-{reader}-") as tmp:
        env["TMPDIR"] = tmp  # the harness's scratch files go here and are removed with it
        cmd = [sys.executable, str(HERE / "harness.py"), reader, f"-max_total_time={seconds}",
               f"-rss_limit_mb={rss_mb}", f"-timeout={timeout}", f"-artifact_prefix={crashes}/",
               "-print_final_stats=1", *([f"-seed={seed}"] if seed else []), str(corpus), str(seeds / reader)]
        start = time.monotonic()
        log = logs / f"{reader}.log"
        with open(log, "w") as out:
            rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=HERE.parent)
        elapsed = time.monotonic() - start
    text = log.read_text(errors="replace")
    status = _STATUS.findall(text)
    units = _UNITS.findall(text)
    new = sorted(str(p) for p in set(crashes.iterdir()) - before)
    result = {
        "reader": reader, "seconds": round(elapsed, 1), "rc": rc, "boundscheck": boundscheck,
        "executions": int(units[-1]) if units else (int(status[-1][0]) if status else 0),
        "cov": int(status[-1][1]) if status else 0, "ft": int(status[-1][2]) if status else 0,
        "corpus": int(status[-1][3]) if status and status[-1][3] else None,
        "crashes": new, "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    with open(logs / "runs.jsonl", "a") as f:
        f.write(json.dumps(result) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    from contract import READERS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("readers", nargs="*", metavar="READER", help=f"default: all ({', '.join(READERS)})")
    parser.add_argument("--seconds", type=int, default=60, help="fuzzing time per reader (default 60)")
    parser.add_argument("--rss-mb", type=int, default=3072, help="memory limit of a harness process")
    parser.add_argument("--timeout", type=int, default=10, help="seconds one input may take")
    parser.add_argument("--boundscheck", action="store_true", help="numba kernels with bounds checks")
    parser.add_argument("--seed", type=int, default=0,
                        help="libFuzzer's random seed (0: a new one each run); CI gives one, so that its run "
                             "repeats the mutations a developer's run with that seed tried")
    args = parser.parse_args(argv)
    unknown = [r for r in args.readers if r not in READERS]
    if unknown:
        parser.error(f"unknown reader(s) {', '.join(unknown)}; readers: {', '.join(READERS)}")
    from make_corpus import write

    seeds = HERE / "seeds"
    readers = args.readers or list(READERS)
    write(seeds, readers)
    failed = False
    for reader in readers:
        r = fuzz(reader, args.seconds, rss_mb=args.rss_mb, timeout=args.timeout, boundscheck=args.boundscheck,
                 seeds=seeds, seed=args.seed)
        verdict = "ok" if r["rc"] == 0 and not r["crashes"] else f"CRASH (exit {r['rc']}): {', '.join(r['crashes'])}"
        print(f"{reader:18} {r['seconds']:7.1f} s {r['executions']:9d} runs  cov {r['cov']:6d}  ft {r['ft']:6d}  "
              f"{verdict}", flush=True)
        failed = failed or verdict != "ok"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

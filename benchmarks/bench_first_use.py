"""A newcomer's first commands, timed as whole processes from a fresh install.

    python benchmarks/bench_first_use.py              # a fresh venv with the package installed
    python benchmarks/bench_first_use.py --quick      # CI: the checkout itself, numba's cache emptied

A fresh install has the package's sources at new paths and times, so numba's cache holds none
of its kernels. The venv is made with ``--system-site-packages`` (the dependencies are already
here: what is measured is tfprof, not pip) and the package is installed into it without
dependencies, as a wheel would put it. ``--quick`` gets the same cold start by pointing
``NUMBA_CACHE_DIR`` at an empty folder.

Rows, each the wall time of one process:

* ``tfprof demo``, first (``auto``: the reference paths answer, a background process starts
  compiling every kernel);
* the background compilation until its marker appears;
* ``tfprof demo`` again, on the compiled kernels;
* for comparison, ``tfprof demo`` with ``TFPROF_ENGINE=kernels`` on a cold cache: what the first
  command cost before (every kernel it runs compiled in the foreground).

Prints a Markdown table; fails only on errors, never on timing.
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


def _timed(cmd: list[str], env: dict, cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=1800)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return took, proc.stdout


def _wait_for(pattern: str, folder: Path, limit: float = 1800) -> float:
    start = time.perf_counter()
    while not list(folder.glob(pattern)):
        if time.perf_counter() - start > limit:
            raise SystemExit(f"no {pattern} in {folder} after {limit:.0f} s")
        time.sleep(0.5)
    return time.perf_counter() - start


def _install(work: Path) -> tuple[str, Path]:
    """A venv with the package installed from this checkout; its python and the package folder."""
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", str(ROOT)], check=True,
                   capture_output=True)
    where = subprocess.run([py, "-c", "import tfprof, os; print(os.path.dirname(tfprof.__file__))"],
                           capture_output=True, text=True, check=True, cwd=work).stdout.strip()
    return py, Path(where)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="no venv: the checkout, numba's cache emptied")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tfprof-first-use-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k not in ("TFPROF_ENGINE", "NUMBA_CACHE_DIR")}
        if args.quick:
            py, cache = sys.executable, work / "cache"
            cache.mkdir()
            env["NUMBA_CACHE_DIR"] = str(cache)
            cold_env = {**env, "NUMBA_CACHE_DIR": str(work / "cold")}
            (work / "cold").mkdir()
        else:
            py, package = _install(work)
            cache = package / "__pycache__"
            cold_env = {**env, "NUMBA_CACHE_DIR": str(work / "cold")}
            (work / "cold").mkdir()
        demo = [py, "-m", "tfprof", "demo"]
        first, out_first = _timed(demo, env, work)
        rows.append(("`tfprof demo`, first (reference paths; compiling starts behind)", first))
        rows.append(("background compilation of every kernel, until its marker", _wait_for("tfprof-kernels-*.ready", cache)))
        again, out_again = _timed(demo, env, work)
        rows.append(("`tfprof demo` again (compiled kernels)", again))
        before, out_before = _timed(demo, {**cold_env, "TFPROF_ENGINE": "kernels"}, work)
        rows.append(("`tfprof demo` on a cold cache, kernels compiled in the foreground (as before)", before))
        same = out_first == out_again == out_before
    print(f"\nFirst use ({'checkout, emptied numba cache' if args.quick else 'fresh venv install'}; "
          f"{os.cpu_count()} cores)\n")
    print("| process | wall s |\n| --- | ---: |")
    for what, s in rows:
        print(f"| {what} | {s:.2f} |")
    print(f"\nSame output from all three demos: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

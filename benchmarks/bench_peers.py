"""tfprof's commands beside the tools people use on the same file, whole processes, as ratios.

    python benchmarks/bench_peers.py --setup       # once: HTA, xprof, orjson, protobuf in ~/.cache/tfprof-compare/venv
    python benchmarks/bench_peers.py               # Kineto CNN x600 (~312 MB), XSpace BERT x1400 (~85 MB), small traces
    python benchmarks/bench_peers.py --quick       # small copies, one run each, two small traces (CI smoke, < 2 min)
    python benchmarks/bench_peers.py --kineto-copies 190 --xspace-copies 400 --repeat 3
    python benchmarks/bench_peers.py --only small --contender tfprof --contender HTA

Every run is a fresh process, timed by this script from its start to its exit; its peak is the
process's maximum resident set, as ``/usr/bin/time -f %M`` reports it. (Without /usr/bin/time it
is ``ru_maxrss`` from ``wait4``, which Linux raises to the launching process's own peak when the
child execs; the header then says how large that is.) The contenders take turns (run 1 of each,
then run 2 of each ...), and a row reports the least seconds and the least peak over ``--repeat``
runs.

Contenders, on each input:

* Kineto (``torch_cnn`` scaled by ``--kineto-copies``, or ``--kineto PATH``): ``tfprof overview``
  and ``tfprof steps``; ``orjson.loads`` of the file's bytes (read and parse, nothing more); HTA's
  ``TraceAnalysis`` over a folder holding the file, then ``get_temporal_breakdown()`` (on a trace
  without GPU kernels the breakdown raises and the row says "load only").
* XSpace (``tf_gpu_bert_slice`` scaled by ``--xspace-copies``, or ``--xspace PATH``):
  ``tfprof overview``; protobuf's ``XSpace.FromString`` of the bytes (tfprof's generated
  ``xplane_pb2``); XProf's ``overview_page`` and ``framework_op_stats`` converters
  (``xprof.convert.raw_to_tool_data.xspace_to_tool_data``, no saved result).
* Small traces (every ``.gz`` and ``.xplane.pb`` capture in tests/fixtures/foreign/, all under
  10 MB): ``tfprof steps`` against HTA's load and temporal breakdown (Kineto) or XProf's
  overview_page (XSpace).

The peers' code is in ``bench_foreign_compare.py`` (its ``--child`` runs one) and runs in its
venv; where that venv or a library is missing the row says "not installed". tfprof runs from
this checkout (``PYTHONPATH``) with ``TFPROF_SERVER=0``, so each command starts cold, and
``TFPROF_ENGINE=kernels`` unless set; each tfprof command runs once, untimed, on a tiny trace
first, so that numba's cache holds its kernels.

Memory is counted above the idle process. For tfprof rows the idle process imports tfprof and
reads a tiny trace of the same format (``tfprof.load``); for a peer, it is that peer's own
process on the tiny trace (its imports and a tiny read). The tiny traces: the ROCm Kineto
capture (61 KB as plain JSON) and ``jax_mlp.xplane.pb`` (24 KB).

Targets (docs/PERFORMANCE.md, "The targets against the floor"), stated beside each table: Kineto,
whole process >= 1.5x faster than ``orjson.loads`` and peak above idle <= 2x the file; XSpace,
``tfprof overview`` <= 1.0x XProf's overview_page and peak above idle <= 3x the file; each small
trace, ``tfprof steps`` <= 2 s cold and <= HTA's load + temporal breakdown. Exits 1 only when a
run fails (a timeout is timing, not a failure; a peer not installed is not a failure).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_foreign_compare as peers
from bench_foreign import FIXTURES

TINY = {"kineto": ("kineto_mi250_rocm.pt.trace.json.gz", 1), "xspace": ("jax_mlp.xplane.pb", 1)}
BIG = {"kineto": "torch_cnn.pt.trace.json", "xspace": "tf_gpu_bert_slice.xplane.pb"}
QUICK_SMALL = ("kineto_resnet50_step6.pt.trace.json.gz", "tf_gpu_bert_slice.xplane.pb")
HTA = "HTA TraceAnalysis + temporal breakdown"
# format -> contenders: ("tfprof", command) or ("peer", name in bench_foreign_compare.CONTENDERS)
CONTENDERS = {
    "kineto": [("tfprof", "overview"), ("tfprof", "steps"), ("peer", "orjson.loads"), ("peer", HTA)],
    "xspace": [("tfprof", "overview"), ("peer", "protobuf XSpace.FromString"), ("peer", "XProf overview_page"),
               ("peer", "XProf framework_op_stats")],
}
SMALL_PEER = {"kineto": HTA, "xspace": "XProf overview_page"}
NOT_INSTALLED = "not installed"
TIME = shutil.which("time", path="/usr/bin:/bin")  # GNU time: the peak of the command alone


def label(contender: tuple[str, str]) -> str:
    kind, name = contender
    return {"tfprof": f"tfprof {name}", "idle": "idle tfprof (import, tfprof.load)"}.get(kind, name)


def fmt(path: Path) -> str:
    return "xspace" if path.name.endswith(".pb") else "kineto"


# ---------------------------------------------------------------- one process

def run_process(cmd: list[str], env: dict, timeout: float) -> dict:
    """Run ``cmd`` to its exit: wall seconds, peak RSS (KiB), exit status, stdout and the last line
    of stderr. The process gets a session of its own, killed whole at ``timeout``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryDirectory(prefix="tfprof-peers-") as cwd:
        peak_file = Path(cwd) / "peak"
        full = [TIME, "-f", "%M", "-o", str(peak_file), *cmd] if TIME else cmd
        t0 = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                start_new_session=True)
        killed = []
        timer = threading.Timer(timeout, lambda: (killed.append(True), os.killpg(proc.pid, signal.SIGKILL)))
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        peak = usage.ru_maxrss
        if TIME:
            lines = peak_file.read_text().split() if peak_file.exists() else []
            peak = int(lines[-1]) if lines and lines[-1].isdigit() else 0
        out.seek(0)
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
        return {"seconds": seconds, "peak_kb": peak, "rc": proc.returncode, "timed_out": bool(killed),
                "stdout": out.read().decode(errors="replace"), "error": (lines or ["no output"])[-1][:200]}


def tfprof_env() -> dict:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, TFPROF_SERVER="0", TFPROF_ENGINE=os.environ.get("TFPROF_ENGINE", "kernels"))


def command(contender: tuple[str, str], path: Path, venv: Path) -> tuple[list[str], dict] | None:
    """The command line and environment of ``contender`` on ``path``; None where it is not installed."""
    kind, name = contender
    if kind == "tfprof":
        return [sys.executable, "-m", "tfprof", name, str(path)], tfprof_env()
    if kind == "idle":
        return [sys.executable, "-c", "import sys, tfprof; tfprof.load(sys.argv[1])", str(path)], tfprof_env()
    python = peers.venv_python(venv) if peers.CONTENDERS[name][1] else Path(sys.executable)
    if not python.exists():
        return None
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", GLOG_minloglevel="3")
    return [str(python), str(ROOT / "benchmarks" / "bench_foreign_compare.py"), "--child", name, str(path)], env


def run_one(contender: tuple[str, str], path: Path, venv: Path, timeout: float) -> dict:
    """One run: ``seconds`` and ``peak_kb``, with ``about`` for a peer; or an ``error``."""
    cmd = command(contender, path, venv)
    if cmd is None:
        return {"error": f"{NOT_INSTALLED} (run --setup)"}
    r = run_process(*cmd, timeout)
    if r["timed_out"]:
        return {"error": f"timed out after {timeout:.0f} s", "timed_out": True}
    if r["rc"] != 0:
        missing = "ModuleNotFoundError" in r["error"]
        return {"error": f"{NOT_INSTALLED}: {r['error']}" if missing else f"failed (rc {r['rc']}): {r['error']}"}
    about = ""
    for line in r["stdout"].splitlines():
        if line.startswith(peers.MARK):
            about = json.loads(line[len(peers.MARK):])["about"]
    return {"seconds": r["seconds"], "peak_kb": r["peak_kb"], "about": about}


def measure(contenders: list[tuple[str, str]], path: Path, venv: Path, repeat: int, timeout: float) -> dict:
    """Each contender ``repeat`` times on ``path``, taking turns; per contender the least seconds and
    peak of its runs, or the error of its first run where none succeeded."""
    path.read_bytes()  # the same page cache for all
    runs: dict[tuple[str, str], list[dict]] = {c: [] for c in contenders}
    for _ in range(repeat):
        for c in contenders:
            if runs[c] and NOT_INSTALLED in runs[c][0].get("error", ""):
                continue
            runs[c].append(run_one(c, path, venv, timeout))
            print(f"  {label(c)} on {path.name}: {runs[c][-1]}", file=sys.stderr, flush=True)
    results = {}
    for c, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        results[c] = rs[0] if not ok else {"seconds": min(r["seconds"] for r in ok),
                                           "peak_kb": min(r["peak_kb"] for r in ok), "about": ok[0]["about"]}
    return results


# ---------------------------------------------------------------- tables

def _mb(kb: float) -> float:
    return kb * 1024 / 1e6


def big_table(path: Path, results: dict, idle: dict) -> tuple[str, list[str]]:
    """The Markdown table for one large input and the lines saying whether each target is met."""
    size = path.stat().st_size / 1e6
    ours = results.get(("tfprof", "overview"), {}).get("seconds")
    rows = ["| contender | seconds (min) | peak MB | idle MB | above idle MB | above idle ÷ file | ÷ tfprof overview |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for c, r in results.items():
        name = label(c) + (f" ({r['about']})" if r.get("about") else "")
        if "error" in r:
            rows.append(f"| {name} | {r['error']} | | | | | |")
            continue
        base = idle.get("idle" if c[0] == "tfprof" else c[1], {}).get("peak_kb")
        above = _mb(r["peak_kb"] - base) if base else None
        cells = [f"{r['seconds']:.2f}", f"{_mb(r['peak_kb']):,.0f}", f"{_mb(base):,.0f}" if base else "?",
                 f"{above:,.0f}" if above is not None else "?", f"{above / size:.2f}" if above is not None else "?",
                 f"{r['seconds'] / ours:.2f}" if ours else "?"]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows), targets(fmt(path), size, results, idle)


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def targets(kind: str, size: float, results: dict, idle: dict) -> list[str]:
    ours = results.get(("tfprof", "overview"), {})
    if "seconds" not in ours:
        return ["targets: no tfprof overview time"]
    lines = []
    peer, want, what = (("orjson.loads", 1.5, "whole process ≥ 1.5× faster than orjson.loads") if kind == "kineto"
                        else ("XProf overview_page", 1.0, "tfprof overview ≤ 1.0× XProf's overview_page"))
    other = results.get(("peer", peer), {})
    if "seconds" in other:
        ratio = other["seconds"] / ours["seconds"]
        lines.append(f"{what}: {peer} ÷ tfprof = {ratio:.2f} (≥ {want}) — {_met(ratio >= want)}")
    else:
        lines.append(f"{what}: {peer} {other.get('error', 'not run')}")
    limit = 2.0 if kind == "kineto" else 3.0
    base = idle.get("idle", {}).get("peak_kb")
    if base:
        above = _mb(ours["peak_kb"] - base) / size
        lines.append(f"peak above the idle process ≤ {limit:g}× the file: {above:.2f}× — {_met(above <= limit)}")
    return lines


def small_table(results: dict[Path, dict]) -> tuple[str, list[str]]:
    rows = ["| trace | MB | tfprof steps s | peak MB | peer | peer s | peer peak MB | ≤ 2 s | ≤ peer |",
            "|---|---:|---:|---:|---|---:|---:|---|---|"]
    misses = []
    for path, res in results.items():
        peer = ("peer", SMALL_PEER[fmt(path)])
        ours, theirs = res.get(("tfprof", "steps"), {}), res.get(peer, {})
        if "error" in ours:
            rows.append(f"| {path.name} | {path.stat().st_size / 1e6:.2f} | {ours['error']} | | | | | | |")
            continue
        fast = ours["seconds"] <= 2.0
        cells = [path.name, f"{path.stat().st_size / 1e6:.2f}", f"{ours['seconds']:.2f}", f"{_mb(ours['peak_kb']):,.0f}",
                 peer[1] + (f" ({theirs['about']})" if theirs.get("about") else "")]
        if "seconds" not in theirs:
            cells += [theirs.get("error", "not run"), "", _met(fast), ""]
        else:
            ahead = ours["seconds"] <= theirs["seconds"]
            cells += [f"{theirs['seconds']:.2f}", f"{_mb(theirs['peak_kb']):,.0f}", _met(fast), _met(ahead)]
            misses += [] if ahead else [path.name]
        misses += [] if fast else [path.name]
        rows.append("| " + " | ".join(cells) + " |")
    missed = sorted(set(misses))
    return "\n".join(rows), [f"{len(missed)} of {len(results)} traces miss a target (≤ 2 s cold, ≤ the peer)"
                              + (f": {', '.join(missed)}" if missed else "")]


# ---------------------------------------------------------------- main

def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return proc.stdout.strip() or "?"


def scaled(name: str, copies: int) -> Path:
    """``bench_foreign.scaled_copy`` run in a child process, so that this one stays small (its RSS
    is what ``wait4`` reports as a child's peak where /usr/bin/time is missing)."""
    code = "import sys; from bench_foreign import scaled_copy; print(scaled_copy(sys.argv[1], int(sys.argv[2])))"
    proc = subprocess.run([sys.executable, "-c", code, name, str(copies)], cwd=ROOT / "benchmarks", check=True,
                          stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return Path(proc.stdout.strip().splitlines()[-1])


def _peak_note() -> str:
    if TIME:
        return f"peaks by {TIME} -f %M"
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return f"no /usr/bin/time: peaks by wait4, none below this script's own {own:.0f} MB"


def wanted(contenders: list[tuple[str, str]], filters: list[str] | None) -> list[tuple[str, str]]:
    if not filters:
        return contenders
    return [c for c in contenders if any(f.lower() in label(c).lower() for f in filters)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--setup", action="store_true", help="create the peers' venv and install them first")
    p.add_argument("--venv", type=Path, default=peers.VENV, help=f"the peers' venv (default {peers.VENV})")
    p.add_argument("--find-links", action="append", default=[], help="extra wheel folder for pip at --setup")
    p.add_argument("--quick", action="store_true", help="small copies, one run each, two small traces (CI smoke)")
    p.add_argument("--kineto-copies", type=int, help="copies of torch_cnn (default 600, ~312 MB; --quick 4)")
    p.add_argument("--xspace-copies", type=int, help="copies of tf_gpu_bert_slice (default 1400, ~85 MB; --quick 20)")
    p.add_argument("--kineto", action="append", type=Path, help="use this Kineto trace instead (repeatable)")
    p.add_argument("--xspace", action="append", type=Path, help="use this .xplane.pb instead (repeatable)")
    p.add_argument("--only", action="append", choices=["kineto", "xspace", "small"], help="run these parts only")
    p.add_argument("--contender", action="append", help="only contenders whose name contains this (repeatable)")
    p.add_argument("--repeat", type=int, help="runs per contender (default 3; --quick 1)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per process")
    args = p.parse_args(argv)
    missing = [str(path) for path in (args.kineto or []) + (args.xspace or []) if not path.is_file()]
    if missing:
        p.error(f"no such file: {', '.join(missing)}")
    if args.setup:
        peers.setup_venv(args.venv, args.find_links)
    repeat = args.repeat or (1 if args.quick else 3)
    parts = args.only or ["kineto", "xspace", "small"]
    copies = {"kineto": args.kineto_copies or (4 if args.quick else 600),
              "xspace": args.xspace_copies or (20 if args.quick else 1400)}
    tiny = {kind: scaled(name, n) if ".json" in name else FIXTURES / name for kind, (name, n) in TINY.items()}
    print(f"bench_peers {date.today()}, commit {_commit()}: python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, TFPROF_ENGINE={tfprof_env()['TFPROF_ENGINE']}, repeat {repeat}, peers' venv "
          f"{args.venv}{'' if peers.venv_python(args.venv).exists() else ' (missing: run --setup)'}; {_peak_note()}; "
          f"{_load()}\n",
          flush=True)
    failed = []

    def note(results: dict) -> dict:
        failed.extend(f"{label(c)}: {r['error']}" for c, r in results.items()
                      if "error" in r and NOT_INSTALLED not in r["error"] and not r.get("timed_out"))
        return results

    def warm(kind: str, commands: set[str]) -> None:  # numba's cache gets the kernels of each command
        for name in sorted(commands):
            note({("tfprof", name): run_one(("tfprof", name), tiny[kind], args.venv, args.timeout)})

    for kind in ("kineto", "xspace"):
        if kind not in parts:
            continue
        contenders = wanted(CONTENDERS[kind], args.contender)
        paths = (args.kineto if kind == "kineto" else args.xspace) or [scaled(BIG[kind], copies[kind])]
        warm(kind, {name for k, name in contenders if k == "tfprof"})
        idle_of = [("idle", "tfprof")] * any(k == "tfprof" for k, _ in contenders) + [c for c in contenders
                                                                                       if c[0] == "peer"]
        idle = {("idle" if k == "idle" else name): r
                for (k, name), r in note(measure(idle_of, tiny[kind], args.venv, repeat, args.timeout)).items()}
        for path in paths:
            before = _load()
            text, lines = big_table(path, note(measure(contenders, path, args.venv, repeat, args.timeout)), idle)
            print(f"### {kind}: {path.name} ({path.stat().st_size / 1e6:.1f} MB)\n\n{text}\n\n"
                  + "".join(f"- {line}\n" for line in lines) + f"\n{before} before, {_load()} after\n", flush=True)
    if "small" in parts:
        traces = [FIXTURES / n for n in QUICK_SMALL] if args.quick else sorted(
            [*FIXTURES.glob("*.gz"), *FIXTURES.glob("*.xplane.pb")])
        traces = [t for t in traces if t.stat().st_size <= 10e6]
        for kind in ("kineto", "xspace"):
            if any(fmt(t) == kind for t in traces) and wanted([("tfprof", "steps")], args.contender):
                warm(kind, {"steps"})
        before = _load()
        results = {t: note(measure(wanted([("tfprof", "steps"), ("peer", SMALL_PEER[fmt(t)])], args.contender), t,
                                   args.venv, repeat, args.timeout)) for t in traces}
        text, lines = small_table(results)
        print(f"### small traces (cold: one process per command)\n\n{text}\n\n" + "".join(f"- {x}\n" for x in lines)
              + f"\n{before} before, {_load()} after\n", flush=True)
    print("seconds: the whole process, start to exit; peak: its maximum RSS; idle: the same kind of process on a "
          "tiny trace (tfprof: `import tfprof` and `tfprof.load`); ÷ tfprof overview above 1: tfprof is faster.")
    if failed:
        print("failed runs:\n" + "\n".join(f"  {f}" for f in failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

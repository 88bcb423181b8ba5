"""Foreign-profile ingest side by side with the tools people use: seconds and peak memory.

    python benchmarks/bench_foreign_compare.py --setup     # once: the comparison venv (HTA, xprof, orjson, protobuf)
    python benchmarks/bench_foreign_compare.py             # full size: Kineto ~312 MB + ~320 MB GPU, XSpace ~84 + ~83 MB
    python benchmarks/bench_foreign_compare.py --quick     # small copies, one run each (CI smoke, < 60 s)
    python benchmarks/bench_foreign_compare.py --kineto /tmp/big/cnn540.json --xspace /tmp/big/keras3300.xplane.pb
    python benchmarks/bench_foreign_compare.py --only xspace --repeat 3

The inputs are the committed captures of tests/fixtures/foreign/ scaled up with the helpers of
benchmarks/bench_foreign.py (written once per size under the temp directory and reused):
torch_cnn x600 (~312 MB, CPU ops), kineto_resnet50_step6 x60 (~320 MB, GPU kernels, flows),
tf_gpu_bert_slice x1400 (~84 MB, a GPU capture, ~1M events) and tf2_keras x3300 (~83 MB, 3.3M
tiny events). ``--kineto PATH`` / ``--xspace PATH`` (repeatable) use existing files instead.

Every contender runs in a fresh process that imports its libraries, notes its RSS (the baseline:
interpreter + libraries, before any data), times its own work with ``perf_counter`` and reports
the peak RSS of that work (VmHWM, reset through /proc/self/clear_refs where a warm-up ran first).
``process s`` is the parent's wall clock for the whole child: start, imports, work and exit.

Kineto contenders: tfprof ``foreign.read(path, "kineto")`` warm (a first read loads numba's
cache, the second is timed), cold (one read, as a library user's first) and CLI (one read with the
allocator settings the command line makes for its own process, ``tfprof.cli.client.POLARS_MALLOC_CONF``
and ``tfprof.store.tune_malloc``: what a CLI user sees); ``json.loads`` and
``orjson.loads`` of the file's bytes; HTA's one-rank loader ``hta.common.trace.parse_trace_file``
(what ``TraceAnalysis`` runs per rank file: JSON parse, DataFrame, symbol table, fwd/bwd links,
correlation, iterations). XSpace contenders: tfprof ``foreign.read(path, "xspace")`` warm, cold and CLI;
protobuf ``XSpace.FromString`` of the bytes (tfprof.schema.proto.xplane_pb2); XProf's converter
``xprof.convert.raw_to_tool_data.xspace_to_tool_data([path], "framework_op_stats",
{"use_saved_result": False})`` (the C++ XSpace -> OpStats -> tool JSON path, no cache).
Two more are defined here for ``bench_peers.py``, which runs them as whole processes: XProf's
``overview_page`` converter and HTA's ``TraceAnalysis`` followed by ``get_temporal_breakdown()``.
Everything times the file read too. The third-party tools live in ``~/.cache/tfprof-compare/venv``
(``--venv``), so the project's environment is untouched; a contender whose venv is missing is
reported as "not installed (run --setup)".

Targets (docs/PERFORMANCE.md): Kineto >= 177 MB/s (Perfetto's JSON parse) with peak <= 2x the
file; XSpace <= 1.5x protobuf's parse time with peak <= 3x the file. ``speed vs target`` is
MB/s / 177 (Kineto) or (1.5 x protobuf s) / s (XSpace): >= 1 meets it. ``memory vs target`` is
peak / (2 or 3 x file): <= 1 meets it. Best time and lowest peak over ``--repeat`` fresh runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path.home() / ".cache" / "tfprof-compare" / "venv"
VENV_PACKAGES = ["holistictraceanalysis", "xprof", "orjson", "protobuf"]
MARK = "@@RESULT "
KINETO_MBPS = 177.0  # Perfetto trace processor's JSON parse rate
KINETO_PEAK, XSPACE_PEAK, XSPACE_VS_PROTOBUF = 2.0, 3.0, 1.5

# (name, fixture, copies full, copies --quick)
KINETO_INPUTS = [("torch_cnn.pt.trace.json", 600, 10), ("kineto_resnet50_step6.pt.trace.json.gz", 60, 2)]
XSPACE_INPUTS = [("tf_gpu_bert_slice.xplane.pb", 1400, 20), ("tf2_keras.xplane.pb", 3300, 50)]


# ---------------------------------------------------------------- child side: one contender per process
# Each setup imports what the contender needs and returns (work, warm, about): ``work()`` does the timed
# job; ``warm`` says it runs once untimed first; ``about`` names the library versions. Only the standard library is imported at module level, so
# the venv's python can run this file too.

def _tfprof(kind: str, warm: bool, cli: bool = False):
    def setup(path: str):
        os.environ.setdefault("TFPROF_ENGINE", "kernels")
        sys.path.insert(0, str(ROOT))
        about = f"numba {_version('numba')}"
        if cli:  # the allocators' settings of the command line's own process (a library user keeps theirs)
            from tfprof.cli.client import POLARS_MALLOC_CONF

            os.environ.setdefault(*POLARS_MALLOC_CONF)  # before polars loads (tfprof.store imports it)
            from tfprof.store import tune_malloc

            tune_malloc()
            about += ", CLI malloc"
        from tfprof.ingest import foreign

        return (lambda: foreign.read(path, kind)), warm, about
    return setup


def _json(path: str):
    return (lambda: json.loads(Path(path).read_bytes())), False, f"python {sys.version.split()[0]}"


def _orjson(path: str):
    import orjson

    return (lambda: orjson.loads(Path(path).read_bytes())), False, f"orjson {orjson.__version__}"


def _hta(path: str):
    import logging

    from hta.common.trace import parse_trace_file
    from hta.configs.config import logger

    logger.setLevel(logging.ERROR)  # it logs a warning per phase
    return (lambda: parse_trace_file(path)), False, f"HTA {_version('holistictraceanalysis')}, pandas {_version('pandas')}"


def _protobuf(path: str):
    sys.path.insert(0, str(ROOT))
    from google.protobuf.internal import api_implementation

    from tfprof.schema.proto import xplane_pb2

    about = f"protobuf {_version('protobuf')} ({api_implementation.Type()})"
    return (lambda: xplane_pb2.XSpace.FromString(Path(path).read_bytes())), False, about


def _hta_breakdown(path: str):
    """HTA as its users start: ``TraceAnalysis`` over a folder (here holding only this trace: one
    rank), then the temporal breakdown (GPU idle, compute and non-compute time per rank)."""
    import logging

    from hta.configs.config import logger
    from hta.trace_analysis import TraceAnalysis

    logger.setLevel(logging.ERROR)
    folder = _private_folder(path, "hta-")
    note = []

    def work():
        analysis = TraceAnalysis(trace_dir=str(folder))
        try:
            return analysis.get_temporal_breakdown(visualize=False)
        except Exception as e:  # on a trace without GPU kernels HTA indexes an empty frame
            note.append(f"temporal breakdown raised {type(e).__name__}: load only")
            return analysis
    versions = f"HTA {_version('holistictraceanalysis')}, pandas {_version('pandas')}"
    return work, False, lambda: "; ".join([versions, *note])


def _private_folder(path: str, prefix: str) -> Path:
    """A temporary folder (removed at exit) holding only a link to ``path``: xprof treats the file's
    folder as its session and may write a cache there (ALL_HOSTS.op_stats_v2.pb); HTA reads every
    trace in the folder it is given."""
    import atexit
    import shutil

    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, True)
    link = folder / Path(path).name
    link.symlink_to(Path(path).resolve())
    return folder


def _xprof(tool: str):
    def setup(path: str):
        from xprof.convert import raw_to_tool_data

        link = _private_folder(path, "xprof-session-") / Path(path).name

        def work():
            data, _ = raw_to_tool_data.xspace_to_tool_data([str(link)], tool, {"use_saved_result": False})
            if data is None:
                raise RuntimeError(f"xprof produced no {tool} data")
            return data
        return work, False, f"xprof {_version('xprof')}"
    return setup


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


# name -> (setup, runs in the venv?)
CONTENDERS = {
    "tfprof kineto (warm)": (_tfprof("kineto", True), False),
    "tfprof kineto (cold)": (_tfprof("kineto", False), False),
    "tfprof kineto (CLI)": (_tfprof("kineto", False, cli=True), False),
    "json.loads": (_json, False),
    "orjson.loads": (_orjson, True),
    "HTA parse_trace_file": (_hta, True),
    "tfprof xspace (warm)": (_tfprof("xspace", True), False),
    "tfprof xspace (cold)": (_tfprof("xspace", False), False),
    "tfprof xspace (CLI)": (_tfprof("xspace", False, cli=True), False),
    "protobuf XSpace.FromString": (_protobuf, False),
    "XProf framework_op_stats": (_xprof("framework_op_stats"), True),
    "XProf overview_page": (_xprof("overview_page"), True),
    "HTA TraceAnalysis + temporal breakdown": (_hta_breakdown, True),
}
PEERS_ONLY = ("XProf overview_page", "HTA TraceAnalysis + temporal breakdown")  # run by bench_peers.py only
KINETO_CONTENDERS = [name for name in CONTENDERS if name not in PEERS_ONLY
                     and (name.startswith("tfprof kineto") or "json" in name or "HTA" in name)]
XSPACE_CONTENDERS = [name for name in CONTENDERS if name not in PEERS_ONLY and name not in KINETO_CONTENDERS]


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # Linux >= 4.0: VmHWM := VmRSS
        return True
    except OSError:
        return False


def child(name: str, path: str) -> None:
    import gc

    work, warm, about = CONTENDERS[name][0](path)
    base = _status_kb("VmRSS")
    peak_reset = True
    if warm:
        result = work()
        del result
        gc.collect()
        peak_reset = _reset_peak()
    t0 = time.perf_counter()
    result = work()
    seconds = time.perf_counter() - t0
    peak = _status_kb("VmHWM")
    del result
    print(MARK + json.dumps({"seconds": seconds, "base_kb": base, "peak_kb": peak, "peak_reset": peak_reset,
                             "about": about() if callable(about) else about}),
          flush=True)


# ---------------------------------------------------------------- parent side

def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def setup_venv(venv: Path, find_links: list[str]) -> None:
    """Create ``venv`` (if missing) and install the comparison tools into it."""
    if not venv_python(venv).exists():
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    extra = [arg for d in find_links for arg in ("--find-links", d)]
    subprocess.run([str(venv_python(venv)), "-m", "pip", "install", *extra, *VENV_PACKAGES], check=True,
                   stdout=sys.stderr)  # keep stdout for the tables
    subprocess.run([str(venv_python(venv)), "-c",
                    "import hta, orjson, google.protobuf as p, xprof.convert.raw_to_tool_data; "
                    "from importlib.metadata import version as v; "
                    "print('installed:', *(f'{n} {v(n)}' for n in ('holistictraceanalysis', 'xprof', 'orjson', "
                    "'protobuf')))"], check=True)


def run_one(name: str, path: Path, venv: Path, timeout: float) -> dict:
    """Run contender ``name`` on ``path`` in a fresh process; its measurements, or an ``error``."""
    in_venv = CONTENDERS[name][1]
    python = venv_python(venv) if in_venv else Path(sys.executable)
    if not python.exists():
        return {"error": "not installed (run --setup)"}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", GLOG_minloglevel="3")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([str(python), __file__, "--child", name, str(path)], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            return dict(json.loads(line[len(MARK):]), process=wall)
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    if "ModuleNotFoundError" in tail:
        return {"error": f"not installed (run --setup): {tail[:120]}"}
    return {"error": f"failed (rc {proc.returncode}): {tail[:160]}"}


def measure(name: str, path: Path, venv: Path, repeat: int, timeout: float) -> dict:
    runs = [run_one(name, path, venv, timeout) for _ in range(repeat)]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    return {"seconds": min(r["seconds"] for r in ok), "process": min(r["process"] for r in ok),
            "base_kb": min(r["base_kb"] for r in ok), "peak_kb": min(r["peak_kb"] for r in ok),
            "peak_reset": all(r["peak_reset"] for r in ok), "about": ok[0]["about"]}


def table(kind: str, path: Path, results: dict[str, dict]) -> str:
    mb = path.stat().st_size / 1e6
    proto = results.get("protobuf XSpace.FromString", {}).get("seconds")
    head = ("| contender | work s | process s | MB/s | RSS after imports MB | peak RSS MB | peak ÷ file "
            "| speed vs target | memory vs target |\n|---|---|---|---|---|---|---|---|---|")
    rows = [head]
    for name, r in results.items():
        if "error" in r:
            rows.append(f"| {name} | {r['error']} | | | | | | | |")
            continue
        s, peak, base = r["seconds"], r["peak_kb"] / 1024, r["base_kb"] / 1024
        if kind == "kineto":
            speed = f"{mb / s / KINETO_MBPS:.2f}× (≥ 1)"
            memory = f"{peak / (KINETO_PEAK * mb):.2f}× (≤ 1)"
        else:
            speed = f"{XSPACE_VS_PROTOBUF * proto / s:.2f}× (≥ 1)" if proto else "no protobuf time"
            memory = f"{peak / (XSPACE_PEAK * mb):.2f}× (≤ 1)"
        mark = "" if r["peak_reset"] else " *"
        rows.append(f"| {name} ({r['about']}) | {s:.2f} | {r['process']:.1f} | {mb / s:.0f} | {base:.0f} | {peak:.0f}{mark} "
                    f"| {peak / mb:.2f} | {speed} | {memory} |")
    return "\n".join(rows)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


def _scaled_inputs(kind: str, quick: bool, cache: Path) -> list[Path]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT))
    from bench_foreign import scaled_copy

    return [scaled_copy(name, small if quick else full, cache)
            for name, full, small in (KINETO_INPUTS if kind == "kineto" else XSPACE_INPUTS)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--setup", action="store_true", help="create the comparison venv and install the tools, then run")
    p.add_argument("--setup-only", action="store_true", help="create the comparison venv and stop")
    p.add_argument("--venv", type=Path, default=VENV, help=f"comparison venv (default {VENV})")
    p.add_argument("--find-links", action="append", default=[], help="extra wheel folder for pip at --setup")
    p.add_argument("--quick", action="store_true", help="small copies, one run each (CI smoke)")
    p.add_argument("--kineto", action="append", type=Path, help="use this Kineto trace (repeatable)")
    p.add_argument("--xspace", action="append", type=Path, help="use this .xplane.pb (repeatable)")
    p.add_argument("--only", choices=["kineto", "xspace"], help="run one kind only")
    p.add_argument("--contender", action="append", help="run only contenders whose name contains this (repeatable)")
    p.add_argument("--repeat", type=int, default=None, help="fresh runs per contender (default 1 quick, 2 full)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per child process")
    p.add_argument("--child", nargs=2, metavar=("NAME", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    if args.setup or args.setup_only:
        setup_venv(args.venv, args.find_links)
        if args.setup_only:
            return 0
    repeat = args.repeat or (1 if args.quick else 2)
    cache = Path(tempfile.gettempdir()) / "tfprof-bench-foreign"
    cache.mkdir(exist_ok=True)
    groups = []
    for kind, given, names in (("kineto", args.kineto, KINETO_CONTENDERS), ("xspace", args.xspace, XSPACE_CONTENDERS)):
        if args.only and args.only != kind:
            continue
        if args.contender:
            names = [n for n in names if any(c.lower() in n.lower() for c in args.contender)]
        for path in given or _scaled_inputs(kind, args.quick, cache):
            groups.append((kind, path, names))
    print(f"python {sys.version.split()[0]}; venv {args.venv}; repeat {repeat}; {_load()}\n")
    for kind, path, names in groups:
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=False)  # same page cache for all
        before = _load()
        results = {}
        for name in names:
            results[name] = measure(name, path, args.venv, repeat, args.timeout)
            print(f"  {name}: {results[name]}", file=sys.stderr, flush=True)
        print(f"### {path.name} ({kind}, {path.stat().st_size / 1e6:.1f} MB)\n\n{table(kind, path, results)}\n\n"
              f"{before} before, {_load()} after\n", flush=True)
    print("RSS after imports = interpreter + libraries before any data; peak RSS = the work's high-water mark "
          "(the whole process). * = peak not reset after warm-up (includes the first read).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

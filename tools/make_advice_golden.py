"""Golden outputs of the REAL tfprof advisor (`advise`) on every fixture profile.

Usage (from anywhere; paths are taken from the repository root):

    /work/shared/tools/tfprof-reference python tools/make_advice_golden.py [--only NAME ...]

Runs only under the reference Python (tensorflow-cpu installed). Profiles advised:

    cnn, rnn, multistep, gpu_tiny   tests/fixtures/<name>/profile.pb
    advice_gpu                      built here by the real tool from the hand-written text protos
                                    in tests/golden/advise/inputs/advice_gpu/ (two steps, four GPUs,
                                    NHWC convolutions on GPU and CPU, an unfused BatchNorm, code
                                    traces shaped to reach every branch of the code-view check)
    graph_only                      built here from tests/fixtures/cnn/graph.pb + op_log.pb with no
                                    RunMetadata (the checks' "missing run_meta" paths)
    tiny_code                       gpu_tiny's graph and RunMetadata with the op log of
                                    tests/golden/advise/inputs/tiny_code/ (code paths that branch but
                                    all stay under 1 ms: the code-view check's empty report)

The built profiles are written to tests/golden/advise/inputs/<name>/profile.pb. For each profile
and each case (`all` = the default options, every checker; then each checker alone) it writes
tests/golden/advise/<name>/:

    cases.json      [{"id", "checkers"}]: the AdvisorOptionsProto given (checker -> options)
    <id>.txt        what the advisor printed on stdout, its checker blocks put in the fixed order
                    AcceleratorUtilizationChecker, OperationChecker, ExpensiveOperationChecker,
                    JobChecker (see below)
    <id>.pbtxt      the returned AdviceProto in text format, map entries in the same fixed order
    <id>.stderr     what the native code wrote on file descriptor 2 during the call (only if any)
    meta.json       TF version, commands, profile sha256, per case the checker orders seen

Nondeterminism, handled as data: the advisor prints by iterating the protobuf
map of results, whose order changes from process to process. Every profile is therefore advised
in REPEATS separate processes; the script checks that each printed stdout is exactly the
concatenation of the per-checker blocks (`\\n<name>:\\n` + one `<report>\\n` per report) in
SOME order, that the blocks and the returned protos are identical in every process, and then
writes the blocks in the fixed order (the order of docs/TFPROF_BEHAVIOUR.md, 'Advisor driver', which tfprof.api.advise
prints). meta.json records the orders seen. Report order inside a checker is deterministic (the
checkers append in a fixed sequence) and is kept as printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from _reference import FIXTURES, GOLDEN, REFERENCE, ROOT, captured, write_cases

OUT = GOLDEN / "advise"
INPUTS = OUT / "inputs"
SCRIPT_REL = "tools/make_advice_golden.py"

# tfprof's checker names, in its own (append-only) order: the fixed printing order.
CHECKERS = ("AcceleratorUtilizationChecker", "OperationChecker", "ExpensiveOperationChecker", "JobChecker")
CASES = [{"id": "all", "checkers": {c: {} for c in CHECKERS}}] + [{"id": c, "checkers": {c: {}}} for c in CHECKERS]
REPEATS = 3

FIXTURE_NAMES = ("cnn", "rnn", "multistep", "gpu_tiny")
# Built profiles: name -> (graph, [run_meta files], op_log or None); text or binary protos.
BUILT = {
    "advice_gpu": (
        INPUTS / "advice_gpu" / "graph.pbtxt",
        [INPUTS / "advice_gpu" / "run_meta_0.pbtxt", INPUTS / "advice_gpu" / "run_meta_1.pbtxt"],
        INPUTS / "advice_gpu" / "op_log.pbtxt",
    ),
    "graph_only": (FIXTURES / "cnn" / "graph.pb", [], FIXTURES / "cnn" / "op_log.pb"),
    "tiny_code": (
        FIXTURES / "gpu_tiny" / "graph.pbtxt",
        [FIXTURES / "gpu_tiny" / "run_meta_0.pbtxt"],
        INPUTS / "tiny_code" / "op_log.pbtxt",
    ),
}
NAMES = (*FIXTURE_NAMES, *BUILT)


def profile_path(name: str) -> Path:
    return INPUTS / name / "profile.pb" if name in BUILT else FIXTURES / name / "profile.pb"


# --------------------------------------------------------------------------------------
# Child processes (TensorFlow imported): build a profile, or advise one
# --------------------------------------------------------------------------------------

def _captured(fn):
    """(result, stdout, stderr) of fn() with fds 1 and 2 captured; a Python error is raised."""
    result, so, se, err = captured(fn)
    if err:
        raise RuntimeError(err)
    return result, so, se


def _parse(path: Path, message):
    from google.protobuf import text_format

    raw = path.read_bytes()
    if path.suffix == ".pbtxt":
        return text_format.Parse(raw.decode(), message).SerializeToString()
    return message.FromString(raw).SerializeToString()


def child_build(name: str) -> None:
    """Build profile `name` the way tfprof does (NewProfiler + AddStep per run_meta) and write it."""
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.profiler import tfprof_log_pb2
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.util import _pywrap_tfprof as p

    graph_file, run_metas, op_log_file = BUILT[name]
    graph = _parse(graph_file, graph_pb2.GraphDef())
    op_log = _parse(op_log_file, tfprof_log_pb2.OpLogProto()) if op_log_file else b""
    out = profile_path(name)
    out.parent.mkdir(parents=True, exist_ok=True)

    def build():
        p.NewProfiler(graph, op_log)
        for step, rm in enumerate(run_metas):
            p.AddStep(step, graph, _parse(rm, config_pb2.RunMetadata()), op_log)
        p.WriteProfile(str(out).encode())

    _, so, se = _captured(build)
    print(json.dumps({"build_stdout": so, "build_stderr": se}))


def child_advise(name: str) -> None:
    """Advise profile `name` for every case; print one JSON object with the raw results."""
    import tensorflow as tf
    from google.protobuf import text_format
    from tensorflow.core.profiler import tfprof_output_pb2
    from tensorflow.python.profiler import model_analyzer
    from tensorflow.python.util import _pywrap_tfprof as p

    _, _, load_stderr = _captured(lambda: p.ProfilerFromFile(str(profile_path(name)).encode()))
    results = {}
    for case in CASES:
        options = model_analyzer._build_advisor_options(case["checkers"]).SerializeToString()
        raw, so, se = _captured(lambda: p.Profile(b"advise", options))
        advice = tfprof_output_pb2.AdviceProto.FromString(raw)
        entries = {}
        for key in advice.checkers:  # one single-entry message per checker, in text format
            single = tfprof_output_pb2.AdviceProto()
            single.checkers[key].CopyFrom(advice.checkers[key])
            entries[key] = text_format.MessageToString(single)
        reports = {key: list(advice.checkers[key].reports) for key in advice.checkers}
        results[case["id"]] = {"stdout": so, "stderr": se, "reports": reports, "pbtxt": entries}
    print(json.dumps({"tf_version": tf.__version__, "load_stderr": load_stderr, "results": results}))


# --------------------------------------------------------------------------------------
# Parent: run the children, check, write the goldens
# --------------------------------------------------------------------------------------

def block(name: str, reports: list[str]) -> str:
    """What the advisor prints for one checker: ``\n<name>:\n`` then one line per report."""
    return f"\n{name}:\n" + "".join(r + "\n" for r in reports)


def printed_order(stdout: str, reports: dict[str, list[str]]) -> list[str]:
    """The order in which `stdout` printed the checkers; raises unless stdout is exactly the
    blocks of `reports` in that order."""
    order = sorted(reports, key=lambda n: stdout.find(f"\n{n}:\n"))
    if "".join(block(n, reports[n]) for n in order) != stdout:
        raise RuntimeError(f"printed text is not the blocks of the returned proto:\n{stdout!r}\n{reports!r}")
    return order


def run_child(args: list[str]) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, str(ROOT / SCRIPT_REL), *args], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fixed_order(names) -> list[str]:
    known = [c for c in CHECKERS if c in names]
    return known + sorted(n for n in names if n not in CHECKERS)


def generate(name: str) -> None:
    build = run_child(["--build", name]) if name in BUILT else None
    runs = [run_child(["--advise", name]) for _ in range(REPEATS)]
    first = runs[0]["results"]
    out = OUT / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    profile = profile_path(name)
    meta = {
        "profile": str(profile.relative_to(ROOT)),
        "profile_sha256": hashlib.sha256(profile.read_bytes()).hexdigest(),
        "tf_version": runs[0]["tf_version"],
        "command": f"{REFERENCE} python {SCRIPT_REL}",
        "how": "_pywrap_tfprof.ProfilerFromFile(profile); per case _pywrap_tfprof.Profile(b'advise', "
               "model_analyzer._build_advisor_options(checkers)); fds 1 and 2 captured around each call; "
               f"repeated in {REPEATS} processes",
        "load_stderr": runs[0]["load_stderr"],
        "cases": {},
    }
    if build is not None:
        graph_file, run_metas, op_log_file = BUILT[name]
        meta["built_from"] = {
            "graph": str(graph_file.relative_to(ROOT)),
            "run_meta": [str(p.relative_to(ROOT)) for p in run_metas],
            "op_log": str(op_log_file.relative_to(ROOT)) if op_log_file else None,
            "build_stderr": build["build_stderr"],
        }
    for case in CASES:
        cid = case["id"]
        orders = []
        for run in runs:
            res = run["results"][cid]
            if res["reports"] != first[cid]["reports"] or res["stderr"] != first[cid]["stderr"]:
                raise RuntimeError(f"{name}/{cid}: results differ between processes")
            orders.append(printed_order(res["stdout"], res["reports"]))
        res = first[cid]
        keys = fixed_order(res["reports"])
        (out / f"{cid}.txt").write_text("".join(block(k, res["reports"][k]) for k in keys))
        (out / f"{cid}.pbtxt").write_text("".join(res["pbtxt"][k] for k in keys))
        if res["stderr"]:
            (out / f"{cid}.stderr").write_text(res["stderr"])
        meta["cases"][cid] = {"checkers": keys, "printed_orders": orders}
    write_cases(out / "cases.json", CASES)
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{name}: {len(CASES)} cases -> {out.relative_to(ROOT)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", choices=NAMES, help="profile(s) to redo (default: all)")
    ap.add_argument("--build", choices=tuple(BUILT), help=argparse.SUPPRESS)
    ap.add_argument("--advise", choices=NAMES, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.build:
        child_build(a.build)
        return 0
    if a.advise:
        child_advise(a.advise)
        return 0
    for name in a.only or NAMES:
        generate(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())

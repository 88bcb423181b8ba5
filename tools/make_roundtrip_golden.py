"""Goldens for our ProfileProto writer and our tf.profiler API, made with the REAL tfprof.

Usage (from anywhere; paths are taken from the repository root):

    python tools/make_roundtrip_golden.py [--only FIXTURE ...]

Two steps, two interpreters:

1. In the project's Python (tfprof importable): our writer (``tfprof.views.profile_proto``)
   writes the tables of each fixture profile (tests/fixtures/<F>/profile.pb, read by our
   ingest) to ``tests/golden/roundtrip/<F>.profile.pb``.
2. ``tfprof-reference python tools/make_roundtrip_golden.py --child ...`` (TensorFlow
   importable; run by step 1, one process per fixture, the native profiler being a
   per-process singleton) loads each of those files in the real tool
   (``_pywrap_tfprof.ProfilerFromFile``) and records, for a selection of the fixture's golden
   cases (tests/golden/<F>/cases.json), the report it writes (``<F>/<id>.txt``, via
   ``-output file``) and, for the narrow cases, the proto it returns (``<F>/<id>.pbtxt``,
   indentation stripped as in tools/make_golden.py). ``<F>/meta.json`` records, per case,
   whether the report equals the real tool's report on the original profile
   (tests/golden/<F>/<id>.txt).

The ``python_api`` child records what TensorFlow's own Python API gives, for
tests/test_python_api.py: ``option_builder.json`` (ProfileOptionBuilder's defaults, presets
and every setter), ``coverage.json`` (the run coverage ``AddStep`` returns per fixture step),
and ``stdout_<id>.txt`` (what a profile call prints with ``output stdout``: tfprof's banners
around the report; the calls are in ``stdout_cases.json``).

Never hand-edit the goldens: rerun this script. Regenerate after a fixture's profile.pb
changes or when the writer's output changes (tests/test_roundtrip.py says so).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _reference import FIXTURES, GOLDEN, REFERENCE, ROOT, captured, write_cases

import tfprof

OUT = GOLDEN / "roundtrip"
NAMES = ("cnn", "rnn", "multistep", "gpu_tiny")

# Cases re-run on our bytes: every view's defaults and all select fields, presets, steps, name
# regexes. Reports for all; protos only for the narrow ones (the full trees are large).
TEXT_CASES = (
    "scope_default_cli", "graph_default_cli", "op_default_cli", "code_default_cli",
    "scope_preset_time_mem", "op_step_0", "op_step_1", "op_step_2", "scope_step_1", "graph_step_2",
    "code_step_0",
)
PROTO_CASES = (
    "scope_select_all", "graph_select_all", "op_select_all", "code_select_all",
    "scope_preset_params", "op_preset_flops", "graph_trim", "code_trim", "op_show_displayed_true",
)
# gpu_tiny's cases are all small: every one, with protos.

# What the python_api child asks TensorFlow's Python API (multistep fixture).
STDOUT_CASES = [
    {"id": "scope_params", "cmd": "scope",
     "options": {"preset": "trainable_variables_parameter", "max_depth": 3}},
    {"id": "op_flops", "cmd": "op", "options": {"preset": "float_operation"}},
    {"id": "graph_time_mem", "cmd": "graph",
     "options": {"preset": "time_and_memory", "max_depth": 2, "select": ["micros", "bytes", "occurrence"],
                 "hide_name_regexes": ["save.*", "a,b"]}},
    {"id": "code_none", "cmd": "code", "options": {"preset": "float_operation", "output": "none"}},
]  # fmt: skip


def option_builder_answers(B) -> dict:  # noqa: N803  (a ProfileOptionBuilder class)
    """What the python_api child asks ProfileOptionBuilder ``B`` (TensorFlow's) and records in
    option_builder.json: the defaults, the presets and every setter. tests/test_python_api.py
    asks ours the same."""
    chain = (
        B().with_max_depth(7).with_min_memory(1, 2, 3, 4).with_min_execution_time(5, 6, 7)
        .with_min_parameters(8).with_min_occurrence(9).with_min_float_operations(10)
        .with_accounted_types(["a", "b"]).with_node_names(["s"], ["sh"], ["h"], ["t"])
        .account_displayed_op_only(True).with_file_output("/tmp/out.txt").order_by("bytes")
        .select(["bytes", "micros"]).with_step(3).build()
    )  # fmt: skip
    return {
        "default": B().build(),
        "trainable_variables_parameter": B.trainable_variables_parameter(),
        "float_operation": B.float_operation(),
        "time_and_memory": B.time_and_memory(),
        "time_and_memory_args": B.time_and_memory(11, 12, 13, 14, 15, 16, 17),
        "chain": chain,
        "from_preset": B(B.float_operation()).with_node_names(show_name_regexes=["x"]).with_timeline_output("t.json").build(),
        "outputs": [B().with_empty_output().build()["output"], B().with_stdout_output().build()["output"],
                    B().with_pprof_output("p.gz").build()["output"]],
    }  # fmt: skip


# --------------------------------------------------------------------------------------
# Step 1 (project python): our writer's bytes
# --------------------------------------------------------------------------------------


def write_ours(names) -> None:
    from tfprof.views.profile_proto import profile_proto_bytes

    OUT.mkdir(parents=True, exist_ok=True)
    for name in names:
        tables = tfprof.load(profile_path=FIXTURES / name / "profile.pb").tables()
        data = profile_proto_bytes(tables)
        (OUT / f"{name}.profile.pb").write_bytes(data)
        print(f"{name}: wrote {len(data)} bytes", flush=True)


def run_children(names) -> None:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    for child in [*names, "python_api"]:
        cmd = [REFERENCE, "python", str(Path(__file__).resolve()), "--child", child]
        print("running", " ".join(cmd[2:]), flush=True)
        subprocess.run(cmd, check=True, env=env, cwd=ROOT)


# --------------------------------------------------------------------------------------
# Step 2 (reference python): the real tool on our bytes
# --------------------------------------------------------------------------------------


def _make_golden():
    import make_golden  # noqa: PLC0415  (the real tool's view calls: Real, run_case, pbtxt)

    return make_golden


def child_views(name: str) -> None:
    mg = _make_golden()
    ours = OUT / f"{name}.profile.pb"
    real = mg.Real(ours)
    cases = json.loads((GOLDEN / name / "cases.json").read_text())
    wanted = set(TEXT_CASES) | set(PROTO_CASES)
    chosen = [c for c in cases if name == "gpu_tiny" or c["id"] in wanted]
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    meta = {
        "fixture": name,
        "profile": f"tests/golden/roundtrip/{name}.profile.pb",
        "profile_sha256": hashlib.sha256(ours.read_bytes()).hexdigest(),
        "tf_version": _tf_version(),
        "how": "_pywrap_tfprof.ProfilerFromFile(our bytes); per case _pywrap_tfprof.Profile(cmd, "
        "model_analyzer._build_options(case options with output='file:outfile=<tmp>'))",
        "load_stderr": real.load_stderr,
        "cases": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for case in chosen:
            text, raw, so, se, err = mg.run_case(real, case, Path(tmp))
            if err:
                raise RuntimeError(f"{name} {case['id']}: {err}")
            (folder / f"{case['id']}.txt").write_bytes(text or b"")
            if name == "gpu_tiny" or case["id"] in PROTO_CASES:
                (folder / f"{case['id']}.pbtxt").write_text(mg.pbtxt(real.proto(case["cmd"], raw)) if raw else "")
            if se:
                (folder / f"{case['id']}.stderr").write_text(se)
            original = GOLDEN / name / f"{case['id']}.txt"
            meta["cases"][case["id"]] = {
                "file_written": text is not None,
                "same_as_original_profile": original.read_bytes() == (text or b""),
            }
    write_cases(folder / "cases.json", chosen)
    (folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    same = sum(c["same_as_original_profile"] for c in meta["cases"].values())
    print(f"{name}: {len(chosen)} cases, {same} identical to the real tool on the original profile", flush=True)


def child_python_api() -> None:
    """TensorFlow's Python API answers: option dicts, AddStep coverage, stdout of profile calls."""
    from tensorflow.python.profiler import model_analyzer
    from tensorflow.python.profiler.option_builder import ProfileOptionBuilder as B
    from tensorflow.python.util import _pywrap_tfprof as p

    folder = OUT / "python_api"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)

    builder = option_builder_answers(B)
    (folder / "option_builder.json").write_text(json.dumps(builder, indent=1) + "\n")

    # Coverage: NewProfiler(graph, no op log), then AddStep per run_meta file, as Profiler does.
    coverage = {}
    for name in NAMES:
        d = FIXTURES / name
        graph = (d / "graph.pb") if (d / "graph.pb").exists() else (d / "graph.pbtxt")
        metas = sorted(d.glob("run_meta_*"), key=lambda f: int(f.name.split("_")[2].split(".")[0]))
        p.NewProfiler(graph.read_bytes(), b"")
        values = []
        for step, rm in enumerate(metas):
            data = rm.read_bytes()
            if rm.suffix == ".pbtxt":
                from google.protobuf import text_format
                from tensorflow.core.protobuf import config_pb2

                data = text_format.Parse(data.decode(), config_pb2.RunMetadata()).SerializeToString()
            values.append(p.AddStep(step, graph.read_bytes(), data, b""))
        p.DeleteProfiler()
        coverage[name] = values
    (folder / "coverage.json").write_text(json.dumps(coverage, indent=1) + "\n")

    # stdout of Profile() calls with output stdout (banners + report), on the original profile.
    _, _, load_err, err = captured(lambda: p.ProfilerFromFile(str(FIXTURES / "multistep" / "profile.pb").encode()))
    if err:
        raise RuntimeError(err)
    for case in STDOUT_CASES:
        opts = dict(case["options"])
        full = dict(getattr(B, opts.pop("preset"))())
        full.update(opts)
        _, so, se, err = captured(
            lambda: p.Profile(case["cmd"].encode(), model_analyzer._build_options(full).SerializeToString())
        )
        if err:
            raise RuntimeError(f"{case['id']}: {err}")
        (folder / f"stdout_{case['id']}.txt").write_text(so)
        if se:
            (folder / f"stdout_{case['id']}.stderr").write_text(se)
    (folder / "stdout_cases.json").write_text(json.dumps(STDOUT_CASES, indent=1) + "\n")
    (folder / "meta.json").write_text(json.dumps({"tf_version": _tf_version()}, indent=1) + "\n")
    print("python_api: option builder, coverage, stdout goldens written", flush=True)


def _tf_version() -> str:
    import tensorflow as tf

    return tf.__version__


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=NAMES, help="fixtures to redo (default: all)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child == "python_api":
        child_python_api()
    elif args.child:
        child_views(args.child)
    else:
        names = args.only or list(NAMES)
        write_ours(names)
        run_children(names)
    return 0


if __name__ == "__main__":
    sys.exit(main())

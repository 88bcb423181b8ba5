"""Golden outputs of the REAL tfprof for `-select tensor_value` (profiles opened with a checkpoint).

Usage (from anywhere; paths are taken from the repository root):

    /work/shared/tools/tfprof-reference python tools/make_tensor_golden.py

Runs only under the reference Python (tensorflow-cpu installed). The wheel's Python wrapper
never hands a checkpoint to the profiler, and the `tfprof` command-line binary is not in the
wheel, so this script compiles tools/tfprof_ckpt_shim.cc (g++, against the wheel's headers and
libraries) and drives TensorFlow's own TFStats through it, exactly as the binary does:
`--profile_path P --checkpoint_path C` builds TFStats(P, reader); `--graph_path G --op_log_path L
--run_meta_path R --checkpoint_path C` builds TFStats(G, nullptr, L, reader) then AddRunMeta per
file. Every case gets a fresh TFStats: the real tool appends tensor values to a node's proto on
every query, so a shared one would leak values between cases.

Writes:

    tests/fixtures/tensor_value/extra/model.ckpt.*   a checkpoint of edge cases (inf/nan, 6-digit
                        rounding, a rank-3 tensor and rows of zero length past the 10000-char
                        limit, >100000 floats for the "huge tensor" message, scalars)
    tests/fixtures/tensor_value/<source>.pbtxt   GraphDefs whose node names match the checkpoints
                        of tests/fixtures/checkpoints/* (one VariableV2 per tensor, partitioned
                        variables as `<name>/part_<k>` nodes, plus a node not in the checkpoint)
    tests/golden/tensor_value/sources.json   source name -> the tfprof inputs it opens
    tests/golden/tensor_value/tensor_cases.json  [{"id", "source", "cmd", "options"}] (full option dicts)
    tests/golden/tensor_value/<id>.txt       what the real tool wrote (`-output file:outfile=...`)
    tests/golden/tensor_value/<id>.pb.gz     the returned GraphNodeProto, binary and gzipped (it
                        carries every value of every tensor shown: up to ~1 MB raw)
    tests/golden/tensor_value/<id>.stderr    what the native code wrote on fd 2 (only if any)
    tests/golden/tensor_value/meta.json      TensorFlow version, shim build command

Never hand-edit the goldens: rerun this script.
"""

from __future__ import annotations

import ctypes
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _reference import FIXTURES, GOLDEN, ROOT, captured, write_cases  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from tensorflow.core.framework import graph_pb2  # noqa: E402
from tensorflow.core.profiler import tfprof_output_pb2  # noqa: E402
from tensorflow.python.profiler import model_analyzer, option_builder  # noqa: E402

INPUTS = FIXTURES / "tensor_value"
OUT = GOLDEN / "tensor_value"
SHIM = ROOT / "tools" / "tfprof_ckpt_shim.cc"
TF_DIR = Path(tf.__file__).parent
CKPT = "model.ckpt"

# Partitioned variables appear in a TF1 graph as `<name>/part_<k>` nodes (make_checkpoint_fixtures).
PARTS = {"partitioned": {"embedding": 3, "wide": 3, "scope/dense/kernel": 2}, "slices": {"words": 2}}


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


# ----------------------------------------------------------------------------- inputs


def make_extra_checkpoint() -> Path:
    d = INPUTS / "extra"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    rng = np.random.default_rng(5)
    special = [np.inf, -np.inf, np.nan, -np.nan, 1e-7, 123456789.0, -0.0, 0.000534315123, 0.125, 0.005,
               2.675, 1.005, -0.0049999, 99.995, 1e30]
    items = [
        ("special/float32", np.array(special, np.float32)),
        ("special/float64", np.array([*special, 5e-324, 1e300, 1 / 3], np.float64)),
        ("ints/int64", np.array([2**40, -7, 0, 2**62], np.int64)),
        ("ints/int32_matrix", np.arange(-6, 6, dtype=np.int32).reshape(3, 4)),
        ("ints/empty", np.zeros([0], np.int64)),
        ("cube", rng.standard_normal((12, 30, 30)).astype(np.float32)),
        ("rank4", np.arange(16, dtype=np.int32).reshape(2, 2, 2, 2)),
        ("tall", rng.standard_normal((3000, 2)).astype(np.float32)),
        ("zero_rows", np.zeros((5000, 0), np.float32)),
        ("scalar/double", np.float64(-2.5)),
        ("scalar/int32", np.int32(7)),
        # > 100000 elements: "Showing huge tensor"; a repeating pattern, so git stores it small
        ("huge", (np.arange(100_001) % 7).astype(np.float32)),
        ("bools", np.array([True, False])),
        ("halves", np.array([1.5, 2.0], np.float16)),
    ]
    names, values = zip(*items)
    tf.raw_ops.SaveV2(prefix=str(d / CKPT), tensor_names=list(names), shape_and_slices=[""] * len(names),
                      tensors=[v if isinstance(v, tf.Tensor) else tf.constant(v) for v in values])
    return d / CKPT


def synthetic_graph(source: str, prefix: Path) -> Path:
    """A GraphDef with one VariableV2 per checkpoint tensor (`<name>/part_<k>` nodes for
    partitioned ones) and two nodes the checkpoint lacks. Non-empty DT_STRING tensors get no
    node: TF 2.21's tfprof aborts on them (CHECK failure "Unsupported type: N3tsl7tstringE",
    its string check predates tstring), and a sliced one only prints "Dtype string not supported."."""
    reader = tf.train.load_checkpoint(str(prefix))
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    g = graph_pb2.GraphDef()
    names = []
    for name in sorted(shapes):
        if dtypes[name] == tf.string and np.prod(shapes[name]) > 0:
            continue  # the real tool aborts on a non-empty string tensor (see module doc)
        parts = PARTS.get(source, {}).get(name)
        names += [(f"{name}/part_{k}", name) for k in range(parts)] if parts else [(name, name)]
    for node_name, var in names:
        node = g.node.add(name=node_name, op="VariableV2")
        node.attr["dtype"].type = dtypes[var].as_datatype_enum
        dims = shapes[var]
        if node_name != var:  # a partition: split along its first dim
            dims = [dims[0] // PARTS[source][var]] + list(dims[1:])
        node.attr["shape"].shape.CopyFrom(tf.TensorShape(dims).as_proto())
    g.node.add(name="not_in_checkpoint/op", op="NoOp")
    g.node.add(name="init", op="NoOp")
    path = INPUTS / f"{source}.pbtxt"
    path.write_text(text_format.MessageToString(g))
    return path


def sources() -> dict[str, dict]:
    INPUTS.mkdir(parents=True, exist_ok=True)
    cnn = FIXTURES / "cnn"
    out = {
        "cnn_profile": {"profile_path": rel(cnn / "profile.pb"), "checkpoint_path": rel(cnn / CKPT)},
        "cnn_inputs": {
            "graph_path": rel(cnn / "graph.pb"),
            "run_meta_path": [rel(p) for p in sorted(cnn.glob("run_meta_*.pb"))],
            "op_log_path": rel(cnn / "op_log.pb"),
            "checkpoint_path": rel(cnn / CKPT),
        },
    }
    ckpts = {n: FIXTURES / "checkpoints" / n / CKPT for n in ("dtypes", "sharded", "partitioned", "slices",
                                                              "tf2_sharded")}
    ckpts["extra"] = make_extra_checkpoint()
    for name, prefix in ckpts.items():
        out[name] = {"graph_path": rel(synthetic_graph(name, prefix)), "checkpoint_path": rel(prefix)}
    return out


# ----------------------------------------------------------------------------- cases


def options(**over) -> dict:
    full = dict(option_builder.ProfileOptionBuilder().build())
    full.update(output="stdout", **over)
    return full


def cases() -> list[dict]:
    c: list[dict] = []

    def add(cid: str, source: str, cmd: str, **over) -> None:
        c.append({"id": cid, "source": source, "cmd": cmd, "options": options(**over)})

    tv = ["tensor_value"]
    # The tutorial's "BatchNorm gamma" query (seeds), on the cnn model.
    add("scope_bn_gamma", "cnn_profile", "scope", show_name_regexes=[".*bn/gamma"], select=tv, max_depth=5)
    add("scope_bn_gamma_inputs", "cnn_inputs", "scope", show_name_regexes=[".*bn/gamma"], select=tv, max_depth=5)
    add("scope_stem_params", "cnn_profile", "scope", start_name_regexes=["resnet/stem"], select=["params", *tv],
        max_depth=3)
    add("scope_start_max_depth", "cnn_inputs", "scope", start_name_regexes=["resnet/block2.*"],
        select=["params", *tv], max_depth=2)
    add("scope_trim_hide", "cnn_inputs", "scope", trim_name_regexes=["train", "save"],
        hide_name_regexes=[".*Initializer.*", ".*/read", ".*Assign.*"], select=tv, max_depth=4)
    add("graph_logits", "cnn_inputs", "graph", start_name_regexes=["resnet/logits/MatMul"], select=["params", *tv],
        max_depth=3)
    add("graph_profile_show", "cnn_profile", "graph", show_name_regexes=["resnet/block1/.*(kernel|gamma|beta)"],
        select=tv, max_depth=30)
    # _checkpoint_variables: added to node types only when built from a graph (docs/TFPROF_BEHAVIOUR.md, 'Ingesting a checkpoint').
    add("scope_ckpt_vars", "cnn_inputs", "scope", account_type_regexes=["_checkpoint_variables"],
        select=["params"], max_depth=4)
    add("scope_ckpt_vars_values", "cnn_inputs", "scope", account_type_regexes=["_checkpoint_variables"],
        show_name_regexes=[".*moving_.*", "global_step"], select=["params", *tv], max_depth=10)
    add("scope_ckpt_vars_profile", "cnn_profile", "scope", account_type_regexes=["_checkpoint_variables"],
        select=["params"], max_depth=4)
    add("scope_no_tensor_value", "cnn_inputs", "scope", show_name_regexes=[".*bn/gamma"], select=["params"],
        max_depth=5)
    add("scope_displayed_only", "cnn_inputs", "scope", account_type_regexes=["_checkpoint_variables"],
        account_displayed_op_only=True, show_name_regexes=[".*beta"], select=["params", *tv], max_depth=6)
    # Every dtype, scalars, zero-size, strings, a 20000-float tensor past the display limit.
    for src in ("dtypes", "sharded", "partitioned", "slices", "tf2_sharded", "extra"):
        add(f"scope_all_{src}", src, "scope", select=["params", *tv], max_depth=100)
    # (the 20000-float "big" once is enough: every shown tensor's values are in the proto)
    add("graph_all_dtypes", "dtypes", "graph", select=tv, hide_name_regexes=["big"], max_depth=100)
    add("graph_all_partitioned", "partitioned", "graph", select=tv, max_depth=100)
    add("scope_depth1_extra", "extra", "scope", select=tv, max_depth=1)
    add("scope_order_params_dtypes", "dtypes", "scope", select=["params", *tv], order_by="params",
        hide_name_regexes=["big"], max_depth=100)
    add("scope_start_extra", "extra", "scope", start_name_regexes=["special.*", "ints"], select=tv, max_depth=100)
    return c


# ----------------------------------------------------------------------------- the real tool


class Shim:
    """TensorFlow's TFStats with a checkpoint, through tools/tfprof_ckpt_shim.cc."""

    def __init__(self, tmp: Path) -> None:
        self.cmd = [
            "g++", "-std=c++17", "-O1", "-shared", "-fPIC", f"-I{TF_DIR / 'include'}", str(SHIM), "-o",
            str(tmp / "shim.so"), f"-L{TF_DIR}", "-l:libtensorflow_cc.so.2", "-l:libtensorflow_framework.so.2",
            f"-Wl,-rpath,{TF_DIR}", "-Wl,--no-undefined", "-w",
        ]
        subprocess.run(self.cmd, check=True)
        lib = ctypes.CDLL(str(tmp / "shim.so"))
        lib.shim_from_profile.restype = ctypes.c_void_p
        lib.shim_from_profile.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]
        lib.shim_from_inputs.restype = ctypes.c_void_p
        lib.shim_from_inputs.argtypes = [
            ctypes.c_char_p, ctypes.c_int64, ctypes.c_char_p, ctypes.c_int64, ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
            ctypes.POINTER(ctypes.c_char_p),
        ]
        lib.shim_show.restype = ctypes.POINTER(ctypes.c_char)
        lib.shim_show.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64,
                                  ctypes.POINTER(ctypes.c_int64)]
        self.lib = lib

    def open(self, src: dict) -> int:
        err = ctypes.c_char_p()
        ckpt = str(ROOT / src["checkpoint_path"]).encode()
        if "profile_path" in src:
            h = self.lib.shim_from_profile(str(ROOT / src["profile_path"]).encode(), ckpt, ctypes.byref(err))
        else:
            graph = _graph_bytes(ROOT / src["graph_path"])
            op_log = (ROOT / src["op_log_path"]).read_bytes() if src.get("op_log_path") else b""
            rms = [(ROOT / p).read_bytes() for p in src.get("run_meta_path", [])]
            arr = (ctypes.c_char_p * max(len(rms), 1))(*rms)
            lens = (ctypes.c_int64 * max(len(rms), 1))(*[len(r) for r in rms])
            h = self.lib.shim_from_inputs(graph, len(graph), op_log, len(op_log), ckpt, arr, lens, len(rms),
                                          ctypes.byref(err))
        if not h:
            raise RuntimeError(f"cannot open {src}: {err.value}")
        return h

    def show(self, handle: int, cmd: str, opts: dict) -> bytes:
        raw = model_analyzer._build_options(opts).SerializeToString()
        n = ctypes.c_int64()
        p = self.lib.shim_show(handle, cmd.encode(), raw, len(raw), ctypes.byref(n))
        if not p:
            raise RuntimeError("bad options")
        return ctypes.string_at(p, n.value)


def _graph_bytes(path: Path) -> bytes:
    g = graph_pb2.GraphDef()
    raw = path.read_bytes()
    if path.suffix == ".pbtxt":
        text_format.Parse(raw.decode(), g)
    else:
        g.ParseFromString(raw)
    return g.SerializeToString()


def main() -> None:
    srcs = sources()
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    all_cases = cases()
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        shim = Shim(tmp)
        for case in all_cases:
            handle = shim.open(srcs[case["source"]])
            outfile = tmp / f"{case['id']}.txt"
            opts = dict(case["options"], output=f"file:outfile={outfile}")
            raw, so, se, err = captured(lambda: shim.show(handle, case["cmd"], opts))
            if err:
                raise RuntimeError(f"{case['id']}: {err}")
            (OUT / f"{case['id']}.txt").write_bytes(outfile.read_bytes() if outfile.exists() else b"")
            # re-serialized deterministically: the tool writes map entries in hash order
            raw = tfprof_output_pb2.GraphNodeProto.FromString(raw).SerializeToString(deterministic=True)
            (OUT / f"{case['id']}.pb.gz").write_bytes(gzip.compress(raw, mtime=0))
            if se:
                (OUT / f"{case['id']}.stderr").write_text(se)
            if so:
                (OUT / f"{case['id']}.stdout").write_text(so)
            print(f"{case['id']}: {len(raw)} proto bytes, {se.count(chr(10))} stderr lines", file=sys.stderr)
    (OUT / "sources.json").write_text(json.dumps(srcs, indent=1) + "\n")
    write_cases(OUT / "tensor_cases.json", all_cases)
    (OUT / "meta.json").write_text(json.dumps({"tensorflow": tf.__version__, "shim_build": shim.cmd[:1] + [
        a.replace(str(TF_DIR), "<tensorflow>").replace(str(ROOT) + "/", "").replace(tmp_s, "<tmp>")
        for a in shim.cmd[1:]
    ]}, indent=1) + "\n")


if __name__ == "__main__":
    main()

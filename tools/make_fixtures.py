"""Build test fixtures and golden outputs with the REAL TensorFlow tfprof.

Usage (from anywhere; the script works from the repository root):

    /work/shared/tools/tfprof-reference python tools/make_fixtures.py [--only NAME]

This script runs under the reference Python (tensorflow-cpu installed), never under the
project's own environment: TensorFlow is not a dependency of the tfprof package.

For each fixture NAME (cnn, rnn, multistep) it builds a small model in TF1 graph mode
(tf.compat.v1, Session, v1 control flow), runs traced training steps and writes into
tests/fixtures/NAME/:

    graph.pbtxt, graph.pb         GraphDef with _output_shapes (as_graph_def(add_shapes=True))
    run_meta_<i>.pb               RunMetadata of traced step i (FULL_TRACE)
    op_log.pb                     OpLogProto from tfprof_logger.merge_default_with_oplog
                                  (run_meta of step 0, add_trace=True)
    model.ckpt.index, model.ckpt.data-00000-of-00001   V2 checkpoint after the steps
    profile.pb                    ProfileProto written by `tfprof-reference build`
    golden/totals.json            root GraphNodeProto totals of the scope view, profile.pb loaded
                                  with ProfilerFromFile
    golden/totals_raw.json        the same numbers from a profiler fed graph.pb + run_meta + op_log
                                  directly (NewProfiler/AddStep), plus the run coverage per step
    golden/{scope,op,graph,code}_default.txt   stdout of `tfprof-reference view profile.pb CMD '{}'`
    golden/tf_version.txt

Timings change on every run, so the fixture files and the goldens are always regenerated
together; never edit a golden by hand.

Each fixture is generated in a fresh child process (this same script with --child NAME,
run from the repository root as `tools/make_fixtures.py`) so that TensorFlow's global state
(default graph, the single native profiler) never leaks between fixtures and so that the
Python file names recorded in the code traces are the relative path `tools/make_fixtures.py`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
REFERENCE = os.environ.get("TFPROF_REFERENCE", "/work/shared/tools/tfprof-reference")
SCRIPT_REL = "tools/make_fixtures.py"
SEED = 1234
NAMES = ("cnn", "rnn", "multistep")

# Exact integer fields of the root GraphNodeProto recorded in the goldens.
TOTAL_FIELDS = (
    "total_definition_count",
    "total_run_count",
    "total_exec_micros",
    "total_accelerator_exec_micros",
    "total_cpu_exec_micros",
    "total_requested_bytes",
    "total_peak_bytes",
    "total_residual_bytes",
    "total_output_bytes",
    "total_parameters",
    "total_float_ops",
)
TOTAL_SELECT = ["params", "float_ops", "micros", "bytes", "peak_bytes", "residual_bytes",
                "output_bytes", "occurrence"]
VIEW_CMDS = ("scope", "op", "graph", "code")


# --------------------------------------------------------------------------------------
# Models (only called in the child process, TensorFlow imported lazily)
# --------------------------------------------------------------------------------------

def _tf():
    import tensorflow as tf  # noqa: PLC0415  (reference python only)
    return tf


def build_cnn(tf):
    """Small ResNet-like CNN: stem conv, two residual blocks (conv + fused BN + relu +
    add shortcut, the second one strided with a 1x1 conv projection shortcut), global pooling,
    dense layer, softmax cross entropy, plain SGD with a global step. Ref (VariableV2)
    variables; the BN moving statistics are non-trainable variables.
    Images placeholder has an unknown batch dimension."""
    v1 = tf.compat.v1
    n_classes = 5

    def conv(x, out_ch, k, stride, name):
        in_ch = int(x.shape[-1])
        with v1.variable_scope(name):
            w = v1.get_variable(
                "weights", [k, k, in_ch, out_ch],
                initializer=v1.truncated_normal_initializer(stddev=(2.0 / (k * k * in_ch)) ** 0.5))
            return tf.nn.conv2d(x, w, strides=[1, stride, stride, 1], padding="SAME", name="Conv2D")

    def batch_norm(x, name, decay=0.9):
        ch = int(x.shape[-1])
        with v1.variable_scope(name):
            gamma = v1.get_variable("gamma", [ch], initializer=v1.ones_initializer())
            beta = v1.get_variable("beta", [ch], initializer=v1.zeros_initializer())
            mm = v1.get_variable("moving_mean", [ch], initializer=v1.zeros_initializer(),
                                 trainable=False)
            mv = v1.get_variable("moving_variance", [ch], initializer=v1.ones_initializer(),
                                 trainable=False)
            y, mean, var = v1.nn.fused_batch_norm(x, gamma, beta, epsilon=1e-3,
                                                  is_training=True, name="FusedBatchNorm")
            with tf.name_scope("update"):
                upd_m = v1.assign_sub(mm, (mm - mean) * (1.0 - decay), name="moving_mean")
                upd_v = v1.assign_sub(mv, (mv - var) * (1.0 - decay), name="moving_variance")
            v1.add_to_collection(v1.GraphKeys.UPDATE_OPS, upd_m)
            v1.add_to_collection(v1.GraphKeys.UPDATE_OPS, upd_v)
            return y

    def residual_block(x, out_ch, stride, name):
        with v1.variable_scope(name):
            shortcut = x
            if stride != 1 or int(x.shape[-1]) != out_ch:
                shortcut = conv(x, out_ch, 1, stride, "shortcut")
            with v1.variable_scope("sub1"):
                h = tf.nn.relu(batch_norm(conv(x, out_ch, 3, stride, "conv"), "bn"), name="Relu")
            with v1.variable_scope("sub2"):
                h = batch_norm(conv(h, out_ch, 3, 1, "conv"), "bn")
            with tf.name_scope("add"):
                return tf.nn.relu(h + shortcut, name="Relu")

    with tf.name_scope("input"):
        images = v1.placeholder(tf.float32, [None, 16, 16, 3], name="images")
        labels = v1.placeholder(tf.int64, [None], name="labels")
    with v1.variable_scope("resnet"):
        with v1.variable_scope("stem"):
            h = tf.nn.relu(batch_norm(conv(images, 8, 3, 1, "conv"), "bn"), name="Relu")
        h = residual_block(h, 8, 1, "block1")
        h = residual_block(h, 16, 2, "block2")
        with tf.name_scope("pool"):
            h = tf.reduce_mean(h, axis=[1, 2], name="global_avg")
        with v1.variable_scope("logits"):
            w = v1.get_variable("weights", [16, n_classes],
                                initializer=v1.glorot_uniform_initializer())
            b = v1.get_variable("biases", [n_classes], initializer=v1.zeros_initializer())
            logits = tf.nn.bias_add(tf.matmul(h, w), b)
    with tf.name_scope("loss"):
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        loss = tf.reduce_mean(xent, name="xent_mean")
    global_step = v1.train.get_or_create_global_step()
    with tf.name_scope("train"):
        with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
            train_op = v1.train.GradientDescentOptimizer(0.05).minimize(
                loss, global_step=global_step)

    rng = __import__("numpy").random.RandomState(SEED)
    batch = 2

    def feeds(step):
        return {images: rng.standard_normal((batch, 16, 16, 3)).astype("float32"),
                labels: rng.randint(0, n_classes, size=(batch,)).astype("int64")}

    return dict(fetches=lambda step: train_op, feeds=feeds, steps=1)


class _TinyLSTMCell:
    """Minimal LSTM cell usable by tf.compat.v1.nn.dynamic_rnn (the Keras-based
    tf.compat.v1.nn.rnn_cell classes are not available with Keras 3). Variables are created
    up front, outside the while loop."""

    def __init__(self, tf, input_dim, num_units, name="lstm_cell"):
        v1 = tf.compat.v1
        self._tf = tf
        self._num_units = num_units
        with v1.variable_scope(name):
            self._kernel = v1.get_variable(
                "kernel", [input_dim + num_units, 4 * num_units],
                initializer=v1.glorot_uniform_initializer())
            self._bias = v1.get_variable("bias", [4 * num_units],
                                         initializer=v1.zeros_initializer())

    @property
    def state_size(self):
        return (self._num_units, self._num_units)

    @property
    def output_size(self):
        return self._num_units

    def zero_state(self, batch_size, dtype):
        tf = self._tf
        with tf.name_scope("LSTMCellZeroState"):
            return (tf.zeros([batch_size, self._num_units], dtype, name="zeros_c"),
                    tf.zeros([batch_size, self._num_units], dtype, name="zeros_h"))

    def __call__(self, inputs, state, scope=None):
        tf = self._tf
        c, h = state
        with tf.name_scope("lstm_cell"):
            gates = tf.nn.bias_add(tf.matmul(tf.concat([inputs, h], 1), self._kernel), self._bias)
            i, j, f, o = tf.split(gates, 4, axis=1)
            new_c = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i) * tf.tanh(j)
            new_h = tf.tanh(new_c) * tf.sigmoid(o)
        return new_h, (new_c, new_h)


def build_rnn(tf):
    """LSTM over a length-3 sequence of feature vectors with tf.compat.v1.nn.dynamic_rnn (v1 while
    loop: Enter/Merge/Switch/NextIteration/Exit nodes, body nodes run 3 times per step),
    dense layer on the last output, softmax cross entropy, Adam optimizer. Two traced steps."""
    v1 = tf.compat.v1
    n_in, units, seq_len, n_classes, batch = 4, 8, 3, 3, 2
    with tf.name_scope("input"):
        inputs = v1.placeholder(tf.float32, [batch, seq_len, n_in], name="inputs")
        labels = v1.placeholder(tf.int32, [batch], name="labels")
    with v1.variable_scope("model"):
        cell = _TinyLSTMCell(tf, n_in, units, name="rnn/lstm_cell")
        outputs, _ = v1.nn.dynamic_rnn(cell, inputs, dtype=tf.float32, scope="rnn")
        last = outputs[:, -1, :]
        with v1.variable_scope("logits"):
            w = v1.get_variable("weights", [units, n_classes],
                                initializer=v1.glorot_uniform_initializer())
            b = v1.get_variable("biases", [n_classes], initializer=v1.zeros_initializer())
            logits = tf.matmul(last, w) + b
    with tf.name_scope("loss"):
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    global_step = v1.train.get_or_create_global_step()
    with tf.name_scope("train"):
        train_op = v1.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)

    rng = __import__("numpy").random.RandomState(SEED)

    def feeds(step):
        return {inputs: rng.standard_normal((batch, seq_len, n_in)).astype("float32"),
                labels: rng.randint(0, n_classes, size=(batch,)).astype("int32")}

    return dict(fetches=lambda step: train_op, feeds=feeds, steps=2)


def build_multistep(tf):
    """MLP 8-16-16-3 with resource variables (VarHandleOp/ReadVariableOp) and fully defined
    placeholder shapes, Momentum optimizer (ResourceApplyMomentum). Three traced steps; step 1 additionally fetches an
    accuracy metric, so some nodes (scope `metrics`) run in step 1 only."""
    v1 = tf.compat.v1
    batch, n_in, hidden, n_classes = 4, 8, 16, 3
    with tf.name_scope("input"):
        x = v1.placeholder(tf.float32, [batch, n_in], name="x")
        y = v1.placeholder(tf.int64, [batch], name="y")

    def dense(h, out, name, act=True):
        with v1.variable_scope(name):
            w = v1.get_variable("weights", [int(h.shape[-1]), out], use_resource=True,
                                initializer=v1.glorot_uniform_initializer())
            b = v1.get_variable("biases", [out], use_resource=True,
                                initializer=v1.zeros_initializer())
            z = tf.matmul(h, w) + b
            return tf.nn.relu(z) if act else z

    with v1.variable_scope("mlp"):
        h = dense(x, hidden, "fc1")
        h = dense(h, hidden, "fc2")
        logits = dense(h, n_classes, "out", act=False)
    with tf.name_scope("loss"):
        loss = v1.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
    with tf.name_scope("metrics"):
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32),
                                  name="accuracy")
    with tf.name_scope("train"):
        train_op = v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss)

    rng = __import__("numpy").random.RandomState(SEED)

    def feeds(step):
        return {x: rng.standard_normal((batch, n_in)).astype("float32"),
                y: rng.randint(0, n_classes, size=(batch,)).astype("int64")}

    def fetches(step):
        return [train_op, accuracy] if step == 1 else train_op

    return dict(fetches=fetches, feeds=feeds, steps=3)


BUILDERS = {"cnn": build_cnn, "rnn": build_rnn, "multistep": build_multistep}


# --------------------------------------------------------------------------------------
# Real-tfprof helpers (child process)
# --------------------------------------------------------------------------------------

@contextlib.contextmanager
def capture_fd2(sink: list):
    """Capture what native code writes to file descriptor 2 (stderr)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            sink.append(tmp.read().decode(errors="replace"))


def scope_totals(p, step: int, account) -> dict:
    from tensorflow.core.profiler import tfprof_output_pb2
    from tensorflow.python.profiler import model_analyzer, option_builder

    opts = dict(option_builder.ProfileOptionBuilder().build())
    opts.update(account_type_regexes=list(account), select=list(TOTAL_SELECT),
                max_depth=10000, output="none", step=step)
    raw = p.Profile(b"scope", model_analyzer._build_options(opts).SerializeToString())
    node = tfprof_output_pb2.GraphNodeProto.FromString(raw)
    return {f: int(getattr(node, f)) for f in TOTAL_FIELDS}


def all_totals(p, steps) -> dict:
    out = {"all": {}, "trainable": None}
    for s in [-1, *steps]:
        out["all"][str(s)] = scope_totals(p, s, [".*"])
    out["trainable"] = scope_totals(p, -1, ["_trainable_variables"])
    return out


def options_doc() -> dict:
    return {
        "cmd": "scope",
        "account_type_regexes": "['.*'] for 'all'; ['_trainable_variables'] for 'trainable'",
        "select": TOTAL_SELECT,
        "max_depth": 10000,
        "output": "none",
        "step": "-1 and each step (keys of 'all'); -1 for 'trainable'",
        "other": "tensorflow ProfileOptionBuilder().build() defaults, via model_analyzer._build_options",
        "fields": "root GraphNodeProto returned by _pywrap_tfprof.Profile(b'scope', ...)",
    }


def reference(*args, capture=True):
    return subprocess.run([REFERENCE, *args], cwd=ROOT, capture_output=capture, text=True,
                          check=True)


def make_fixture(name: str) -> None:
    os.chdir(ROOT)
    out = FIXTURES / name
    if out.exists():
        shutil.rmtree(out)
    (out / "golden").mkdir(parents=True)
    rel = out.relative_to(ROOT)

    import numpy as np
    tf = _tf()
    v1 = tf.compat.v1
    v1.disable_v2_behavior()  # graph mode, v1 control flow, ref variables by default
    from google.protobuf import text_format
    from tensorflow.core.profiler import tfprof_log_pb2
    from tensorflow.python.profiler import tfprof_logger

    np.random.seed(SEED)
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(SEED)
        spec = BUILDERS[name](tf)
        init = v1.global_variables_initializer()
        saver = v1.train.Saver()  # built with the model, so save/restore nodes are in the graph
    config = v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                            device_count={"CPU": 1})
    run_metas = []
    with v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        for step in range(spec["steps"]):
            rm = v1.RunMetadata()
            sess.run(spec["fetches"](step), feed_dict=spec["feeds"](step),
                     options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE),
                     run_metadata=rm)
            run_metas.append(rm)
            (out / f"run_meta_{step}.pb").write_bytes(rm.SerializeToString(deterministic=True))
        # Like Profiler.add_step: the op log is computed with a RunMetadata (it completes the
        # graph's static shapes in place), then the graph is serialised with add_shapes=True.
        op_log = tfprof_logger.merge_default_with_oplog(graph, run_meta=run_metas[0],
                                                        add_trace=True)
        graph_def = graph.as_graph_def(add_shapes=True)
        saver.save(sess, str(out / "model.ckpt"), write_meta_graph=False, write_state=False)

    (out / "op_log.pb").write_bytes(op_log.SerializeToString(deterministic=True))
    (out / "graph.pb").write_bytes(graph_def.SerializeToString(deterministic=True))
    (out / "graph.pbtxt").write_text(text_format.MessageToString(graph_def))
    n_traced = sum(1 for e in op_log.log_entries if e.code_def.traces)
    n_flops = sum(1 for e in op_log.log_entries if e.float_ops)
    n_train = sum(1 for e in op_log.log_entries if "_trainable_variables" in e.types)
    print(f"[{name}] graph nodes={len(graph_def.node)} op_log entries={len(op_log.log_entries)} "
          f"(traces={n_traced}, float_ops={n_flops}, trainable={n_train})")
    assert n_traced and n_flops and n_train

    # profile.pb, built by the real tool from exactly the files on disk.
    steps = list(range(spec["steps"]))
    build_args = ["build", f"{rel}/profile.pb", f"{rel}/graph.pb"]
    for s in steps:
        build_args += ["--run_meta", f"{rel}/run_meta_{s}.pb"]
    build_args += ["--op_log", f"{rel}/op_log.pb"]
    r = reference(*build_args)
    if r.stderr.strip():
        print(f"[{name}] build stderr:\n{_clean(r.stderr)}")

    from tensorflow.core.framework import graph_pb2
    from tensorflow.python.util import _pywrap_tfprof as p

    version = tf.__version__
    (out / "golden" / "tf_version.txt").write_text(version + "\n")
    prof = tfprof_log_pb2.ProfileProto.FromString((out / "profile.pb").read_bytes())
    meta = {
        "tf_version": version,
        "num_nodes": len(prof.nodes),
        "num_graph_nodes": len(graph_def.node),
        "steps": list(prof.steps),
        "has_trace": bool(prof.has_trace),
        "miss_accelerator_stream": bool(prof.miss_accelerator_stream),
        "options": options_doc(),
    }

    # totals_raw.json: profiler fed the fixture files directly (what `build` does).
    errs: list[str] = []
    g = graph_pb2.GraphDef.FromString((out / "graph.pb").read_bytes()).SerializeToString()
    op_log_bytes = (out / "op_log.pb").read_bytes()
    with capture_fd2(errs):
        p.NewProfiler(g, op_log_bytes)
        coverage = {}
        for s in steps:
            coverage[str(s)] = p.AddStep(s, g, (out / f"run_meta_{s}.pb").read_bytes(),
                                         op_log_bytes)
        raw = all_totals(p, steps)
        p.DeleteProfiler()
    raw_doc = {**meta, "source": "NewProfiler(graph.pb, op_log.pb) + AddStep(i, graph.pb, "
               "run_meta_i.pb, op_log.pb)", "run_coverage": coverage, **raw}
    _write_json(out / "golden" / "totals_raw.json", raw_doc)

    # totals.json: profile.pb loaded with ProfilerFromFile.
    with capture_fd2(errs):
        p.ProfilerFromFile(str(out / "profile.pb").encode())
        loaded = all_totals(p, steps)
        p.DeleteProfiler()
    doc = {**meta, "source": "ProfilerFromFile(profile.pb)", **loaded}
    _write_json(out / "golden" / "totals.json", doc)
    native_err = _clean("".join(errs))
    if native_err:
        print(f"[{name}] native profiler stderr (totals):\n{_summarize(native_err)}")
    if raw != loaded:
        print(f"[{name}] WARNING: totals.json differs from totals_raw.json")
        for key in ("all", "trainable"):
            if raw[key] != loaded[key]:
                print(f"  {key}: raw={raw[key]}\n  {key}: loaded={loaded[key]}")
    else:
        print(f"[{name}] totals.json == totals_raw.json")

    # Default text views.
    for cmd in VIEW_CMDS:
        r = reference("view", f"{rel}/profile.pb", cmd, "{}")
        (out / "golden" / f"{cmd}_default.txt").write_text(r.stdout)
        err = _clean(r.stderr)
        if err:
            print(f"[{name}] view {cmd} stderr:\n{_summarize(err)}")

    for path in sorted(out.rglob("*")):
        if path.is_file():
            print(f"  wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")
    print(f"[{name}] profile nodes={meta['num_nodes']} steps={meta['steps']} "
          f"total={raw['all']['-1']}")


_NOISE = ("oneDNN custom operations", "All log messages before absl::InitializeLog")


def _clean(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.strip() and not any(n in line for n in _NOISE))


def _summarize(text: str) -> str:
    from collections import Counter
    counts = Counter(text.splitlines())
    return "\n".join(f"    {n}x {line}" for line, n in counts.most_common())


def _write_json(path: Path, doc: dict) -> None:
    path.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")


# --------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Build tfprof fixtures with real TensorFlow.")
    ap.add_argument("--only", choices=NAMES, action="append",
                    help="regenerate only this fixture (repeatable)")
    ap.add_argument("--child", choices=NAMES, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        make_fixture(args.child)
        return 0
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["TF_ENABLE_ONEDNN_OPTS"] = "0"  # same kernels on every x86 CPU, no oneDNN rewrites
    env["PYTHONHASHSEED"] = "0"
    for name in args.only or NAMES:
        print(f"=== {name}", flush=True)
        subprocess.run([sys.executable, SCRIPT_REL, "--child", name], cwd=ROOT, env=env,
                       check=True)
    subprocess.run(["du", "-shc", *(f"tests/fixtures/{n}" for n in NAMES)], cwd=ROOT, check=False)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        # Called straight from module level: one Python frame less in every op's code trace.
        make_fixture(sys.argv[2])
        sys.exit(0)
    sys.exit(main())

"""Make the profile pairs of ``tfprof diff``'s tests with real TensorFlow (tests/fixtures/diff/).

    /work/shared/tools/tfprof-reference python tools/make_diff_fixtures.py

One MLP (``mlp/fc1``, ``mlp/fc2``, ``mlp/out``; batch 64, 256 inputs, ReLU, softmax cross
entropy, plain SGD), run in TF1 graph mode with one intra-op and one inter-op thread, in three
variants, each in a session of its own, one after the other in this process:

* ``base``:  ``mlp/fc2`` has 256 units;
* ``again``: the same model and feeds as ``base``, run again (unchanged: every difference
  from ``base`` is noise);
* ``wide``:  ``mlp/fc2`` widened to 1024 units (the known change: ``mlp/fc2`` and the layer
  after it, ``mlp/out``, forward and backward, do more work; MatMul is the op type that slows).

Each variant runs ``WARMUP`` untraced steps, then ``STEPS`` traced ones; its ``profile.pb`` is
built by the real tool (``tfprof-reference build``) from the graph, the traced steps'
RunMetadata and the op log, which are not kept (only ``profile.pb`` is committed). Times change
on every run: regenerate all three together, never one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "diff"
REFERENCE = os.environ.get("TFPROF_REFERENCE", "/work/shared/tools/tfprof-reference")
SEED = 4321
WARMUP, STEPS = 3, 6
BATCH, N_IN, N_CLASSES = 64, 256, 10
VARIANTS = {"base": 256, "again": 256, "wide": 1024}  # variant -> fc2 units


def build(tf, fc2_units: int):
    v1 = tf.compat.v1
    x = v1.placeholder(tf.float32, [BATCH, N_IN], name="input/x")
    y = v1.placeholder(tf.int64, [BATCH], name="input/y")

    def dense(h, units, name, act=True):
        with v1.variable_scope(name):
            w = v1.get_variable("weights", [int(h.shape[-1]), units], initializer=v1.glorot_uniform_initializer())
            b = v1.get_variable("biases", [units], initializer=v1.zeros_initializer())
            z = tf.matmul(h, w) + b
            return tf.nn.relu(z) if act else z

    with v1.variable_scope("mlp"):
        h = dense(x, 256, "fc1")
        h = dense(h, fc2_units, "fc2")
        logits = dense(h, N_CLASSES, "out", act=False)
    with tf.name_scope("loss"):
        loss = v1.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
    with tf.name_scope("train"):
        train_op = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
    return x, y, train_op


def make(name: str, fc2_units: int, work: Path) -> None:
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.profiler import tfprof_logger

    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(SEED)
        x, y, train_op = build(tf, fc2_units)
        init = v1.global_variables_initializer()
    rng = np.random.RandomState(SEED)
    feeds = [(rng.standard_normal((BATCH, N_IN)).astype("float32"), rng.randint(0, N_CLASSES, BATCH).astype("int64"))
             for _ in range(WARMUP + STEPS)]
    config = v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1, device_count={"CPU": 1})
    d = work / name
    d.mkdir()
    metas = []
    with v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        for i, (fx, fy) in enumerate(feeds):
            traced = i >= WARMUP
            rm = v1.RunMetadata()
            options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE) if traced else None
            sess.run(train_op, feed_dict={x: fx, y: fy}, options=options, run_metadata=rm if traced else None)
            if traced:
                metas.append(rm)
        op_log = tfprof_logger.merge_default_with_oplog(graph, run_meta=metas[0], add_trace=False)
        graph_def = graph.as_graph_def(add_shapes=True)
    (d / "graph.pb").write_bytes(graph_def.SerializeToString(deterministic=True))
    (d / "op_log.pb").write_bytes(op_log.SerializeToString(deterministic=True))
    args = [REFERENCE, "build", str(OUT / name / "profile.pb"), str(d / "graph.pb")]
    for s, rm in enumerate(metas):
        (d / f"run_meta_{s}.pb").write_bytes(rm.SerializeToString(deterministic=True))
        args += ["--run_meta", str(d / f"run_meta_{s}.pb")]
    args += ["--op_log", str(d / "op_log.pb")]
    (OUT / name).mkdir(parents=True, exist_ok=True)
    subprocess.run(args, check=True, capture_output=True)
    print(f"[{name}] fc2 {fc2_units} units: {len(graph_def.node)} graph nodes, {STEPS} traced steps")


def main() -> int:
    tf = __import__("tensorflow")
    tf.compat.v1.disable_v2_behavior()
    if OUT.exists():
        shutil.rmtree(OUT)
    with tempfile.TemporaryDirectory() as tmp:
        for name, units in VARIANTS.items():
            make(name, units, Path(tmp))
    (OUT / "tf_version.txt").write_text(tf.__version__ + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

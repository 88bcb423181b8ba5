"""Profiling overhead of a traced training step: ``tfprof.ProfileContext`` vs TensorFlow's own path.

    .venv-tf/bin/python benchmarks/bench_capture.py            # 12 conv blocks, 30 traced steps
    .venv-tf/bin/python benchmarks/bench_capture.py --quick    # CI: 4 blocks, 8 steps

Needs TensorFlow (``pip install -e '.[tensorflow]'``). A small CNN (conv blocks + dense head,
trained with Adam; batch size unknown to the graph, as usual) runs on one CPU thread:

- **plain run** / **full-trace run**: ``Session.run`` of the train op without / with
  ``FULL_TRACE`` and nothing else: what any profiler pays to TensorFlow itself;
- **tfprof.ProfileContext**: every step traced by our context (``trace_steps=range(n)``), the
  RunMetadata added to our Profiler;
- **TensorFlow's path**: what its ProfileContext did per traced step, through the native
  profiler TF 2.21 still ships: a full-trace run, then ``model_analyzer.Profiler.add_step``
  (the Python op log over the whole graph, RunMetadata serialised, parsed by the C++ profiler);
- the first traced step (the profiler is created: graph and op log with every op's traceback),
  and writing the ``profile_<step>`` file at the end (ours vs ``Profiler._write_profile``; our
  first write in a process also loads the writer's compiled kernels, timed apart);
- an untraced step inside the context (the patched ``Session.run``'s fast path).

Each figure is the median over the steps (seconds); "overhead" subtracts the full-trace run.
Prints a Markdown table; fails only on errors, never on timing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parent.parent
# These benchmarks time the compiled kernels (tfprof.kernels), whatever the state of numba's
# cache; child processes inherit the setting.
os.environ.setdefault("TFPROF_ENGINE", "kernels")
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import tfprof  # noqa: E402
from tfprof.tf_api.tf_graph import tensorflow  # noqa: E402


def build(tf, blocks: int) -> dict:
    v1 = tf.compat.v1
    x = v1.placeholder(tf.float32, [None, 32, 32, 3], name="x")
    y = v1.placeholder(tf.float32, [None, 10], name="y")
    h, depth = x, 3
    for i in range(blocks):
        with v1.variable_scope(f"block{i}"):
            k = v1.get_variable("k", [3, 3, depth, 16])
            b = v1.get_variable("b", [16], initializer=v1.zeros_initializer())
            h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, k, strides=1, padding="SAME"), b))
            depth = 16
    h = tf.nn.max_pool2d(h, ksize=4, strides=4, padding="VALID")
    with v1.variable_scope("head"):
        w = v1.get_variable("w", [8 * 8 * 16, 10])
        logits = tf.matmul(tf.reshape(h, [-1, 8 * 8 * 16]), w)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = v1.train.AdamOptimizer(1e-3).minimize(loss)
    return {"x": x, "y": y, "train": train, "init": v1.global_variables_initializer()}


def feed(t: dict, batch: int = 8) -> dict:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 32, 32, 3), np.float32)
    return {t["x"]: x, t["y"]: rng.standard_normal((batch, 10), np.float32)}


def session(tf, graph):
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    return tf.compat.v1.Session(graph=graph, config=config)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="small size for CI (4 blocks, 8 steps)")
    args = ap.parse_args(argv)
    if args.quick:
        args.blocks, args.steps = 4, 8
    with tempfile.TemporaryDirectory(prefix="tfprof-bench-capture-") as tmp:  # the profiles written go with it
        return _run(args, Path(tmp))


def _run(args: argparse.Namespace, work: Path) -> int:
    tf = tensorflow("benchmarks/bench_capture.py")
    v1 = tf.compat.v1
    from tensorflow.python.profiler import model_analyzer

    graphs = []
    for _ in range(2):  # twins: one for us, one for TensorFlow's profiler (each fills its shapes)
        g = tf.Graph()
        with g.as_default():
            graphs.append((g, build(tf, args.blocks)))
    n = args.steps
    rows: dict[str, float] = {}

    # ours: every step of the context traced
    (g, t) = graphs[0]
    data = feed(t)
    with g.as_default(), session(tf, g) as sess:
        sess.run(t["init"])
        for _ in range(3):
            sess.run(t["train"], feed_dict=data)  # warm up TensorFlow's kernels
        rows["plain run"] = statistics.median(timed(lambda: sess.run(t["train"], feed_dict=data)) for _ in range(n))
        opts = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
        rows["full-trace run"] = statistics.median(
            timed(lambda: sess.run(t["train"], feed_dict=data, options=opts, run_metadata=v1.RunMetadata()))
            for _ in range(n)
        )
        with tfprof.ProfileContext(str(work / "ours"), trace_steps=range(5, n + 5), dump_steps=[]) as pctx:
            rows["untraced step in the context"] = statistics.median(
                timed(lambda: sess.run(t["train"], feed_dict=data)) for _ in range(5)  # steps 0-4: fast path
            )
            first = timed(lambda: sess.run(t["train"], feed_dict=data))
            ours = [timed(lambda: sess.run(t["train"], feed_dict=data)) for _ in range(n - 1)]
        # The first write in a process also loads the writer's numba kernels from their cache.
        ours_first_dump = timed(lambda: pctx.profiler._write_profile(str(work / "profile_ours")))
        ours_dump = timed(lambda: pctx.profiler._write_profile(str(work / "profile_ours")))
    nodes = pctx.profiler.to_profile().row_counts()["nodes"]

    # TensorFlow's path: a full-trace run, then its Profiler.add_step
    (g2, t2) = graphs[1]
    data2 = feed(t2)
    with g2.as_default(), session(tf, g2) as sess:
        sess.run(t2["init"])
        for _ in range(3):
            sess.run(t2["train"], feed_dict=data2)
        ref = None

        def tf_step(step: int) -> None:
            nonlocal ref
            rm = v1.RunMetadata()
            opts = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
            sess.run(t2["train"], feed_dict=data2, options=opts, run_metadata=rm)
            if ref is None:
                ref = model_analyzer.Profiler(g2)
            ref.add_step(step, rm)

        tf_first = timed(lambda: tf_step(0))
        theirs = [timed(lambda s=s: tf_step(s)) for s in range(1, n)]
        tf_dump = timed(lambda ref=ref: ref._write_profile(str(work / "profile_tf")))
    del ref

    base = rows["full-trace run"]
    ours_step, tf_step_s = statistics.median(ours), statistics.median(theirs)
    print(f"{args.blocks} conv blocks, {nodes} profile nodes, {n} traced steps, one CPU thread\n")
    print("| per step | tfprof.ProfileContext (s) | TensorFlow's path (s) |")
    print("|---|---:|---:|")
    print(f"| plain run (no tracing) | {rows['plain run']:.4f} | {rows['plain run']:.4f} |")
    print(f"| full-trace run alone | {base:.4f} | {base:.4f} |")
    print(f"| traced step | {ours_step:.4f} | {tf_step_s:.4f} |")
    over = f"**{ours_step - base:.4f}** | **{tf_step_s - base:.4f}**"
    print(f"| **profiling overhead** (traced step − full-trace run) | {over} |")
    print(f"| first traced step (profiler created) | {first:.4f} | {tf_first:.4f} |")
    print(f"| write profile_<step> ({n} steps) | {ours_dump:.4f} | {tf_dump:.4f} |")
    print(f"| first write in the process (numba kernels loaded) | {ours_first_dump:.4f} | – |")
    print(f"| untraced step inside the context | {rows['untraced step in the context']:.4f} | – |")
    ratio = (tf_step_s - base) / max(ours_step - base, 1e-9)
    print(f"\nTensorFlow's per-step overhead / ours: {ratio:.1f}x; traced step: {tf_step_s / ours_step:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

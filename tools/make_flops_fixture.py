"""Build the FLOPs fixture with real TensorFlow: one graph using every op type that has a flops rule.

Usage (from the repository root):

    /work/shared/tools/tfprof-reference python tools/make_flops_fixture.py

Runs under the reference Python (tensorflow-cpu installed), never under the project's own
environment. It builds a TF1 graph (never run: FLOPs come from static shapes only) and writes
into tests/fixtures/flops/:

    graph.pb          GraphDef with _output_shapes (as_graph_def(add_shapes=True))
    profile.pb        ProfileProto tfprof writes from graph.pb + op_log.pb (no steps)
    op_log.pb         OpLogProto from tfprof_logger.merge_default_with_oplog(graph, add_trace=False):
                      the float_ops TensorFlow's flops registry computes for every node
    registry.json     the op types TensorFlow registers a `flops` statistic for, and how many ops
                      the op-log builder counted as "no flops stats due to incomplete shapes"
    pairs.json        node pairs whose FLOPs must be equal: a node where we diverge from
                      TensorFlow on purpose (NCHW pooling/conv backprop, BatchMatMul adj_x;
                      docs/COMPATIBILITY.md row 9) and a node of the same geometry TensorFlow does count
    tf_version.txt

The graph covers the rules' edge cases too: broadcasting, int() truncation of the conv
backprop rules, AddN with a control input (counted as an input), zero-element tensors
(L2Loss gives -1), scalars, and unknown dims (no FLOPs).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import ops  # noqa: E402
from tensorflow.python.profiler import tfprof_logger  # noqa: E402
from tensorflow.python.util import _pywrap_tfprof  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "flops"
v1 = tf.compat.v1
raw = tf.raw_ops


def const(shape, name, dtype=np.float32):
    return tf.constant(np.ones(shape, dtype), name=name)


def build() -> list[tuple[str, str, str]]:
    """The graph; returns (ours, reference, why) name pairs for pairs.json."""
    x = const([2, 3, 4], "x")
    row = const([4], "row")
    pos = const([2, 3, 4], "pos")
    with tf.name_scope("unary"):
        for op in ("Reciprocal", "Square", "Log", "Neg", "Rsqrt", "Softmax", "L2Loss"):
            getattr(raw, op)(**({"logits": x} if op == "Softmax" else {"t": x} if op == "L2Loss" else {"x": x}),
                             name=op)
        raw.Neg(x=tf.constant(3.0, name="scalar"), name="NegScalar")
        empty = const([0, 3], "empty")
        raw.Square(x=empty, name="SquareEmpty")
        raw.L2Loss(t=empty, name="L2LossEmpty")
    with tf.name_scope("binary"):
        for op in ("Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Pow", "GreaterEqual",
                   "Greater", "LessEqual", "Less", "Equal", "NotEqual", "SquaredDifference"):
            getattr(raw, op)(x=x, y=row, name=op)
        raw.RsqrtGrad(y=pos, dy=x, name="RsqrtGrad")
    with tf.name_scope("reduce"):
        axis = tf.constant(1, name="axis")
        raw.Mean(input=x, axis=axis, name="Mean")
        raw.Sum(input=x, axis=axis, name="Sum")
        raw.ArgMax(input=x, dimension=axis, name="ArgMax")
        raw.ArgMin(input=x, dimension=axis, name="ArgMin")
        raw.BiasAdd(value=x, bias=row, name="BiasAdd")
        raw.BiasAddGrad(out_backprop=x, name="BiasAddGrad")
    with tf.name_scope("state"):
        var = v1.Variable(np.ones([3, 4], np.float32), name="v", use_resource=False)
        v1.assign_add(var, np.ones([3, 4], np.float32), name="AssignAdd")
        v1.assign_sub(var, np.ones([3, 4], np.float32), name="AssignSub")
    with tf.name_scope("addn"):
        a, b, c = (const([5, 7], n) for n in "abc")
        raw.AddN(inputs=[a, b, c], name="AddN")
        with tf.control_dependencies([const([1], "dep").op]):  # a control input counts as an input (quirk)
            raw.AddN(inputs=[a, b, c], name="AddN_control")
    with tf.name_scope("matmul"):
        m = const([3, 5], "m")
        n = const([5, 4], "n")
        raw.MatMul(a=m, b=n, name="MatMul")
        raw.MatMul(a=const([5, 3], "mt"), b=n, transpose_a=True, name="MatMul_ta")
        raw.MatMul(a=m, b=const([4, 5], "nt"), transpose_b=True, name="MatMul_tb")
        ba = const([2, 3, 5], "ba")
        bb = const([2, 5, 4], "bb")
        raw.BatchMatMul(x=ba, y=bb, name="BatchMatMul")
        raw.BatchMatMulV2(x=ba, y=const([5, 4], "bb2"), name="BatchMatMulV2")
        raw.BatchMatMulV3(x=ba, y=bb, Tout=tf.float32, name="BatchMatMulV3")
        raw.BatchMatMulV2(x=const([2, 5, 3], "bat"), y=bb, adj_x=True, name="BatchMatMulV2_adj_x")
        raw.BatchMatMulV2(x=ba, y=const([2, 4, 5], "bbt"), adj_y=True, name="BatchMatMulV2_adj_y")
    with tf.name_scope("conv"):
        img = const([2, 7, 7, 3], "img")
        raw.Conv2D(input=img, filter=const([3, 3, 3, 4], "w"), strides=[1, 2, 2, 1], padding="SAME",
                   name="Conv2D")
        raw.Conv3D(input=const([1, 4, 5, 5, 2], "vol"), filter=const([2, 3, 3, 2, 3], "w3"),
                   strides=[1, 1, 1, 1, 1], padding="VALID", name="Conv3D")
        raw.DepthwiseConv2dNative(input=img, filter=const([3, 3, 3, 2], "dw"), strides=[1, 1, 1, 1],
                                  padding="SAME", name="DepthwiseConv2dNative")
        raw.Dilation2D(input=img, filter=const([2, 2, 3], "dil"), strides=[1, 1, 1, 1], rates=[1, 1, 1, 1],
                       padding="VALID", name="Dilation2D")
        # 2·25·27/4 = 337.5: int() truncates
        raw.Conv2DBackpropInput(input_sizes=[1, 5, 5, 3], filter=const([3, 3, 3, 1], "wbi"),
                                out_backprop=const([1, 3, 3, 1], "gbi"), strides=[1, 2, 2, 1],
                                padding="SAME", name="Conv2DBackpropInput")
        raw.Conv2DBackpropFilter(input=const([1, 5, 5, 3], "ibf"), filter_sizes=[3, 3, 3, 1],
                                 out_backprop=const([1, 3, 3, 1], "gbf"), strides=[1, 2, 2, 1],
                                 padding="SAME", name="Conv2DBackpropFilter")
    with tf.name_scope("pool"):
        feat = const([2, 6, 6, 4], "feat")
        k, s = [1, 2, 2, 1], [1, 2, 2, 1]
        raw.AvgPool(value=feat, ksize=k, strides=s, padding="VALID", name="AvgPool")
        mp = raw.MaxPool(input=feat, ksize=k, strides=s, padding="VALID", name="MaxPool")
        grad = const([2, 3, 3, 4], "grad")
        raw.AvgPoolGrad(orig_input_shape=[2, 6, 6, 4], grad=grad, ksize=k, strides=s, padding="VALID",
                        name="AvgPoolGrad")
        raw.MaxPoolGrad(orig_input=feat, orig_output=mp, grad=grad, ksize=k, strides=s, padding="VALID",
                        name="MaxPoolGrad")
    with tf.name_scope("nchw"):  # graph only: TensorFlow gives these no FLOPs (NHWC only)
        feat_c = const([2, 4, 6, 6], "feat")
        k, s = [1, 1, 2, 2], [1, 1, 2, 2]
        raw.AvgPool(value=feat_c, ksize=k, strides=s, padding="VALID", data_format="NCHW", name="AvgPool")
        mp_c = raw.MaxPool(input=feat_c, ksize=k, strides=s, padding="VALID", data_format="NCHW",
                           name="MaxPool")
        grad_c = const([2, 4, 3, 3], "grad")
        raw.AvgPoolGrad(orig_input_shape=[2, 4, 6, 6], grad=grad_c, ksize=k, strides=s, padding="VALID",
                        data_format="NCHW", name="AvgPoolGrad")
        raw.MaxPoolGrad(orig_input=feat_c, orig_output=mp_c, grad=grad_c, ksize=k, strides=s,
                        padding="VALID", data_format="NCHW", name="MaxPoolGrad")
        raw.Conv2DBackpropInput(input_sizes=[1, 3, 5, 5], filter=const([3, 3, 3, 1], "wbi"),
                                out_backprop=const([1, 1, 3, 3], "gbi"), strides=[1, 1, 2, 2],
                                padding="SAME", data_format="NCHW", name="Conv2DBackpropInput")
        raw.Conv2DBackpropFilter(input=const([1, 3, 5, 5], "ibf"), filter_sizes=[3, 3, 3, 1],
                                 out_backprop=const([1, 1, 3, 3], "gbf"), strides=[1, 1, 2, 2],
                                 padding="SAME", data_format="NCHW", name="Conv2DBackpropFilter")
        raw.Conv2D(input=const([2, 3, 7, 7], "img"), filter=const([3, 3, 3, 4], "w"), strides=[1, 1, 2, 2],
                   padding="SAME", data_format="NCHW", name="Conv2D")
    with tf.name_scope("unknown"):
        ph = v1.placeholder(tf.float32, [None, 5], name="ph")
        raw.Neg(x=ph, name="Neg")
        raw.MatMul(a=ph, b=const([5, 4], "w"), name="MatMul")
        raw.Mean(input=ph, axis=tf.constant(0, name="axis"), name="Mean")
        raw.Relu(features=ph, name="Relu")  # no rule at all
    pairs = [
        (f"nchw/{op}", f"pool/{op}", "NCHW pooling") for op in ("AvgPool", "MaxPool", "AvgPoolGrad", "MaxPoolGrad")
    ]
    pairs += [(f"nchw/{op}", f"conv/{op}", "NCHW conv backprop")
              for op in ("Conv2DBackpropInput", "Conv2DBackpropFilter")]
    pairs += [("matmul/BatchMatMulV2_adj_x", "matmul/BatchMatMul", "BatchMatMul adj_x")]
    return pairs


def registered_flops_ops() -> list[str]:
    """Op types with a `flops` statistic in TensorFlow's statistics registry."""
    keys = ops._stats_registry.list()  # "OpType,statistic"
    return sorted(k.split(",")[0] for k in keys if k.endswith(",flops"))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        pairs = build()
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            op_log = tfprof_logger.merge_default_with_oplog(graph, add_trace=False)
        graph_def = graph.as_graph_def(add_shapes=True)
    missing = 0
    for line in err.getvalue().splitlines():
        if line.endswith("ops no flops stats due to incomplete shapes."):
            missing = int(line.split()[0])
    (OUT / "graph.pb").write_bytes(graph_def.SerializeToString())
    (OUT / "op_log.pb").write_bytes(op_log.SerializeToString())
    # The same graph and op log as tfprof stores them (no steps), as `tfprof-reference build` does.
    _pywrap_tfprof.NewProfiler(graph_def.SerializeToString(), op_log.SerializeToString())
    _pywrap_tfprof.WriteProfile(str(OUT / "profile.pb").encode())
    registry = {"flops_ops": registered_flops_ops(), "ops_missing_shape": missing}
    (OUT / "registry.json").write_text(json.dumps(registry, indent=1) + "\n")
    (OUT / "pairs.json").write_text(
        json.dumps([{"ours": a, "reference": b, "why": w} for a, b, w in pairs], indent=1) + "\n"
    )
    (OUT / "tf_version.txt").write_text(tf.__version__ + "\n")
    print(f"wrote {OUT}: {len(graph_def.node)} nodes, {len(op_log.log_entries)} op-log entries, "
          f"{missing} ops with incomplete shapes")


if __name__ == "__main__":
    main()

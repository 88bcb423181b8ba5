"""Which op types have a FLOPs shape rule, and which rules count multiply-accumulates: the facts
that ingest (``node_flops``) and ``tfprof.queries.flops`` (the formulas themselves) share.

A MAC here is one multiply-add: the rules marked in ``MAC_FORMULAS`` (matrix products and
convolutions) count two float ops for each, so their ``float_ops`` are ``2 * macs``
(docs/TFPROF_BEHAVIOUR.md, 'FLOPs rules').
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfprof.schema.conform import conform

# Every op type TensorFlow 2.21 registers a ``flops`` statistic for, with its rule's name (a key
# of ``tfprof.queries.flops.FORMULAS``; python/profiler/internal/flops_registry.py,
# python/ops/nn_ops.py). tests/test_flops.py checks this list against the registry dump the
# flops fixture recorded.
OP_FORMULAS: dict[str, str] = {
    **dict.fromkeys(("Reciprocal", "Square", "Log", "Neg", "AssignSub", "AssignAdd"), "unary"),
    "Rsqrt": "rsqrt",
    "Softmax": "softmax",
    "L2Loss": "l2_loss",
    **dict.fromkeys(
        ("Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Pow", "GreaterEqual", "Greater",
         "LessEqual", "Less", "Equal", "NotEqual"),
        "binary",
    ),
    "SquaredDifference": "squared_difference",
    "RsqrtGrad": "rsqrt_grad",
    "Mean": "mean",
    **dict.fromkeys(("Sum", "ArgMax", "ArgMin", "BiasAddGrad"), "reduction"),
    "BiasAdd": "bias_add",
    "AddN": "add_n",
    "AvgPool": "pool",
    "MaxPool": "pool",
    "AvgPoolGrad": "avg_pool_grad",
    "MaxPoolGrad": "max_pool_grad",
    "Conv2DBackpropInput": "conv2d_backprop_input",
    "Conv2DBackpropFilter": "conv2d_backprop_filter",
    "MatMul": "matmul",
    **dict.fromkeys(("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"), "batch_matmul"),
    "Conv2D": "conv2d",
    "Conv3D": "conv3d",
    "DepthwiseConv2dNative": "depthwise_conv2d",
    "Dilation2D": "dilation2d",
}

# The rules whose count is 2 * (multiply-adds): macs = float_ops // 2. Dilation2D's rule has the
# same shape as a depthwise convolution's but takes a max of sums, not a sum of products: no MACs.
MAC_FORMULAS: frozenset[str] = frozenset({
    "matmul", "batch_matmul", "conv2d", "conv3d", "depthwise_conv2d",
    "conv2d_backprop_input", "conv2d_backprop_filter",
})


def node_flops_table(nodes: pa.Table, formulas: dict[str, str] = OP_FORMULAS, *, estimated: bool = False) -> pa.Table:
    """The ``node_flops`` rows of ``nodes``: one per node whose op type has a rule in ``formulas``
    (op type -> rule name), its MACs ``float_ops // 2`` for a rule of ``MAC_FORMULAS`` (a negative
    float_ops, which the views count as 0, gives 0), else 0."""
    # one look-up per distinct op type (the column is a dictionary), not one per node
    ops = nodes.column("op").combine_chunks()
    if not pa.types.is_dictionary(ops.type):
        ops = pc.dictionary_encode(ops.cast(pa.string()))
    names = pa.array([formulas.get(op) for op in ops.dictionary.cast(pa.string()).to_pylist()], pa.string())
    rule = pc.take(names, ops.indices)
    has = pc.is_valid(rule)
    kept = nodes.filter(has)
    rule = pc.filter(rule, has)
    flops = pc.max_element_wise(kept.column("float_ops"), 0)
    macs = pc.if_else(pc.is_in(rule, value_set=pa.array(sorted(MAC_FORMULAS))), pc.divide(flops, 2), 0)
    return conform("node_flops", {
        "node_id": kept.column("node_id"), "macs": macs, "flops_formula": rule,
        "estimated": pa.array(np.full(len(kept), estimated)),
    })

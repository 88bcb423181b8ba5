"""FLOPs of PyTorch ops estimated from the input shapes a Kineto trace recorded (``record_shapes``).

An ``aten::`` op's ``Input Dims`` (and ``Concrete Inputs`` for a convolution's stride, padding and
dilation) are turned into the shapes TensorFlow's flops rule for the matching op reads, in
TensorFlow's layout, and the rule is applied as ``tfprof.queries.flops`` states it (docs/FOREIGN.md):

- ``aten::mm``, ``aten::addmm`` (the two matrices): MatMul, ``2 * k * elems(out)``, ``k = in0[1]``;
- ``aten::bmm``, ``aten::linear``, ``aten::matmul`` (both at least 2-D, batch dims equal or the
  second 2-D): BatchMatMul, ``2 * k * elems(out)``, ``k = in0[-1]``;
- ``aten::conv2d``, ``aten::convolution`` (not transposed): Conv2D, ``2 * elems(out) * kh * kw * cin``
  (TensorFlow's ``in1[0] * in1[1] * in1[2]`` of an HWIO filter; ``cin`` per group), ``out`` from the
  input, the filter and the stride, padding and dilation;
- ``aten::softmax``, ``aten::_softmax``: Softmax, ``5 * elems(in0)``;
- ``aten::convolution_backward`` (not transposed): Conv2DBackpropInput, Conv2DBackpropFilter and
  BiasAddGrad, each counted where its ``output_mask`` entry is ``True``: the first two
  ``int(2 * elems(image) * elems(filter) / (cin * sh * sw))`` each, the last
  ``elems(grad_out) - cout``;
- ``aten::add``, ``sub``, ``mul``, ``div``, ``pow``, ``maximum``, ``minimum``, the comparisons and the
  in-place forms: TensorFlow's binary ops (AddV2, …, NotEqual), ``elems(out)``, ``out`` the broadcast
  of the two operands' shapes; ``aten::reciprocal``, ``square``, ``log``, ``neg``: ``elems(in0)``;
  ``aten::rsqrt``: ``2 * elems(in0)``;
- ``aten::max_pool2d`` (``_with_indices``), ``aten::avg_pool2d`` (floor mode): MaxPool, AvgPool,
  ``kh * kw * elems(out)``; their backward ops MaxPoolGrad ``kh * kw * elems(g) + elems(g)`` and
  AvgPoolGrad ``2 * kh * kw * elems(g)``, ``g`` the gradient of the pooling's output;
- adaptive pooling and its backward ops, where each output size divides the input's: the pooling
  rules above with a window of ``in // out`` (other sizes: windows that differ, no estimate);
- ``aten::mean``, ``aten::sum`` (over the axes ``Concrete Inputs`` names, else all), ``aten::argmax``,
  ``aten::argmin``: Mean ``elems(in0)``, Sum, ArgMax, ArgMin ``elems(in0) - elems(out)``.

``shape_frame`` gives those shapes in the row layout of ``queries.flops.apply_formulas`` (a test holds
this module's numbers equal to that function's), ``per_execution`` the float ops of every op
execution, each from its own shapes (the same node may run with other shapes: backward ``aten::mm``
calls under one path), on whole columns. Only the outermost op with a rule on a path counts
(``aten::linear`` holds ``aten::addmm``; counting both would count the work twice in every total).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from tfprof.ingest.foreign import codes, paths

# aten op (and whether it has an in-place form) -> TensorFlow's op of the same element-wise rule
_BINARY = {"add": ("AddV2", True), "sub": ("Sub", True), "mul": ("Mul", True), "div": ("RealDiv", True),
           "maximum": ("Maximum", False), "minimum": ("Minimum", False), "pow": ("Pow", True),
           "ge": ("GreaterEqual", True), "gt": ("Greater", True), "le": ("LessEqual", True), "lt": ("Less", True),
           "eq": ("Equal", True), "ne": ("NotEqual", True)}
_UNARY = {"reciprocal": ("unary", "Reciprocal"), "square": ("unary", "Square"), "log": ("unary", "Log"),
          "neg": ("unary", "Neg"), "rsqrt": ("rsqrt", "Rsqrt")}
# aten op -> its parts: (tfprof flops formula, the op type TensorFlow's registry would name)
RULES: dict[str, tuple[tuple[str, str], ...]] = {
    "aten::mm": (("matmul", "MatMul"),), "aten::addmm": (("matmul", "MatMul"),),
    "aten::bmm": (("batch_matmul", "BatchMatMulV2"),), "aten::linear": (("batch_matmul", "BatchMatMulV2"),),
    "aten::matmul": (("batch_matmul", "BatchMatMulV2"),),
    "aten::conv2d": (("conv2d", "Conv2D"),), "aten::convolution": (("conv2d", "Conv2D"),),
    "aten::softmax": (("softmax", "Softmax"),), "aten::_softmax": (("softmax", "Softmax"),),
    "aten::convolution_backward": (("conv2d_backprop_input", "Conv2DBackpropInput"),
                                   ("conv2d_backprop_filter", "Conv2DBackpropFilter"),
                                   ("reduction", "BiasAddGrad")),
    **{f"aten::{op}{inplace}": (("binary", tf),) for op, (tf, has_inplace) in _BINARY.items()
       for inplace in ("", "_")[:1 + has_inplace]},
    **{f"aten::{op}{inplace}": (rule,) for op, rule in _UNARY.items() for inplace in ("", "_")},
    **{op: (("pool", tf),) for op, tf in (("aten::max_pool2d", "MaxPool"), ("aten::max_pool2d_with_indices", "MaxPool"),
                                         ("aten::avg_pool2d", "AvgPool"))},
    "aten::max_pool2d_with_indices_backward": (("max_pool_grad", "MaxPoolGrad"),),
    "aten::avg_pool2d_backward": (("avg_pool_grad", "AvgPoolGrad"),),
    "aten::mean": (("mean", "Mean"),), "aten::sum": (("reduction", "Sum"),),
    "aten::argmax": (("reduction", "ArgMax"),), "aten::argmin": (("reduction", "ArgMin"),),
    **{op: (("pool", tf),) for op, tf in (("aten::adaptive_avg_pool2d", "AvgPool"),
                                         ("aten::_adaptive_avg_pool2d", "AvgPool"),
                                         ("aten::adaptive_max_pool2d", "MaxPool"))},
    "aten::_adaptive_avg_pool2d_backward": (("avg_pool_grad", "AvgPoolGrad"),),
    "aten::adaptive_max_pool2d_backward": (("max_pool_grad", "MaxPoolGrad"),),
}
_POOLS = ("aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::avg_pool2d")
_POOL_GRADS = ("aten::max_pool2d_with_indices_backward", "aten::avg_pool2d_backward")
_ADAPTIVE = ("aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d", "aten::adaptive_max_pool2d")
_ADAPTIVE_GRADS = ("aten::_adaptive_avg_pool2d_backward", "aten::adaptive_max_pool2d_backward")
_BROADCAST_RANK = 8  # operands of more dimensions get no estimate
_DIMS = pl.List(pl.List(pl.Int64))
# The JSON texts each decode reads, checked first (a typed decode of anything else fails the whole
# column): a list of ints of at most 18 digits (an Int64 cannot overflow), a list of such lists,
# and a list of strings (no escaped surrogate halves, which the decoder refuses).
_WS = r"[ \t\n\r]*"  # JSON's whitespace, no more
_NUM = r"-?(?:0|[1-9]\d{0,17})"  # no leading zeros, which JSON refuses
_INT = rf"{_WS}{_NUM}{_WS}"
_INTS = rf"\[(?:{_INT}(?:,{_INT})*|{_WS})\]"
_STR = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u(?:[0-9a-cA-CeEfF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))*"'
_FITS = {
    kind: rf"^{_WS}\[(?:{_WS}{item}{_WS}(?:,{_WS}{item}{_WS})*|{_WS})\]{_WS}$"
    for kind, item in (("ints", _NUM), ("dims", _INTS), ("strings", _STR))
}


def _decode(text: pl.Expr, dtype: pl.DataType, fits: str) -> pl.Expr:
    """``text`` decoded as ``dtype`` where it has the shape ``_FITS[fits]`` (null elsewhere)."""
    return pl.when(text.str.contains(_FITS[fits])).then(text).str.json_decode(dtype)


def _elems(dims: pl.Expr) -> pl.Expr:
    """The element count of a shape; null where a size is unknown (null or negative)."""
    known = (dims.list.len() > 0) & (dims.list.min() >= 0) & ~dims.list.eval(pl.element().is_null()).list.any()
    return pl.when(known).then(
        dims.list.eval(pl.element().product()).list.first())


def _pair(concrete: pl.Expr, i: int) -> pl.Expr:
    """The two ints of a ``Concrete Inputs`` entry written ``[a, b]`` (null otherwise)."""
    return _decode(concrete.list.get(i, null_on_oob=True), pl.List(pl.Int64), "ints")


def _window_out(x: pl.Expr, k: pl.Expr, s: pl.Expr, p: pl.Expr, d: pl.Expr, axis: int) -> pl.Expr:
    """A sliding window's output size along spatial ``axis`` (0: H, 1: W) of NCHW ``x``, given the
    (h, w) pairs of kernel, stride, padding and dilation (floor mode): (in + 2p - d(k - 1) - 1) // s + 1."""
    at = lambda pair: pair.list.get(axis, null_on_oob=True)  # noqa: E731
    return (x.list.get(2 + axis, null_on_oob=True) + 2 * at(p) - at(d) * (at(k) - 1) - 1) // at(s) + 1


def _conv_out(x: pl.Expr, w: pl.Expr, c: pl.Expr, axis: int) -> pl.Expr:
    """A convolution's output size along ``axis``: its kernel from the filter ``w``, the rest from
    ``Concrete Inputs`` ``c`` (stride, padding, dilation)."""
    return _window_out(x, w.list.slice(2, 2), _pair(c, 3), _pair(c, 4), _pair(c, 5), axis)


def _reduced(x: pl.Expr, dims: pl.Expr, whole: pl.Expr) -> pl.Expr:
    """``x``'s shape with the axes of ``dims`` (negative: from the end), or every axis where
    ``whole``, reduced to 1 (whether kept or dropped, the element count is the same); a scalar's
    is ``[1]``."""
    rank = x.list.len().cast(pl.Int64)
    axes = [pl.when(i < rank).then(pl.when(whole | dims.list.contains(i) | dims.list.contains(i - rank))
                                    .then(1).otherwise(x.list.get(i, null_on_oob=True)))
            for i in range(_BROADCAST_RANK)]
    return pl.when((rank <= _BROADCAST_RANK) & (whole | dims.is_not_null())).then(_shape(axes))


def _shape(axes: list[pl.Expr]) -> pl.Expr:
    """The shape of ``axes``' sizes, nulls (absent axes) left out; a scalar's is ``[1]``."""
    shape = pl.concat_list(axes).list.drop_nulls()
    return pl.when(shape.list.len() > 0).then(shape).otherwise(pl.lit([1], _DIMS.inner))


def _picked(dims: pl.Expr, *at: int) -> pl.Expr:
    """The sizes of ``dims`` at ``at``, in that order (null where one is out of range)."""
    return pl.concat_list([dims.list.get(i, null_on_oob=True) for i in at])


def _nhwc(dims: pl.Expr) -> pl.Expr:
    """An NCHW shape in TensorFlow's NHWC layout."""
    return _picked(dims, 0, 2, 3, 1)


def _nhwc_window(pair: pl.Expr) -> pl.Expr:
    """An (h, w) pair as TensorFlow's NHWC ``strides``/``ksize`` attr: ``[1, h, w, 1]``."""
    one = pl.lit(1, pl.Int64)
    return pl.concat_list(one, _picked(pair, 0, 1), one)


def _even_window(size: pl.Expr, pooled: pl.Expr) -> pl.Expr:
    """The (h, w) window of adaptive pooling from the (h, w) ``size`` to ``pooled``: ``size //
    pooled`` where each pooled size divides its size (null elsewhere: the windows then differ)."""
    at = lambda pair, i: pair.list.get(i, null_on_oob=True)  # noqa: E731
    even = pl.all_horizontal([(at(pooled, i) > 0) & (at(size, i) >= 0) & (at(size, i) % at(pooled, i) == 0)
                              for i in (0, 1)])
    return pl.when(even).then(pl.concat_list(at(size, 0) // at(pooled, 0), at(size, 1) // at(pooled, 1)))


def _hwio(weight: pl.Expr) -> pl.Expr:
    """A PyTorch filter ``[cout, cin per group, kh, kw]`` in TensorFlow's HWIO layout."""
    return _picked(weight, 2, 3, 1, 0)


def _broadcast(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """The shape two operands broadcast to (NumPy's rule, dims matched from the right); null where
    they cannot be or a rank is above ``_BROADCAST_RANK``."""
    dims = []
    for i in range(_BROADCAST_RANK, 0, -1):
        x, y = a.list.get(-i, null_on_oob=True), b.list.get(-i, null_on_oob=True)
        dims.append(pl.when(x.is_null()).then(y).when(y.is_null() | (y == 1)).then(x).when((x == 1) | (x == y))
                    .then(y).otherwise(-1))  # -1: no broadcast, which _elems reads as unknown
    return pl.when((a.list.len() <= _BROADCAST_RANK) & (b.list.len() <= _BROADCAST_RANK)).then(_shape(dims))


def shape_frame(first: pl.DataFrame, key: str = "node_id") -> pl.DataFrame:
    """``first`` (``key``, name, op, args: executions of ops that have a rule) as the rows
    ``queries.flops.apply_formulas`` reads, one per part of the op's rule: TensorFlow-layout
    ``in0_dims``, ``in1_dims``, ``out_dims``, ``strides``; ``part`` numbers an op's parts, and a
    part its ``output_mask`` leaves out has no shapes."""
    return _shapes(_recorded(first), key)


def _recorded(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with the texts of its ``args``' ``Input Dims`` and ``Concrete Inputs`` instead."""
    from tfprof.ingest.foreign import json_keys  # (numba: on the kernels engine only)

    return frame.with_columns(json_keys.values(frame["args"], "Input Dims").alias("_dims_text"),
                              json_keys.values(frame["args"], "Concrete Inputs").alias("_concrete_text")).drop("args")


def _shapes(recorded: pl.DataFrame, key: str) -> pl.DataFrame:
    """``shape_frame`` from ``_recorded``'s texts."""
    parts = pl.DataFrame([(op, i, formula, tf) for op, rule in RULES.items() for i, (formula, tf) in enumerate(rule)],
                         schema={"op": pl.String, "part": pl.Int64, "formula": pl.String, "tf_op": pl.String},
                         orient="row")
    frame = recorded.with_columns(
        _decode(pl.col("_dims_text"), _DIMS, "dims").alias("_dims"),
        _decode(pl.col("_concrete_text"), pl.List(pl.String), "strings").alias("_concrete"),
    ).join(parts, on="op", maintain_order="left")
    dims, concrete, part = pl.col("_dims"), pl.col("_concrete"), pl.col("part")
    a, b = dims.list.get(0, null_on_oob=True), dims.list.get(1, null_on_oob=True)
    m1, m2 = dims.list.get(1, null_on_oob=True), dims.list.get(2, null_on_oob=True)  # addmm's matrices
    op = pl.col("op")
    conv = op.is_in(["aten::conv2d", "aten::convolution"])
    transposed = (op == "aten::convolution") & (concrete.list.get(6, null_on_oob=True) != "False")
    # aten::convolution_backward(grad_out, image, weight, bias_sizes, stride, padding, dilation,
    # transposed, output_padding, groups, output_mask)
    grad, image, weight = a, m1, m2
    backward = ((op == "aten::convolution_backward") & (concrete.list.get(7, null_on_oob=True) == "False")
                & (grad.list.len() == 4) & (image.list.len() == 4) & (weight.list.len() == 4)
                & (concrete.list.get(10, null_on_oob=True).str.strip_chars("[]").str.split(", ")
                   .list.get(part, null_on_oob=True) == "True"))
    stride = _pair(concrete, 4)
    # aten::linear's weight is [out, in]: the product is x @ w.T
    rhs_n = pl.when(op == "aten::linear").then(b.list.get(0, null_on_oob=True)).otherwise(b.list.get(-1, null_on_oob=True))
    batch_ok = (a.list.len() >= 2) & (b.list.len() >= 2) & (
        (b.list.len() == 2) | (a.list.slice(0, a.list.len() - 2) == b.list.slice(0, b.list.len() - 2)))
    linear_ok = (a.list.len() >= 1) & (b.list.len() == 2)
    binary = pl.col("formula") == "binary"
    # aten::max_pool2d(x, kernel, stride, padding, dilation, ceil_mode), avg_pool2d(x, kernel, stride,
    # padding, ceil_mode, …); their backward ops take the gradient first, then the same arguments
    pool, pool_grad = op.is_in(list(_POOLS)), op.is_in(list(_POOL_GRADS))
    avg = op.is_in(["aten::avg_pool2d", "aten::avg_pool2d_backward"])
    k = pl.when(pool).then(_pair(concrete, 1)).otherwise(_pair(concrete, 2))
    given = pl.when(pool).then(_pair(concrete, 2)).otherwise(_pair(concrete, 3))
    pool_stride = pl.when(given.list.len() == 0).then(k).otherwise(given)  # none given: the kernel's
    padding = pl.when(pool).then(_pair(concrete, 3)).otherwise(_pair(concrete, 4))
    dilation = pl.when(avg).then(pl.lit([1, 1], pl.List(pl.Int64))).when(pool).then(_pair(concrete, 4)).otherwise(
        _pair(concrete, 5))
    floor_mode = pl.when(avg).then(concrete.list.get(4, null_on_oob=True)).otherwise(
        concrete.list.get(5, null_on_oob=True)) == "False"
    pooled = pool & floor_mode & (a.list.len() == 4) & (k.list.len() == 2)
    # adaptive pooling (x, output_size) and its backward ops (grad, x[, indices]): TensorFlow's
    # pooling with a window and stride of in // out where out divides in, so that the windows are
    # equal and do not overlap; no estimate elsewhere
    adaptive, adaptive_grad = op.is_in(list(_ADAPTIVE)), op.is_in(list(_ADAPTIVE_GRADS))
    adaptive_out = pl.when(adaptive).then(_pair(concrete, 1)).otherwise(_picked(a, 2, 3))
    window = _even_window(pl.when(adaptive).then(_picked(a, 2, 3)).otherwise(_picked(b, 2, 3)), adaptive_out)
    arg = op.is_in(["aten::argmax", "aten::argmin"])
    arg_dim = concrete.list.get(1, null_on_oob=True)  # one axis, or "" (None): all of them
    in0 = (pl.when(op == "aten::addmm").then(m1)
           .when(backward & (part == 1)).then(_nhwc(image)).when(backward & (part == 2)).then(_nhwc(grad))
           .otherwise(a))
    out = (
        pl.when(op.is_in(["aten::mm"]) & (a.list.len() == 2) & (b.list.len() == 2))
        .then(pl.concat_list(_picked(a, 0), _picked(b, 1)))
        .when((op == "aten::addmm") & (m1.list.len() == 2) & (m2.list.len() == 2))
        .then(pl.concat_list(_picked(m1, 0), _picked(m2, 1)))
        .when(op.is_in(["aten::bmm", "aten::matmul"]) & batch_ok)
        .then(pl.concat_list(a.list.slice(0, a.list.len() - 1), rhs_n))
        .when((op == "aten::linear") & linear_ok)
        .then(pl.concat_list(a.list.slice(0, a.list.len() - 1), rhs_n))
        .when(conv & ~transposed & (a.list.len() == 4) & (b.list.len() == 4))  # NHWC, as TensorFlow's
        .then(pl.concat_list(_picked(a, 0), _conv_out(a, b, concrete, 0), _conv_out(a, b, concrete, 1), _picked(b, 0)))
        .when(op.is_in(["aten::softmax", "aten::_softmax"])).then(a)
        .when(backward & (part == 0)).then(_nhwc(image))  # the image's gradient
        .when(backward & (part == 1)).then(_hwio(weight))  # the filter's gradient
        .when(backward & (part == 2)).then(weight.list.slice(0, 1))  # the bias's gradient: [cout]
        .when(binary).then(_broadcast(a, b))
        # aten::mean / aten::sum (x, dims, keepdim, dtype[, out]); given x alone (and a dtype): all axes
        .when(op.is_in(["aten::mean", "aten::sum"]) & (a.list.len() > 0)).then(_reduced(
            a, _decode(concrete.list.get(1, null_on_oob=True), pl.List(pl.Int64), "ints"),
            (dims.list.len() <= 2) | (concrete.list.get(1, null_on_oob=True) == "[]").fill_null(False)))
        .when(arg & (a.list.len() > 0)).then(_reduced(
            a, _decode(pl.concat_str(pl.lit("["), arg_dim, pl.lit("]")), pl.List(pl.Int64), "ints"),
            (arg_dim == "").fill_null(False)))
        .when(pooled).then(pl.concat_list(_picked(a, 0), _window_out(a, k, pool_stride, padding, dilation, 0),
                                          _window_out(a, k, pool_stride, padding, dilation, 1), _picked(a, 1)))
        .when(adaptive & (a.list.len() == 4) & window.is_not_null())
        .then(pl.concat_list(_picked(a, 0), _picked(adaptive_out, 0, 1), _picked(a, 1)))
    )
    in1 = (pl.when(conv | (backward & (part == 0))).then(_hwio(pl.when(conv).then(b).otherwise(weight)))
           # the pooling's output (its gradient's shape)
           .when(pool_grad).then(pl.when(a.list.len() == 4).then(_nhwc(a)))
           .when(adaptive_grad).then(pl.when((a.list.len() == 4) & (b.list.len() == 4) & window.is_not_null())
                                     .then(_nhwc(a)))
           .when(op == "aten::addmm").then(m2).otherwise(b))
    return frame.select(
        key, "name", pl.col("tf_op").alias("op"), "formula", "part",
        out.alias("out_dims"), in0.alias("in0_dims"), in1.alias("in1_dims"),
        dims.list.len().cast(pl.Int64).fill_null(0).alias("n_inputs"),
        pl.lit(False).alias("transpose_a"), pl.lit(False).alias("adj_x"), pl.lit(False).alias("nchw"),
        pl.when(backward).then(_nhwc_window(stride)).alias("strides"),
        pl.when(pool | pool_grad).then(_nhwc_window(k))
        .when(adaptive | adaptive_grad).then(pl.when(window.is_not_null()).then(_nhwc_window(window))).alias("ksize"),
    )


def float_ops(frame: pl.DataFrame) -> pl.Series:
    """The rules of ``queries.flops.FORMULAS`` that ``RULES`` uses, over ``shape_frame``'s rows (null
    where a shape is unknown)."""
    out_n, in0_n, in1_n = _elems(pl.col("out_dims")), _elems(pl.col("in0_dims")), _elems(pl.col("in1_dims"))
    in1, formula = pl.col("in1_dims"), pl.col("formula")
    k = pl.when(formula == "matmul").then(pl.col("in0_dims").list.get(1, null_on_oob=True)).otherwise(
        pl.col("in0_dims").list.get(-1, null_on_oob=True))
    known = out_n.is_not_null() & in0_n.is_not_null()
    ksize = _elems(pl.col("ksize"))
    stride_hw = pl.col("strides").list.get(1, null_on_oob=True) * pl.col("strides").list.get(2, null_on_oob=True)
    value = (
        pl.when(formula.is_in(["matmul", "batch_matmul"]) & known).then(2 * k * out_n)
        .when((formula == "conv2d") & known & in1_n.is_not_null())
        .then(2 * out_n * in1.list.get(0, null_on_oob=True) * in1.list.get(1, null_on_oob=True)
              * in1.list.get(2, null_on_oob=True))
        .when((formula == "softmax") & in0_n.is_not_null()).then(5 * in0_n)
        .when((formula == "unary") & in0_n.is_not_null()).then(in0_n)
        .when((formula == "rsqrt") & in0_n.is_not_null()).then(2 * in0_n)
        .when((formula == "conv2d_backprop_input") & out_n.is_not_null() & in1_n.is_not_null())
        .then((2 * out_n * in1_n) // (pl.col("out_dims").list.get(-1, null_on_oob=True) * stride_hw))
        .when((formula == "conv2d_backprop_filter") & known)
        .then((2 * in0_n * out_n) // (pl.col("in0_dims").list.get(-1, null_on_oob=True) * stride_hw))
        .when((formula == "reduction") & known).then(in0_n - out_n)
        .when((formula == "binary") & out_n.is_not_null()).then(out_n)
        .when((formula == "mean") & known).then(in0_n)
        .when((formula == "pool") & out_n.is_not_null()).then(ksize * out_n)
        .when((formula == "max_pool_grad") & in1_n.is_not_null()).then(ksize * in1_n + in1_n)
        .when((formula == "avg_pool_grad") & in1_n.is_not_null()).then(2 * ksize * in1_n)
    )
    return frame.select(value.cast(pl.Int64).alias("float_ops")).to_series()


def per_execution(ops: pl.DataFrame, texts: Callable[[np.ndarray], pl.Series] | None = None) -> pl.Series:
    """The float ops of each op execution of ``ops`` (``name``: the node path, ``op``: the op
    type, and ``args``: its recorded args, unless ``texts`` gives the args of the rows asked
    for), in row order: 0 where there is no rule, no shape, or an enclosing op on its path with a
    rule (a backward op's path names its forward op first: those are not ops around it). Whether a
    path has such an op is worked out once per distinct path."""
    first, inverse = codes.distinct(ops["name"])
    parts = pl.col("name").str.replace(paths.FORWARD_PART, "$2").str.split("/")
    inner = ops.select(pl.col("name").gather(first)).select(
        parts.list.slice(0, parts.list.len() - 1).list.eval(pl.element().is_in(list(RULES))).list.any())
    ruled = ops["op"].cast(pl.String).is_in(list(RULES)).to_numpy() & ~inner.to_series().to_numpy()[inverse]
    rows = np.flatnonzero(ruled)
    out = np.zeros(ops.height, np.int64)
    if len(rows):
        todo = ops.select(pl.col("op").cast(pl.String))[rows].with_columns(
            pl.Series("_row", rows), texts(rows) if texts is not None else ops["args"].gather(rows))
        # each distinct (op, shapes) worked out once: a step repeats its shapes, a training run its
        # steps, and the ranks of a job (read one after another in a process) their model's
        todo = _recorded(todo)
        recorded = ["op", "_dims_text", "_concrete_text"]
        distinct = todo.select(recorded).unique().with_row_index("_k")
        per_key = _counted(distinct, recorded)
        keyed = todo.join(distinct.select(*recorded, "_k"), on=recorded, how="left", nulls_equal=True)
        out[keyed["_row"].to_numpy()] = per_key[keyed["_k"].to_numpy()]
    return pl.Series("float_ops", out)


_KNOWN: dict[tuple, int] = {}  # (op, Input Dims text, Concrete Inputs text) -> float ops, for this process
_KNOWN_LIMIT = 200_000  # entries kept before the memo starts afresh


def _counted(distinct: pl.DataFrame, recorded: list[str]) -> np.ndarray:
    """The float ops of each row of ``distinct`` (``_k``, ``recorded``), from the memo where a
    row was worked out before in this process. The rules are one large polars expression that
    costs 0.1-0.2 s to evaluate even on a few rows, which a job's thousand small traces would
    pay a thousand times."""
    keys = list(distinct.select(recorded).iter_rows())
    per_key = np.zeros(distinct.height, np.int64)
    new = [k for k, key in enumerate(keys) if key not in _KNOWN]
    for k, key in enumerate(keys):
        if key in _KNOWN:
            per_key[k] = _KNOWN[key]
    if new:
        todo = distinct[new].with_columns(pl.lit("").alias("name"), pl.col("_k").cast(pl.Int64))
        shaped = _shapes(todo, key="_k")
        counted = shaped.select("_k", float_ops(shaped).fill_null(0).clip(0)).group_by("_k").agg(pl.col("float_ops").sum())
        per_key[counted["_k"].to_numpy()] = counted["float_ops"].to_numpy()
        if len(_KNOWN) + len(new) > _KNOWN_LIMIT:
            _KNOWN.clear()
        _KNOWN.update((keys[k], int(per_key[k])) for k in new)
    return per_key

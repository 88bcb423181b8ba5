"""Estimated FLOPs of PyTorch ops from the input shapes a Kineto trace recorded: each node's float_ops
held against a computation done here in plain Python from the raw events' ``Input Dims`` and
``Concrete Inputs`` (the textbook formulas: 2·m·k·n for a matrix product, 2·out·kh·kw·cin for a
convolution, 5·n for a softmax), and the module's arithmetic held equal to tfprof's flops rules.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from math import prod
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from foreign_expect import load_trace_events

import tfprof
from tfprof.ingest.foreign import torch_flops
from tfprof.queries.flops import apply_formulas

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
TORCH = ["torch_cnn.pt.trace.json", "torch_transformer.pt.trace.json.gz", "torch_ops.pt.trace.json.gz"]
BINARY = {f"aten::{op}{inplace}" for op in ("add", "sub", "mul", "div", "pow", "ge", "gt", "le", "lt", "eq", "ne")
          for inplace in ("", "_")} | {"aten::maximum", "aten::minimum"}
UNARY = {f"aten::{op}{inplace}" for op in ("reciprocal", "square", "log", "neg") for inplace in ("", "_")}
RSQRT = {"aten::rsqrt", "aten::rsqrt_"}
REDUCTIONS = {"aten::mean", "aten::sum", "aten::argmax", "aten::argmin"}
POOLS = {"aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::avg_pool2d", "aten::max_pool2d_with_indices_backward",
         "aten::avg_pool2d_backward"}
ADAPTIVE = {"aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d", "aten::adaptive_max_pool2d",
            "aten::_adaptive_avg_pool2d_backward", "aten::adaptive_max_pool2d_backward"}
RULED = {"aten::mm", "aten::addmm", "aten::bmm", "aten::linear", "aten::matmul", "aten::conv2d",
         "aten::convolution", "aten::softmax", "aten::_softmax", "aten::convolution_backward", *BINARY, *UNARY, *RSQRT,
         *POOLS, *ADAPTIVE, *REDUCTIONS}


def hand_flops(name: str, dims: list, concrete: list) -> int | None:
    """The FLOPs of one op from its recorded shapes, by hand."""
    if name in ("aten::mm", "aten::addmm"):
        (m, k), (_, n) = dims[0:2] if name == "aten::mm" else dims[1:3]
        return 2 * m * k * n
    if name in ("aten::bmm", "aten::matmul"):
        a, b = dims[0], dims[1]
        return 2 * prod(a) * b[-1]  # every row of a times every column of b
    if name == "aten::linear":
        x, w = dims[0], dims[1]
        return 2 * prod(x) * w[0]
    if name in ("aten::conv2d", "aten::convolution"):
        (n, _, h, w), (o, cg, kh, kw) = dims[0], dims[1]
        (sh, sw), (ph, pw), (dh, dw) = (json.loads(c) for c in concrete[3:6])
        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        return 2 * (n * o * oh * ow) * kh * kw * cg
    if name in ("aten::softmax", "aten::_softmax"):
        return 5 * prod(dims[0])
    if name == "aten::convolution_backward":  # TensorFlow's two backprop ops and BiasAddGrad, as asked for
        (n, cin, h, w), (cout, cg, kh, kw) = dims[1], dims[2]
        sh, sw = json.loads(concrete[4])
        each = 2 * (n * h * w * cin) * (kh * kw * cg * cout) // (cin * sh * sw)
        mask = [m == "True" for m in concrete[10].strip("[]").split(", ")]
        return each * mask[0] + each * mask[1] + (prod(dims[0]) - cout) * mask[2]
    if name in BINARY:
        return prod(np.broadcast_shapes(tuple(dims[0]), tuple(dims[1])))
    if name in ("aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::avg_pool2d"):  # a max or sum per window
        (n, c, h, w), (kh, kw) = dims[0], json.loads(concrete[1])
        (sh, sw), (ph, pw) = json.loads(concrete[2]) or (kh, kw), json.loads(concrete[3])
        (dh, dw) = (1, 1) if name == "aten::avg_pool2d" else json.loads(concrete[4])
        oh, ow = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        return kh * kw * n * c * oh * ow
    if name == "aten::max_pool2d_with_indices_backward":
        kh, kw = json.loads(concrete[2])
        return (kh * kw + 1) * prod(dims[0])
    if name == "aten::avg_pool2d_backward":
        kh, kw = json.loads(concrete[2])
        return 2 * kh * kw * prod(dims[0])
    if name in UNARY:  # one op per element
        return prod(dims[0])
    if name in RSQRT:  # a square root and a division per element
        return 2 * prod(dims[0])
    if name in ADAPTIVE:  # a window of in // out per output element, where out divides in; else no estimate
        grad = name.endswith("_backward")
        (n, c, h, w) = dims[1] if grad else dims[0]
        oh, ow = dims[0][2:] if grad else json.loads(concrete[1])
        if h % oh or w % ow:
            return 0
        window = (h // oh) * (w // ow)
        if not grad:
            return window * n * c * oh * ow
        return (2 * window if "avg" in name else window + 1) * prod(dims[0])
    if name in ("aten::argmax", "aten::argmin"):  # a comparison per element but the first of each output
        x = dims[0]
        kept = 1 if concrete[1] == "" else prod(x) // x[int(concrete[1])]
        return prod(x) - kept
    if name in REDUCTIONS:  # Mean: an add per input element; Sum: one fewer per output element
        x = dims[0]
        axes = json.loads(concrete[1]) if len(dims) > 2 and concrete[1] not in ("", "[]") else range(len(x))
        kept = prod(size for i, size in enumerate(x) if i not in {a % len(x) for a in axes})
        return prod(x) if name == "aten::mean" else prod(x) - kept
    return None


def outermost_ruled(events: list[dict]) -> dict[int, int]:
    """ns start of each op event with a rule and no enclosing op with one (per thread, by time) -> its FLOPs."""
    def ns(us) -> int:
        return round(float(us) * 1000)

    by_thread = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            by_thread[(e["pid"], e["tid"])].append(e)
    out = {}
    for ops in by_thread.values():
        ops.sort(key=lambda e: (ns(e["ts"]), -ns(e["dur"])))
        stack: list[tuple[int, bool]] = []  # (end ns, has a rule)
        for e in ops:
            start, end = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
            while stack and end > stack[-1][0]:
                stack.pop()
            ruled = e["name"] in RULED
            if ruled and not any(r for _, r in stack) and "Input Dims" in e.get("args", {}):
                out[start] = hand_flops(e["name"], e["args"]["Input Dims"], e["args"].get("Concrete Inputs", []))
            stack.append((end, ruled))
    return out


def hand_and_ours(name: str) -> tuple[dict[int, int], tfprof.Profile, pl.DataFrame]:
    """Trace ``name``'s hand-computed FLOPs by event start (``outermost_ruled``), our profile of
    it, and each node's first event start in the same time base (``node_id``, ``start_ns``)."""
    top, events = load_trace_events(FOREIGN / name)
    prof = tfprof.load(FOREIGN / name)
    base = int(top.get("baseTimeNanoseconds") or 0)
    first = pl.from_arrow(prof.table("trace_events")).filter(pl.col("node_id").is_not_null()).group_by("node_id").agg(
        (pl.col("start_ns").sort_by("event_id").first() - base).alias("start_ns"))
    return outermost_ruled(events), prof, first


@pytest.mark.parametrize("name", TORCH)
def test_float_ops_equal_a_hand_computation_from_input_dims(name):
    want, prof, first = hand_and_ours(name)
    nodes = pl.from_arrow(prof.table("nodes")).join(first, on="node_id")
    checked = 0
    for op, flops, start in zip(nodes["op"].cast(str), nodes["float_ops"], nodes["start_ns"], strict=True):
        if start in want:
            assert flops == want[start], op
            checked += 1
        else:
            assert flops == 0, op
    assert checked >= 4 and sum(want.values()) > 0


@pytest.mark.parametrize(("name", "formulas"), [
    (TORCH[0], {"batch_matmul", "matmul", "conv2d", "binary", "pool", "max_pool_grad", "conv2d_backprop_input",
                "conv2d_backprop_filter", "reduction", "mean"}),
    (TORCH[1], {"batch_matmul", "matmul", "softmax", "binary"}),
    (TORCH[2], {"batch_matmul", "matmul", "conv2d", "binary", "unary", "rsqrt", "pool", "avg_pool_grad",
                "max_pool_grad", "reduction", "mean", "conv2d_backprop_filter"}),
])
def test_the_arithmetic_is_tfprofs_flops_rules(name, formulas):
    prof = tfprof.load(FOREIGN / name)
    nodes = pl.from_arrow(prof.table("nodes")).select("node_id", "name", pl.col("op").cast(str))
    first = pl.from_arrow(prof.table("trace_events")).filter(pl.col("node_id").is_not_null()).group_by("node_id").agg(
        pl.col("args").sort_by("event_id").first())
    frame = torch_flops.shape_frame(nodes.filter(pl.col("op").is_in(list(torch_flops.RULES))).join(first, on="node_id")
                                    .sort("node_id"))
    assert set(frame["formula"]) >= formulas
    ours = frame.select("node_id", "part", torch_flops.float_ops(frame))
    theirs = apply_formulas(frame.with_columns(pl.col("node_id") * 4 + pl.col("part")))["float_ops"]
    assert ours.sort("node_id", "part")["float_ops"].to_list() == theirs.to_list()
    assert ours["float_ops"].drop_nulls().sum() > 0


def test_convolution_backward_counts_tensorflows_backprop_ops():
    """On a CNN's training step: Conv2DBackpropInput, Conv2DBackpropFilter and BiasAddGrad for
    each ``aten::convolution_backward``, the parts its output mask asks for, by tfprof's rules."""
    prof = tfprof.load(FOREIGN / TORCH[0])
    nodes = pl.from_arrow(prof.table("nodes")).select("node_id", "name", pl.col("op").cast(str))
    first = pl.from_arrow(prof.table("trace_events")).filter(pl.col("node_id").is_not_null()).group_by("node_id").agg(
        pl.col("args").sort_by("event_id").first())
    frame = torch_flops.shape_frame(nodes.filter(pl.col("op") == "aten::convolution_backward").join(first, on="node_id"))
    assert set(frame["op"]) == {"Conv2DBackpropInput", "Conv2DBackpropFilter", "BiasAddGrad"}
    keyed = frame.with_columns(pl.col("node_id") * 4 + pl.col("part"))
    theirs = apply_formulas(keyed).join(keyed.select("node_id", "formula"), on="node_id")
    assert theirs.filter(pl.col("formula") != "reduction")["float_ops"].min() > 0


def test_header_says_estimated_and_names_op_types_without_a_rule():
    proc = subprocess.run([sys.executable, "-m", "tfprof", "scope", "--profile_path", str(FOREIGN / TORCH[0]),
                           "--max_depth", "1", "--select", "float_ops"], check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("No source"))
    assert "float_ops are estimated from recorded input shapes" in line
    assert "aten::conv2d," not in line and "params and float_ops" not in line
    # the op types with no rule: the first eight by name, then a count of the rest
    prof = tfprof.load(FOREIGN / TORCH[0])
    ops = sorted(set(prof.frame("nodes")["op"].cast(str).to_list()) - set(torch_flops.RULES))
    assert len(ops) > 8
    assert f"no rule: {', '.join(ops[:8])} and {len(ops) - 8} more (shown as 0)" in line


def test_args_of_another_shape_give_no_estimate_and_fail_nothing():
    """Recorded shapes that are not lists of ints (a fuzzed trace wrote ``[16]`` into ``Concrete
    Inputs``, which failed the whole read): those ops get 0, the well-formed one still its FLOPs."""
    good = {"Input Dims": [[4, 3, 16, 16], [8, 3, 3, 3], [8]],
            "Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]}
    odd = [
        {**good, "Concrete Inputs": ["", "", "", [16], "[1, 1]", "[1, 1]", "1"]},
        {**good, "Concrete Inputs": ["", "", "", "[1, x]", "[1, 1]", "[1, 1]", "1"]},
        {**good, "Concrete Inputs": ["\\ud800", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]},
        {**good, "Input Dims": [[4, "3", 16, 16], [8, 3, 3, 3]]},
        {**good, "Input Dims": [[4, 3, 16, 16], [8, 3, 3, 99999999999999999999]]},
        {**good, "Input Dims": [[4, 3, 16, 16], [8, 3, 3, 3.5]]},
        {**good, "Input Dims": "[[4]]"},
    ]
    ops = pl.DataFrame({"name": [f"m{i}/aten::conv2d" for i in range(1 + len(odd))],
                        "op": "aten::conv2d",
                        "args": [json.dumps(a).replace("\\\\ud800", "\\ud800") for a in (good, *odd)]})
    got = torch_flops.per_execution(ops).to_list()
    assert got[0] == hand_flops("aten::conv2d", good["Input Dims"], good["Concrete Inputs"]) > 0
    assert got[1:] == [0] * len(odd)


@pytest.mark.parametrize(("op", "dims", "concrete", "want"), [
    ("aten::adaptive_avg_pool2d", [[2, 3, 8, 8], []], ["", "[4, 2]"], 2 * 3 * 4 * 2 * (2 * 4)),
    ("aten::adaptive_max_pool2d", [[2, 3, 8, 8], []], ["", "[1, 1]"], 2 * 3 * 64),
    ("aten::adaptive_avg_pool2d", [[2, 3, 8, 8], []], ["", "[3, 3]"], 0),  # windows of 2 and 3: no estimate
    ("aten::adaptive_avg_pool2d", [[2, 3, 8, 8], []], ["", "[0, 0]"], 0),
    ("aten::adaptive_avg_pool2d", [[2, 3, 8, 8], []], ["", "[None, 4]"], 0),
    ("aten::adaptive_avg_pool2d", [[2, 3, 8, 8], []], ["", "[4]"], 0),
    ("aten::adaptive_avg_pool2d", [[2, 3, 8, 8], []], None, 0),  # PyTorch 1.8: no Concrete Inputs
    ("aten::_adaptive_avg_pool2d_backward", [[2, 3, 4, 4], [2, 3, 8, 8]], ["", ""], 2 * 4 * 2 * 3 * 16),
    ("aten::_adaptive_avg_pool2d_backward", [[2, 3, 3, 3], [2, 3, 8, 8]], ["", ""], 0),
    ("aten::adaptive_max_pool2d_backward", [[2, 3, 4, 4], [2, 3, 8, 8], [2, 3, 4, 4]], ["", "", ""], 5 * 2 * 3 * 16),
    ("aten::adaptive_max_pool2d_backward", [[2, 3, 4, 4], [2, 3, 8]], ["", "", ""], 0),
    ("aten::argmax", [[4, 10], [], []], ["", "1", "False"], 40 - 4),
    ("aten::argmax", [[4, 10], [], []], ["", "-2", "True"], 40 - 10),
    ("aten::argmin", [[4, 10], [], []], ["", "", "False"], 40 - 1),  # no axis: all of them
    ("aten::argmax", [[4, 10], [], []], ["", "x", "False"], 0),
    ("aten::rsqrt_", [[4, 10]], [""], 80),
    ("aten::pow", [[4, 1], [10]], ["", ""], 40),  # broadcast
    ("aten::ne_", [[4, 10], []], ["", "0"], 40),
])
def test_the_new_rules_on_recorded_args(op, dims, concrete, want):
    """The rules for adaptive pooling, ArgMax/ArgMin and the element-wise ops on args written by
    hand: an exact count where the shapes allow one, 0 (and no failure) where they do not."""
    args = {"Input Dims": dims, **({"Concrete Inputs": concrete} if concrete is not None else {})}
    ops = pl.DataFrame({"name": [f"m/{op}"], "op": [op], "args": [json.dumps(args)]})
    assert torch_flops.per_execution(ops).to_list() == [want]
    if want and concrete is not None:
        assert hand_flops(op, dims, concrete) == want

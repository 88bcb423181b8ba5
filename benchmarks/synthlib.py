"""A synthetic ProfileProto generator, without TensorFlow.

    python benchmarks/synth.py --nodes 70000 --steps 50 --out /tmp/synth_70k_50.pb

The profile looks like tfprof's dump of a data-parallel ResNet training step: towers of
blocks of units under several name scopes (``tower_0/resnet/block_3/unit_2/conv2/Conv2D``),
variables with ``/read``, ``/Assign`` and ``/Initializer/...``, a ``gradients/...`` mirror of
the forward ops, ``Momentum/update_.../ApplyMomentum`` per trainable variable; op types,
``shape`` for variables and placeholders, ``_output_shapes`` and the usual attrs, a DAG of
inputs, float_ops, op types with the device and ``_trainable_variables``, code traces through
``id_to_string``, and per step: run counts, cpu execs on the canonical device, accelerator execs
on ``.../gpu:0/stream:all`` for nodes placed on the GPU, devices, memory records with output
memory, and GPU allocations.

Like a file written by TensorFlow's C++, the nodes map and every map inside a node are written
in hash order (``--key-order`` writes them sorted instead).

It streams, so memory stays bounded whatever the size (7M nodes × 5 steps, an 8 GB file, in
about 0.8 GB and a minute). The ProfileProto is written as its ``nodes`` map entries, one
length-delimited record after another, then its other fields. Every tower after the first
repeats the second one but for its number and device, so the Python graph builder runs for two
towers at most and gives *slot templates* (``_Slots``); the numba kernels of
``synthkernels.py`` instance them for every node. The random draws are those of the first
generator (which held every node as a Python object), made in its order, so the output did not
change: the graph's ``default_rng(seed)`` pool of code-trace draws (``trace_pass``: one pass
over the nodes in id order, keeping where each node's draws start), then its draw of which
nodes run (``run_pass``); ``default_rng(seed + 1)``'s shuffles of the maps inside each node
(``shuffle_pass`` keeps the PCG64 state at every node, so that a node can be encoded in any
order), then its permutation of the nodes map; numba's ``np.random`` in output order for the
per-step records (``write_chunk``). Node *i* is encoded from scratch when its turn in that
permutation comes, into one reused buffer of ``CHUNK_BYTES``.

Knobs (``write_profile`` keywords; ``synth.py --help``): ``nodes`` and ``steps``; ``scope_depth``
(name-scope levels above a layer's ops); ``dense_fraction``, the op mix (that fraction of the
residual units is MatMul/BiasAdd instead of Conv2D/FusedBatchNorm); ``trace_depth`` (frames per
code trace, lo..hi); ``gpu``, ``trace``, ``loops``, ``all_run``, ``key_order``, ``empty_steps``,
``odd_attrs``. The defaults' output never changes (measured numbers refer to it;
``tests/test_synth.py`` pins it).
"""

from __future__ import annotations

import argparse
import io
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from synthkernels import (
    A_HEAD_LEN,
    A_TAIL_LEN,
    C_BOUND,
    C_NAME_LEN,
    C_NAME_TAIL_LEN,
    C_OP,
    C_SHAPE_LEN,
    CAT_RELU,
    CAT_SHAPE,
    CAT_VAR_CONST,
    F_TEXT,
    I_IN_TOWER,
    K_ODD,
    N_DEVICES,
    N_LIB,
    N_STACK,
    N_WRAPPERS,
    O_BYTES,
    O_ENTRY_LEN,
    OP_LIB,
    OP_NAME_LEN,
    pcg_get,
    pcg_set,
    run_pass,
    seed_numba,
    shuffle_pass,
    trace_pass,
    write_chunk,
)

DEVICE_PREFIX = "/job:localhost/replica:0/task:0/device:"
CPU = DEVICE_PREFIX + "cpu:0"
GPU = DEVICE_PREFIX + "gpu:0"
STREAM_ALL = GPU + "/stream:all"
# Device table passed to the kernel: 0 cpu, 1 gpu, 2 stream:all, 3.. individual streams.
DEVICES = [CPU, GPU, STREAM_ALL] + [f"{GPU}/stream:{k}" for k in (13, 14, 15, 16)]
DT_FLOAT, DT_INT32 = 1, 3
CHUNK_BYTES = 32 << 20  # the output buffer

# ------------------------------------------------------------------------------ wire encoding

def _v_slow(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_VARINT = [_v_slow(i) for i in range(1 << 14)]


def _v(n: int) -> bytes:
    """Varint; negative numbers as 10-byte two's complement, as protobuf writes int64/int32."""
    if 0 <= n < 16384:
        return _VARINT[n]
    return _v_slow(n)


def _vi(f: int, n: int) -> bytes:
    return _v(f << 3) + _v(n)


def _ld(f: int, payload: bytes) -> bytes:
    return _v(f << 3 | 2) + _v(len(payload)) + payload


def _packed(f: int, values) -> bytes:
    return _ld(f, b"".join(_v(x) for x in values)) if len(values) else b""


def _shape_proto(dims) -> bytes:
    # TensorShapeProto: dim=2 (Dim: size=1); proto3 leaves size 0 out.
    return b"".join(_ld(2, _vi(1, d) if d else b"") for d in dims)


def attr_type(t: int) -> bytes:
    return _vi(6, t)


def attr_s(s: str) -> bytes:
    return _ld(2, s.encode())


def attr_b(b: bool) -> bytes:
    return _vi(5, int(b))


def attr_f(x: float) -> bytes:
    return _v(4 << 3 | 5) + struct.pack("<f", x)


def attr_ints(values) -> bytes:
    return _ld(1, _packed(3, values))


def attr_shape(dims) -> bytes:
    return _ld(7, _shape_proto(dims))


def attr_shapes(shapes) -> bytes:
    return _ld(1, b"".join(_ld(7, _shape_proto(s)) for s in shapes))


def attr_tensor(dtype: int, dims, values) -> bytes:
    body = _vi(1, dtype) + _ld(2, _shape_proto(dims))
    if dtype == DT_FLOAT:
        body += _ld(5, struct.pack(f"<{len(values)}f", *values)) if values else b""
    else:
        body += _packed(7, values)
    return _ld(8, body)


# ------------------------------------------------------------------------------ the graph


@dataclass
class Node:
    name: str
    op: str
    inputs: list[int]
    slots: list[int]
    attrs: dict[str, bytes]
    out_shapes: list[list[int]]
    shape: list[int] | None = None
    float_ops: int = 0
    trainable: bool = False
    device: int = 0  # 0 cpu, 1 gpu
    runs: bool = True


class GraphBuilder:
    """Adds nodes in TensorFlow's insertion order; ids are positions."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.ids: dict[str, int] = {}
        self.device = 0

    def add(self, name, op, inputs=(), attrs=None, out_shapes=((),), **kw) -> int:
        ids, slots = [], []
        for inp in inputs:
            base, _, slot = inp.partition(":")
            ids.append(self.ids[base.lstrip("^")])
            slots.append(int(slot) if slot else 0)
        node = Node(name, op, ids, slots, dict(attrs or {}), [list(s) for s in out_shapes], device=self.device, **kw)
        self.ids[name] = len(self.nodes)
        self.nodes.append(node)
        return self.ids[name]


# Code traces: the model's stack, framework wrappers (deep traces only), then the op library.
# Each frame's line is the named line plus a draw below 40; the source line's text is by id.
STACK = [("train.py", "<module>", 412), ("train.py", "main", 380), ("train.py", "build_model", 210),
         ("models/resnet.py", "resnet", 120), ("models/resnet.py", "block", 88), ("models/resnet.py", "unit", 41)]

_WRAPPERS = [
    ("keras/src/engine/base_layer.py", "__call__", 1100),
    ("keras/src/utils/traceback_utils.py", "error_handler", 60),
    ("tensorflow/python/util/dispatch.py", "op_dispatch_handler", 1170),
    ("keras/src/engine/functional.py", "_run_internal_graph", 650),
    ("tensorflow/python/util/traceback_utils.py", "error_handler", 150),
]


def _lib(op: str) -> list[tuple[str, str, int]]:
    return [
        ("tensorflow/python/framework/ops.py", "create_op", 3300),
        ("tensorflow/python/framework/op_def_library.py", "_apply_op_helper", 790),
        (f"tensorflow/python/ops/gen_{op.lower()}_ops.py", op.lower(), 1200),
        ("tensorflow/python/util/deprecation.py", "new_func", 540),
        ("tensorflow/python/ops/nn_ops.py", "convolution", 1100),
        ("tensorflow/python/layers/base.py", "__call__", 560),
    ]


def _frame_text(func: str, k: int) -> str:
    return f"{func}(...)  # line {k}"  # k: the frame's line % 7


def _variable(g: GraphBuilder, scope: str, shape, *, trainable=True, init="random_uniform") -> int:
    shp = list(shape)
    attrs = {
        "shape": attr_shape(shp),
        "dtype": attr_type(DT_FLOAT),
        "container": attr_s(""),
        "shared_name": attr_s(""),
        "_output_shapes": attr_shapes([shp]),
    }
    g.add(scope, "VariableV2", (), attrs, [shp], shape=shp, trainable=trainable)
    if init == "random_uniform":
        r = f"{scope}/Initializer/random_uniform"
        g.add(f"{r}/shape", "Const", (), {"dtype": attr_type(DT_INT32), "value": attr_tensor(DT_INT32, [len(shp)], shp),
                                          "_output_shapes": attr_shapes([[len(shp)]])}, [[len(shp)]], runs=False)
        for c in ("min", "max"):
            g.add(f"{r}/{c}", "Const", (), {"dtype": attr_type(DT_FLOAT), "value": attr_tensor(DT_FLOAT, [], [0.1]),
                                            "_output_shapes": attr_shapes([[]])}, [[]], runs=False)
        g.add(f"{r}/RandomUniform", "RandomUniform", (f"{r}/shape",), {"T": attr_type(DT_INT32), "dtype": attr_type(DT_FLOAT),
                                                                     "seed": _vi(3, 0), "seed2": _vi(3, 0),
                                                                     "_output_shapes": attr_shapes([shp])}, [shp], runs=False)
        g.add(f"{r}/sub", "Sub", (f"{r}/max", f"{r}/min"), {"T": attr_type(DT_FLOAT)}, [[]], runs=False)
        g.add(f"{r}/mul", "Mul", (f"{r}/RandomUniform", f"{r}/sub"), {"T": attr_type(DT_FLOAT)}, [shp], runs=False)
        g.add(r, "Add", (f"{r}/mul", f"{r}/min"), {"T": attr_type(DT_FLOAT)}, [shp], runs=False)
        src = r
    else:
        src = f"{scope}/Initializer/{init}"
        g.add(src, "Const", (), {"dtype": attr_type(DT_FLOAT), "value": attr_tensor(DT_FLOAT, shp, [1.0 if init == "ones" else 0.0]),
                                 "_output_shapes": attr_shapes([shp])}, [shp], runs=False)
    g.add(f"{scope}/Assign", "Assign", (scope, src), {"T": attr_type(DT_FLOAT), "use_locking": attr_b(True),
                                                       "validate_shape": attr_b(True), "_output_shapes": attr_shapes([shp])},
          [shp], runs=False)
    return g.add(f"{scope}/read", "Identity", (scope,), {"T": attr_type(DT_FLOAT), "_class": _ld(1, _ld(2, f"loc:@{scope}".encode())),
                                                          "_output_shapes": attr_shapes([shp])}, [shp])


class ResNet:
    """Emits the nodes of a ResNet-like training graph into a GraphBuilder."""

    def __init__(self, g: GraphBuilder, *, batch: int, scope_depth: int, dense_fraction: float = 0.0) -> None:
        self.g = g
        self.batch = batch
        self.extra_scopes = max(0, scope_depth - 4)
        self.dense_fraction = dense_fraction
        self.units = 0
        self.trainable: list[tuple[str, list[int]]] = []
        self.fwd: list[tuple[str, str, list[int], str]] = []  # (scope, op, out shape, input) for gradients

    def conv(self, scope: str, x: str, xshape: list[int], cout: int, k: int = 3) -> tuple[str, list[int]]:
        g = self.g
        n, h, w, cin = xshape
        wshape = [k, k, cin, cout]
        _variable(g, f"{scope}/weights", wshape)
        self.trainable.append((f"{scope}/weights", wshape))
        out = [n, h, w, cout]
        g.add(f"{scope}/Conv2D", "Conv2D", (x, f"{scope}/weights/read"), {
            "T": attr_type(DT_FLOAT), "data_format": attr_s("NHWC"), "dilations": attr_ints([1, 1, 1, 1]),
            "padding": attr_s("SAME"), "strides": attr_ints([1, 1, 1, 1]), "use_cudnn_on_gpu": attr_b(True),
            "explicit_paddings": _ld(1, b""),
            "_output_shapes": attr_shapes([out])}, [out], float_ops=2 * k * k * cin * cout * n * h * w)
        self.fwd.append((scope, "Conv2D", out, x))
        return f"{scope}/Conv2D", out

    def bn(self, scope: str, x: str, xshape: list[int]) -> tuple[str, list[int]]:
        g = self.g
        c = xshape[-1]
        for v, init in (("gamma", "ones"), ("beta", "zeros"), ("moving_mean", "zeros"), ("moving_variance", "ones")):
            _variable(g, f"{scope}/{v}", [c], trainable=v in ("gamma", "beta"), init=init)
            if v in ("gamma", "beta"):
                self.trainable.append((f"{scope}/{v}", [c]))
        g.add(f"{scope}/Const", "Const", (), {"dtype": attr_type(DT_FLOAT), "value": attr_tensor(DT_FLOAT, [0], []),
                                              "_output_shapes": attr_shapes([[0]])}, [[0]])
        outs = [xshape, [c], [c], [c], [c]]
        g.add(f"{scope}/FusedBatchNorm", "FusedBatchNorm",
              (x, f"{scope}/gamma/read", f"{scope}/beta/read", f"{scope}/Const", f"{scope}/Const"),
              {"T": attr_type(DT_FLOAT), "data_format": attr_s("NHWC"), "epsilon": attr_f(0.001),
               "is_training": attr_b(True), "_output_shapes": attr_shapes(outs)}, outs,
              float_ops=8 * int(np.prod(xshape)))
        self.fwd.append((scope, "FusedBatchNorm", xshape, x))
        return f"{scope}/FusedBatchNorm", xshape

    def unit(self, scope: str, x: str, xshape: list[int]) -> tuple[str, list[int]]:
        g = self.g
        for i in range(self.extra_scopes):
            scope = f"{scope}/sub_{i}"
        k, f = self.units, self.dense_fraction
        self.units += 1
        if int((k + 1) * f) > int(k * f):  # evenly spread, no random draw: f = 0 leaves the graph as it was
            return self.dense_unit(scope, x, xshape)
        y, s = self.conv(f"{scope}/conv1", x, xshape, xshape[-1])
        y, s = self.bn(f"{scope}/bn1", y, s)
        g.add(f"{scope}/Relu", "Relu", (y,), {"T": attr_type(DT_FLOAT), "_output_shapes": attr_shapes([s])}, [s],
              float_ops=int(np.prod(s)))
        self.fwd.append((scope, "Relu", s, y))
        y, s = self.conv(f"{scope}/conv2", f"{scope}/Relu", s, xshape[-1])
        y, s = self.bn(f"{scope}/bn2", y, s)
        g.add(f"{scope}/add", "Add", (y, x), {"T": attr_type(DT_FLOAT), "_output_shapes": attr_shapes([s])}, [s],
              float_ops=int(np.prod(s)))
        self.fwd.append((scope, "Add", s, x))
        g.add(f"{scope}/Relu_1", "Relu", (f"{scope}/add",), {"T": attr_type(DT_FLOAT), "_output_shapes": attr_shapes([s])},
              [s], float_ops=int(np.prod(s)))
        return f"{scope}/Relu_1", s

    def dense_unit(self, scope: str, x: str, xshape: list[int]) -> tuple[str, list[int]]:
        """A fully connected residual unit: Reshape, MatMul, BiasAdd, Relu, Reshape back, Add."""
        g = self.g
        c = xshape[-1]
        rows = int(np.prod(xshape[:-1]))
        flat = [rows, c]
        d = f"{scope}/dense"
        t = {"T": attr_type(DT_FLOAT)}
        for name, shp in (("Reshape/shape", [rows, c]), ("Reshape_1/shape", xshape)):
            g.add(f"{d}/{name}", "Const", (), {"dtype": attr_type(DT_INT32), "value": attr_tensor(DT_INT32, [len(shp)], shp),
                                               "_output_shapes": attr_shapes([[len(shp)]])}, [[len(shp)]])
        g.add(f"{d}/Reshape", "Reshape", (x, f"{d}/Reshape/shape"),
              {**t, "Tshape": attr_type(DT_INT32), "_output_shapes": attr_shapes([flat])}, [flat])
        _variable(g, f"{d}/kernel", [c, c])
        _variable(g, f"{d}/bias", [c], init="zeros")
        self.trainable += [(f"{d}/kernel", [c, c]), (f"{d}/bias", [c])]
        g.add(f"{d}/MatMul", "MatMul", (f"{d}/Reshape", f"{d}/kernel/read"),
              {**t, "transpose_a": attr_b(False), "transpose_b": attr_b(False), "_output_shapes": attr_shapes([flat])},
              [flat], float_ops=2 * rows * c * c)
        self.fwd.append((d, "MatMul", flat, f"{d}/Reshape"))
        g.add(f"{d}/BiasAdd", "BiasAdd", (f"{d}/MatMul", f"{d}/bias/read"),
              {**t, "data_format": attr_s("NHWC"), "_output_shapes": attr_shapes([flat])}, [flat], float_ops=rows * c)
        self.fwd.append((d, "BiasAdd", flat, f"{d}/MatMul"))
        g.add(f"{d}/Relu", "Relu", (f"{d}/BiasAdd",), {**t, "_output_shapes": attr_shapes([flat])}, [flat],
              float_ops=rows * c)
        self.fwd.append((d, "Relu", flat, f"{d}/BiasAdd"))
        g.add(f"{d}/Reshape_1", "Reshape", (f"{d}/Relu", f"{d}/Reshape_1/shape"),
              {**t, "Tshape": attr_type(DT_INT32), "_output_shapes": attr_shapes([xshape])}, [xshape])
        g.add(f"{scope}/add", "Add", (f"{d}/Reshape_1", x), {**t, "_output_shapes": attr_shapes([xshape])}, [xshape],
              float_ops=int(np.prod(xshape)))
        self.fwd.append((scope, "Add", xshape, x))
        return f"{scope}/add", xshape

    def gradients(self, start: str, start_shape: list[int]) -> None:
        g = self.g
        grad = "gradients/Fill"
        if "gradients/Fill" not in g.ids:
            g.add("gradients/Shape", "Const", (), {"dtype": attr_type(DT_INT32), "value": attr_tensor(DT_INT32, [0], []),
                                                   "_output_shapes": attr_shapes([[0]])}, [[0]])
            g.add("gradients/grad_ys_0", "Const", (), {"dtype": attr_type(DT_FLOAT), "value": attr_tensor(DT_FLOAT, [], [1.0]),
                                                       "_output_shapes": attr_shapes([[]])}, [[]])
            g.add(grad, "Fill", ("gradients/Shape", "gradients/grad_ys_0"), {"T": attr_type(DT_FLOAT),
                                                                              "_output_shapes": attr_shapes([[]])}, [[]])
        for scope, op, shape, x in reversed(self.fwd):
            gs = f"gradients/{scope}/{op}_grad"
            t = {"T": attr_type(DT_FLOAT)}
            if op == "Conv2D":
                g.add(f"{gs}/ShapeN", "ShapeN", (x, f"{scope}/weights/read"),
                      {**t, "N": _vi(3, 2), "out_type": attr_type(DT_INT32), "_output_shapes": attr_shapes([[4], [4]])},
                      [[4], [4]])
                g.add(f"{gs}/Conv2DBackpropInput", "Conv2DBackpropInput", (f"{gs}/ShapeN", f"{scope}/weights/read", grad),
                      {**t, "data_format": attr_s("NHWC"), "padding": attr_s("SAME"), "strides": attr_ints([1, 1, 1, 1]),
                       "_output_shapes": attr_shapes([shape])}, [shape], float_ops=2 * int(np.prod(shape)) * 9)
                g.add(f"{gs}/Conv2DBackpropFilter", "Conv2DBackpropFilter", (x, f"{gs}/ShapeN:1", grad),
                      {**t, "data_format": attr_s("NHWC"), "padding": attr_s("SAME"), "strides": attr_ints([1, 1, 1, 1]),
                       "_output_shapes": attr_shapes([shape])}, [shape], float_ops=2 * int(np.prod(shape)) * 9)
                g.add(f"{gs}/tuple/group_deps", "NoOp", (f"^{gs}/Conv2DBackpropInput", f"^{gs}/Conv2DBackpropFilter"), {}, [])
                grad = g.nodes[g.add(f"{gs}/tuple/control_dependency", "Identity",
                                     (f"{gs}/Conv2DBackpropInput", f"^{gs}/tuple/group_deps"),
                                     {**t, "_output_shapes": attr_shapes([shape])}, [shape])].name
                g.add(f"{gs}/tuple/control_dependency_1", "Identity", (f"{gs}/Conv2DBackpropFilter", f"^{gs}/tuple/group_deps"),
                      {**t, "_output_shapes": attr_shapes([shape])}, [shape])
            elif op == "FusedBatchNorm":
                outs = [shape, [shape[-1]], [shape[-1]], [0], [0]]
                grad = g.nodes[g.add(f"{gs}/FusedBatchNormGrad", "FusedBatchNormGrad",
                                     (grad, x, f"{scope}/gamma/read", f"{scope}/FusedBatchNorm:3", f"{scope}/FusedBatchNorm:4"),
                                     {**t, "data_format": attr_s("NHWC"), "epsilon": attr_f(0.001), "is_training": attr_b(True),
                                      "_output_shapes": attr_shapes(outs)}, outs, float_ops=10 * int(np.prod(shape)))].name
            elif op == "MatMul":  # d/dx = grad . W^T, d/dW = x^T . grad
                w = f"{scope}/kernel/read"
                g.add(f"{gs}/MatMul", "MatMul", (grad, w), {**t, "transpose_a": attr_b(False), "transpose_b": attr_b(True),
                                                           "_output_shapes": attr_shapes([shape])}, [shape],
                      float_ops=2 * int(np.prod(shape)) * shape[-1])
                g.add(f"{gs}/MatMul_1", "MatMul", (x, grad), {**t, "transpose_a": attr_b(True), "transpose_b": attr_b(False),
                                                             "_output_shapes": attr_shapes([[shape[-1], shape[-1]]])},
                      [[shape[-1], shape[-1]]], float_ops=2 * int(np.prod(shape)) * shape[-1])
                g.add(f"{gs}/tuple/group_deps", "NoOp", (f"^{gs}/MatMul", f"^{gs}/MatMul_1"), {}, [])
                grad = g.nodes[g.add(f"{gs}/tuple/control_dependency", "Identity", (f"{gs}/MatMul", f"^{gs}/tuple/group_deps"),
                                     {**t, "_output_shapes": attr_shapes([shape])}, [shape])].name
                g.add(f"{gs}/tuple/control_dependency_1", "Identity", (f"{gs}/MatMul_1", f"^{gs}/tuple/group_deps"),
                      {**t, "_output_shapes": attr_shapes([[shape[-1], shape[-1]]])}, [[shape[-1], shape[-1]]])
            elif op == "BiasAdd":
                g.add(f"{gs}/BiasAddGrad", "BiasAddGrad", (grad,), {**t, "data_format": attr_s("NHWC"),
                                                                    "_output_shapes": attr_shapes([[shape[-1]]])},
                      [[shape[-1]]], float_ops=int(np.prod(shape)))
            elif op == "Relu":
                grad = g.nodes[g.add(f"{gs}/ReluGrad", "ReluGrad", (grad, f"{scope}/Relu"),
                                     {**t, "_output_shapes": attr_shapes([shape])}, [shape])].name
            else:
                g.add(f"{gs}/Shape", "Shape", (x,), {**t, "out_type": attr_type(DT_INT32), "_output_shapes": attr_shapes([[4]])},
                      [[4]])
                g.add(f"{gs}/Sum", "Sum", (grad, f"{gs}/Shape"), {**t, "keep_dims": attr_b(False), "Tidx": attr_type(DT_INT32),
                                                                  "_output_shapes": attr_shapes([shape])}, [shape])
                grad = g.nodes[g.add(f"{gs}/Reshape", "Reshape", (f"{gs}/Sum", f"{gs}/Shape"),
                                     {**t, "Tshape": attr_type(DT_INT32), "_output_shapes": attr_shapes([shape])}, [shape])].name
        self.fwd.clear()


def _add_tower(g: GraphBuilder, tower: int, *, scope_depth: int, dense_fraction: float, gpu: bool,
               limit: float, starts: list[int]) -> int:
    """Add one data-parallel tower: a ResNet, the gradients of each block, the Momentum updates.

    Stops before the first group of nodes (a residual unit, a block's gradients, a variable's
    update) that would start with ``limit`` nodes or more, as the first generator did; ``starts``
    gets the node count at the start of every group added. Returns the node count where the
    Momentum part starts (its nodes are on the CPU in every tower).
    """
    batch = 32
    g.device = 1 if gpu and tower % 2 == 0 else 0
    net = ResNet(g, batch=batch, scope_depth=scope_depth, dense_fraction=dense_fraction)
    x, s = "input/images", [batch, 32, 32, 16]
    block = 0
    while len(g.nodes) < limit and block < 8:
        for unit in range(12):
            if len(g.nodes) >= limit:
                break
            starts.append(len(g.nodes))
            x, s = net.unit(f"tower_{tower}/resnet/block_{block}/unit_{unit}", x, s)
        if len(g.nodes) < limit:
            starts.append(len(g.nodes))
            net.gradients(x, s)
        block += 1
    g.device = 0
    momentum = len(g.nodes)
    for var, shape in net.trainable:
        if len(g.nodes) >= limit:
            break
        starts.append(len(g.nodes))
        _variable(g, f"{var}/Momentum", shape, trainable=False, init="zeros")
        g.add(f"Momentum/update_{var}/ApplyMomentum", "ApplyMomentum",
              (var, f"{var}/Momentum", "global_step", f"{var}/read", f"{var}/read"),
              {"T": attr_type(DT_FLOAT), "use_locking": attr_b(False), "use_nesterov": attr_b(False),
               "_output_shapes": attr_shapes([shape])}, [shape], float_ops=3 * int(np.prod(shape)))
    return momentum


def build_towers(n_nodes: int, *, scope_depth: int = 6, gpu: bool = True,
                 dense_fraction: float = 0.0) -> tuple[list[Node], int, int, int, int]:
    """The graph's nodes up to the end of tower 1 at most: (nodes, l0, period, momentum, n_added).

    Node ids 0..l0-1 are the two inputs and tower 0 (which also holds ``gradients/Fill``, shared
    by every tower). When ``n_nodes`` needs more, tower 1 follows complete: ``period`` nodes,
    its Momentum part from ``momentum`` on; tower t >= 2 is tower 1 renamed, its inputs inside
    the tower moved by (t - 1) * period, its forward and gradient ops on the GPU when t is
    even. ``n_added``: how many nodes the builder added in all (the graph is cut to
    ``n_nodes``; the group that crossed it was added whole, and its code traces drawn).
    ``dense_fraction``: that fraction of the residual units is fully connected (MatMul,
    BiasAdd) instead of convolutional (Conv2D, FusedBatchNorm), the op mix.
    """
    g = GraphBuilder()
    batch = 32
    g.add("input/images", "Placeholder", (), {"dtype": attr_type(DT_FLOAT), "shape": attr_shape([batch, 32, 32, 16]),
                                              "_output_shapes": attr_shapes([[batch, 32, 32, 16]])},
          [[batch, 32, 32, 16]], shape=[batch, 32, 32, 16])
    g.add("global_step", "VariableV2", (), {"dtype": attr_type(9), "shape": attr_shape([])}, [[]], shape=[], trainable=False)
    kw = dict(scope_depth=scope_depth, dense_fraction=dense_fraction, gpu=gpu)
    if len(g.nodes) < n_nodes:
        _add_tower(g, 0, limit=n_nodes, starts=[], **kw)
    l0 = len(g.nodes)
    if l0 >= n_nodes:
        return g.nodes, l0, 0, 0, l0
    starts: list[int] = []
    momentum = _add_tower(g, 1, limit=float("inf"), starts=starts, **kw) - l0
    period = len(g.nodes) - l0
    # The first group start (or tower end) at or past n_nodes, inside the tower that holds it.
    ends = np.array([s - l0 for s in starts] + [period])
    full, rest = divmod(n_nodes - l0 - 1, period)
    n_added = l0 + full * period + int(ends[np.searchsorted(ends, rest + 1)])
    return g.nodes, l0, period, momentum, n_added


# ------------------------------------------------------------------------------ slot templates

HEAVY = {"Conv2D": 900, "Conv2DBackpropInput": 1200, "Conv2DBackpropFilter": 1400, "FusedBatchNorm": 200,
         "FusedBatchNormGrad": 300, "MatMul": 400, "ApplyMomentum": 30}  # mean µs; other ops 8
RENAME = "tower_1"
assert (len(DEVICES), len(STACK), len(_WRAPPERS), len(_lib("Op"))) == (N_DEVICES, N_STACK, N_WRAPPERS, N_LIB)


class _Blob:
    """Byte strings in one array, each stored once: ``add`` gives (offset, length)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.at: dict[bytes, tuple[int, int]] = {}
        self.size = 0

    def add(self, b: bytes) -> tuple[int, int]:
        if b not in self.at:
            self.at[b] = (self.size, len(b))
            self.parts.append(b)
            self.size += len(b)
        return self.at[b]

    def array(self) -> np.ndarray:
        return np.frombuffer(b"".join(self.parts) + b"\0", np.uint8).copy()


def _split(text: bytes, renamed: bool) -> tuple[bytes, bytes]:
    """A string of tower 1 as (up to "tower_", after "tower_1"): tower t's is head + str(t) + tail."""
    if not renamed:
        return text, b""
    k = text.find(RENAME.encode() + b"/")
    assert k >= 0 and text.find(RENAME.encode() + b"/", k + 1) < 0, text
    return text[:k + len(RENAME) - 1], text[k + len(RENAME):]


@dataclass
class _Slots:
    """Every distinct node, as flat int64 tables for the kernels (see ``build_towers``).

    Slots 0..l0-1 are nodes 0..l0-1, written as they are; slots l0..l0+period-1 are tower 1's
    nodes, the templates of every later tower. The ProfileNode fields that do not depend on the
    tower are encoded here once, in ``blob``; names and ``_class`` attrs are split around the
    tower number, inputs inside the tower are kept relative to its first node.
    """

    l0: int
    period: int
    blob: np.ndarray
    slot: np.ndarray
    in_start: np.ndarray
    in_items: np.ndarray
    attr_start: np.ndarray
    attr_items: np.ndarray
    src_start: np.ndarray
    src_items: np.ndarray
    out_start: np.ndarray
    out_items: np.ndarray
    op_table: np.ndarray
    op_micros: np.ndarray
    frame_table: np.ndarray
    consts: np.ndarray
    strings: list[str] = field(default_factory=list)  # every string a code trace can name
    width: int = 0  # the longest list a node shuffles

    @classmethod
    def build(cls, nodes: list[Node], l0: int, period: int, momentum: int, gpu: bool) -> _Slots:
        blob = _Blob()
        ops: dict[str, int] = {}
        rows, ins, attrs, srcs, outs = [], [], [], [], []
        in_start, attr_start, src_start, out_start = [0], [0], [0], [0]
        for s, nd in enumerate(nodes[:l0 + period]):
            renamed = s >= l0
            head, tail = _split(nd.name.encode(), renamed)
            op = ops.setdefault(nd.op, len(ops))
            shape = _packed(4, nd.shape if nd.shape else [1]) if nd.shape is not None else b""
            dev_even = nd.device if not renamed else int(gpu and s - l0 < momentum)
            category = {"VariableV2": CAT_VAR_CONST, "Const": CAT_VAR_CONST, "ShapeN": CAT_SHAPE, "Shape": CAT_SHAPE,
                        "Relu": CAT_RELU}.get(nd.op, 0)
            for dev in {CPU, GPU}:  # tfprof sorts a node's types: the device, the op, _trainable_variables
                assert dev < nd.op < "_trainable_variables", nd.op
            rows.append([*blob.add(head), *blob.add(tail), int(renamed), op, *blob.add(shape), int(nd.trainable),
                         dev_even, nd.device, nd.float_ops, int(nd.runs), category, 0])

            def ref(pid: int) -> tuple[int, int]:  # a template's input inside its tower: from the tower's start
                return (pid - l0, 1) if renamed and pid >= l0 else (pid, 0)

            ins += [[ref(pid)[0], k, ref(pid)[1]] for k, pid in enumerate(nd.inputs)]
            src: dict[int, int] = {}  # ProfileNode.src_output_index: input node -> its output slot
            for pid, k in zip(nd.inputs, nd.slots):
                src[pid] = k
            srcs += [[ref(pid)[0], k, ref(pid)[1]] for pid, k in src.items()]
            for key, value in nd.attrs.items():
                if renamed and b"tower_" in value:
                    loc = value[value.index(b"loc:@"):]
                    assert key == "_class" and _ld(1, _ld(2, loc)) == value, (nd.name, key)
                    h, t = _split(loc, True)
                    attrs.append([1, *blob.add(h), *blob.add(t)])
                else:
                    attrs.append([0, *blob.add(_ld(11, _ld(1, key.encode()) + _ld(2, value))), 0, 0])
            for k, dims in enumerate(nd.out_shapes):
                entry = _ld(15, _vi(1, k) + _ld(2, _packed(1, dims)))
                outs.append([*blob.add(entry), max(4, 4 * int(np.prod(dims))) if dims else 4])
            in_start.append(len(ins))
            src_start.append(len(srcs))
            attr_start.append(len(attrs))
            out_start.append(len(outs))
        frames = STACK + _WRAPPERS
        op_rows = []
        for op in ops:
            lib = []
            for fr in _lib(op):
                if fr not in frames:
                    frames.append(fr)
                lib.append(frames.index(fr))
            op_rows.append([*blob.add(op.encode()), int(op in HEAVY), *lib])
        strings: dict[str, int] = {}
        frame_rows = []
        for file, func, line in frames:
            texts = [_frame_text(func, k) for k in range(7)]
            frame_rows.append([strings.setdefault(file, len(strings)), strings.setdefault(func, len(strings)), line,
                               *(strings.setdefault(t, len(strings)) for t in texts)])
        odd_list = _ld(11, _ld(1, b"odd_list") + _ld(2, _ld(1, _vi(3, 7) + _vi(3, 300))))  # list.i, not packed
        func = _ld(1, b"f") + _ld(2, _ld(1, b"b") + _ld(2, _vi(3, 2))) + _ld(2, _ld(1, b"a") + _ld(2, _vi(3, 1)))
        odd_func = _ld(11, _ld(1, b"odd_func") + _ld(2, _ld(10, func)))  # a func attr whose map is not sorted
        consts = [blob.add(d.encode()) for d in DEVICES]
        consts += [blob.add(b"_trainable_variables"), blob.add(b"_class"), blob.add(odd_list), blob.add(odd_func)]

        def table(items, width):
            return np.array(items, np.int64).reshape(-1, width)

        width = max(np.diff(in_start).max(), np.diff(attr_start).max() + 2, np.diff(src_start).max(),
                    np.diff(out_start).max())
        return cls(l0, period, blob.array(), table(rows, C_BOUND + 1), np.array(in_start), table(ins, I_IN_TOWER + 1),
                   np.array(attr_start), table(attrs, A_TAIL_LEN + 1), np.array(src_start), table(srcs, I_IN_TOWER + 1),
                   np.array(out_start), table(outs, O_BYTES + 1),
                   table(op_rows, OP_LIB + N_LIB), np.array([float(HEAVY.get(op, 8)) for op in ops]),
                   table(frame_rows, F_TEXT + 7), table(consts, 2), list(strings), int(width))

    def set_bounds(self, steps: int, max_frames: int, odd_attrs: bool) -> None:
        """C_BOUND: at most how many bytes a node of each slot takes (its map entry, every step included)."""
        sl = self.slot
        n_out = np.diff(self.out_start)
        fixed = np.zeros(len(sl), np.int64)
        np.add.at(fixed, np.repeat(np.arange(len(sl)), np.diff(self.attr_start)),
                  self.attr_items[:, A_HEAD_LEN] + self.attr_items[:, A_TAIL_LEN] + 32)
        np.add.at(fixed, np.repeat(np.arange(len(sl)), n_out), self.out_items[:, O_ENTRY_LEN])
        fixed += 2 * (sl[:, C_NAME_LEN] + sl[:, C_NAME_TAIL_LEN]) + sl[:, C_SHAPE_LEN]
        fixed += 32 * (np.diff(self.in_start) + np.diff(self.src_start))
        fixed += 2 * self.op_table[sl[:, C_OP], OP_NAME_LEN] + 512 + 48 * max_frames
        fixed += int(odd_attrs) * int(self.consts[K_ODD:, 1].sum() + 16)
        sl[:, C_BOUND] = fixed + steps * (3 * (900 + 40 * n_out) + 300 * 3)


# ------------------------------------------------------------------------------ the profile, streamed

TRACE_BLOCK = 1 << 16  # the graph's trace draws come in blocks of this many


def _draw_traces(rng: np.random.Generator, sl: _Slots, n_added: int, lo: int, hi: int, exact: bool,
                 sid_of: np.ndarray, tpos: np.ndarray) -> np.ndarray:
    """The graph's trace draws (``rng.integers`` blocks, each taken from its end), as many as the
    first generator took for its ``n_added`` nodes; leaves ``rng`` where that generator left it."""
    most = 1 + (hi if exact else min(hi, N_STACK + N_LIB))
    stream = np.empty((-(-n_added * most // TRACE_BLOCK) + 1) * TRACE_BLOCK, np.int32)  # touched as far as drawn
    states = [rng.bit_generator.state]
    n_sid = np.zeros(1, np.int64)
    i = pos = avail = 0
    while i < n_added:
        while pos + most > avail:
            stream[avail:avail + TRACE_BLOCK] = rng.integers(0, 1 << 30, TRACE_BLOCK)[::-1]
            avail += TRACE_BLOCK
            states.append(rng.bit_generator.state)
        i, pos = trace_pass(stream, avail, i, pos, n_added, sl.l0, sl.period, sl.slot, sl.op_table, sl.frame_table,
                            lo, hi, exact, sid_of, n_sid, tpos)
    rng.bit_generator.state = states[-(-pos // TRACE_BLOCK)]  # a block drawn ahead is given back
    return stream


def _chunks(nodes: int, steps: int, *, scope_depth: int = 6, seed: int = 0, trace: bool = True, gpu: bool = True,
            key_order: bool = False, empty_steps: int = 0, loops: bool = True, odd_attrs: bool = False,
            all_run: bool = False, dense_fraction: float = 0.0,
            trace_depth: tuple[int, int] | None = None) -> Iterator[np.ndarray | bytes]:
    """A synthetic ProfileProto in pieces: the nodes map a buffer at a time, then the rest.

    ``empty_steps`` extra step ids are listed in ``steps`` without any node running in them.
    ``all_run`` makes every node run in every step (by default, as in a real training step,
    initializers, ``Assign`` and half of the variables and constants do not run).
    ``key_order`` writes every map sorted by key (as Python's deterministic serializer does)
    instead of in hash order. ``odd_attrs`` gives a few nodes attrs that are valid protobuf but
    not in canonical encoding (unpacked ints, a func attr whose map is not sorted).
    ``dense_fraction``: see ``build_towers``. ``trace_depth`` (lo, hi): each node's code trace has
    lo..hi frames, uniformly; None keeps the first generator's draw (5 to 12 frames).
    Each piece is valid only until the next one is asked for (the buffer is reused).
    """
    n = nodes
    graph, l0, period, momentum, n_added = build_towers(n, scope_depth=scope_depth, gpu=gpu,
                                                        dense_fraction=dense_fraction)
    sl = _Slots.build(graph, l0, period, momentum, gpu)
    del graph
    # None: the historical draw (5..15 frames asked for, at most the 12 named ones given),
    # kept so that the default profiles, and the numbers measured on them, do not change.
    lo, hi = trace_depth or (5, 15)
    exact = trace_depth is not None
    sl.set_bounds(steps, (hi if exact else min(hi, N_STACK + N_LIB)) if trace else 0, odd_attrs)

    rng = np.random.default_rng(seed)  # the graph's: code traces, then which nodes run
    sid_of = np.zeros(len(sl.strings), np.int64)
    tpos = np.zeros(max(n_added, 1), np.int64)
    stream = _draw_traces(rng, sl, n_added, lo, hi, exact, sid_of, tpos) if trace else np.zeros(1, np.int32)
    run, step_period, loop = np.zeros(n, np.uint8), np.ones(n, np.uint8), np.ones(n, np.uint8)
    run_pass(np.zeros(1) if all_run else rng.random(n), n, sl.l0, sl.period, sl.slot, all_run, loops, run,
             step_period, loop)

    rng = np.random.default_rng(seed + 1)  # the shuffles: of each node's maps, the nodes map, the strings
    shuffle = not key_order
    s_hi, s_lo, s_half = (np.zeros(n if shuffle else 1, t) for t in (np.uint64, np.uint64, np.int64))
    st = pcg_get(rng)
    if shuffle:
        shuffle_pass(st, n, sl.l0, sl.period, sl.in_start, sl.attr_start, sl.src_start, sl.out_start,
                     odd_attrs, sl.width, s_hi, s_lo, s_half)
        pcg_set(rng, st)
    order = rng.permutation(n) if shuffle else np.arange(n)

    tables = (sl.l0, sl.period, sl.blob, sl.slot, sl.in_start, sl.in_items, sl.attr_start, sl.attr_items,
              sl.src_start, sl.src_items, sl.out_start, sl.out_items, sl.op_table, sl.op_micros, sl.frame_table,
              sl.consts, sl.width)
    traces = (stream, tpos, sid_of, lo, hi, exact, trace)
    draws = (run, step_period, loop, s_hi, s_lo, s_half, st[2:4].copy())
    dev_bytes = [d.encode() for d in DEVICES]
    dev_rank = np.argsort(np.argsort(np.array(dev_bytes, dtype=object))).astype(np.int64)
    step_ids, step_order = np.arange(steps, dtype=np.int64), np.arange(steps, dtype=np.int64)
    out = np.empty(max(CHUNK_BYTES, 2 * int(sl.slot[:, C_BOUND].max())), np.uint8)
    seed_numba(seed)  # numba's np.random, for the per-step records in output order
    j = 0
    while j < n:
        end, j = write_chunk(out, j, order, n, tables, traces, draws, shuffle, odd_attrs, step_ids, step_order,
                             dev_rank)
        yield out[:end]

    tail = []
    if trace:
        tail.append(_vi(2, 1))
    tail.append(_packed(3, list(range(steps + empty_steps))))
    used = np.flatnonzero(sid_of)
    ids = [(sl.strings[k], int(sid_of[k])) for k in used[np.argsort(sid_of[used])]]
    if shuffle:
        ids = [ids[i] for i in rng.permutation(len(ids))]
    tail += [_ld(4, _vi(1, v) + _ld(2, k.encode())) for k, v in ids]
    yield b"".join(tail)


def generate(nodes: int = 2000, steps: int = 3, **kw) -> bytes:
    """The bytes of a synthetic ProfileProto (keywords as ``write_profile``)."""
    buf = io.BytesIO()
    for piece in _chunks(nodes, steps, **kw):
        buf.write(memoryview(piece))
    return buf.getvalue()


def write_profile(path: str | Path, nodes: int = 2000, steps: int = 3, **kw) -> int:
    """Write a synthetic ProfileProto to ``path``; returns its size in bytes.

    Keywords: ``scope_depth``, ``seed``, ``trace``, ``gpu``, ``key_order``, ``empty_steps``, ``loops``,
    ``odd_attrs``, ``all_run``, ``dense_fraction``, ``trace_depth`` (see ``_chunks``).
    """
    size = 0
    with open(path, "wb") as f:
        for piece in _chunks(nodes, steps, **kw):
            f.write(memoryview(piece))
            size += len(piece)
    return size


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--scope-depth", type=int, default=6, help="name-scope levels above a layer's ops (>= 4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-trace", action="store_true", help="no code traces (has_trace false)")
    ap.add_argument("--no-gpu", action="store_true", help="every node on cpu:0, no accelerator execs")
    ap.add_argument("--key-order", action="store_true", help="write maps sorted by key instead of hash order")
    ap.add_argument("--empty-steps", type=int, default=0, help="extra listed steps in which nothing ran")
    ap.add_argument("--all-run", action="store_true", help="every node runs in every step (denser than real)")
    ap.add_argument("--dense-fraction", type=float, default=0.0,
                    help="op mix: fraction of residual units that are MatMul/BiasAdd instead of Conv2D/FusedBatchNorm")
    ap.add_argument("--trace-depth", metavar="LO,HI",
                    help="frames per code trace, uniformly LO..HI (default: 5 to 12 frames)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    depth = tuple(int(x) for x in a.trace_depth.split(",")) if a.trace_depth else None
    if depth is not None and (len(depth) != 2 or not 1 <= depth[0] <= depth[1]):
        ap.error(f"--trace-depth wants LO,HI with 1 <= LO <= HI, not `{a.trace_depth}`")
    t = time.perf_counter()
    size = write_profile(a.out, a.nodes, a.steps, scope_depth=a.scope_depth, seed=a.seed, trace=not a.no_trace,
                         gpu=not a.no_gpu, key_order=a.key_order, empty_steps=a.empty_steps, all_run=a.all_run,
                         dense_fraction=a.dense_fraction, trace_depth=depth)
    print(f"wrote {a.out}: {size / 1e6:.1f} MB, {a.nodes} nodes x {a.steps} steps "
          f"in {time.perf_counter() - t:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()

"""A live ``tf.Graph``: what TensorFlow's Python logger (``tfprof_logger``,
docs/TFPROF_BEHAVIOUR.md, 'Op log builder') reads from it.

From a ``tf.Graph`` TensorFlow's profiler API sends ``as_graph_def(add_shapes=True)`` and an op
log it builds itself: every op's float operations from its static shapes, the Python call
stack that created it (``op.traceback``), and the `_trainable_variables` type of the trainable
variables. ``LiveGraph`` builds the same op log, with the FLOPs computed by our own rules
(``tfprof.queries.flops``) from a frame of the graph's shapes; a RunMetadata first fills in
the static shapes it knows, changing the caller's graph as TensorFlow does.

TensorFlow is never imported by this module: a ``tf.Graph`` is recognised by its methods, and
``tensorflow()`` imports it only for the capture API, with one line saying how to install it.
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import polars as pl

from tfprof.errors import MissingDependencyError
from tfprof.ingest.op_log import TRAINABLE_VARIABLES
from tfprof.queries.flops import OP_FORMULAS, apply_formulas
from tfprof.schema.proto import tfprof_log_pb2

_TOKENS = itertools.count()
INSTALL_HINT = "pip install 'tfprof[tensorflow]'"

# The attributes each rule reads (the others are absent or irrelevant for its ops).
_RULE_ATTRS = {
    "matmul": ("transpose_a",),
    "batch_matmul": ("adj_x",),
    "pool": ("ksize", "data_format"),
    "avg_pool_grad": ("ksize", "data_format"),
    "max_pool_grad": ("ksize", "data_format"),
    "conv2d_backprop_input": ("strides", "data_format"),
    "conv2d_backprop_filter": ("strides", "data_format"),
}
_DIMS = pl.List(pl.Int64)
_FRAME_SCHEMA = {
    "node_id": pl.Int64, "name": pl.String, "op": pl.String, "formula": pl.String,
    "out_dims": _DIMS, "in0_dims": _DIMS, "in1_dims": _DIMS, "n_inputs": pl.Int64,
    "transpose_a": pl.Boolean, "adj_x": pl.Boolean, "nchw": pl.Boolean, "strides": _DIMS, "ksize": _DIMS,
}  # fmt: skip


def tensorflow(feature: str) -> Any:
    """The ``tensorflow`` module, or a one-line error naming ``feature`` and the install command."""
    try:
        import tensorflow as tf  # noqa: PLC0415 (optional extra, imported on use only)
    except ImportError:
        raise MissingDependencyError(f"{feature} needs TensorFlow, which is not installed: {INSTALL_HINT}") from None
    return tf


def is_tf_graph(graph: Any) -> bool:
    """True for a ``tf.Graph`` (recognised by its methods: TensorFlow is not imported to check)."""
    return all(hasattr(graph, m) for m in ("as_graph_def", "get_collection", "get_operations", "version"))


def _dims(shape: Any) -> list[int]:
    """tfprof's shape list of a TensorShape: [] unknown rank, [1] a scalar, -1 an unknown dim."""
    if shape.rank is None:
        return []
    if shape.rank == 0:
        return [1]
    return [-1 if d is None else int(d) for d in shape.as_list()]


def _attr(op: Any, name: str) -> Any:
    try:
        return op.get_attr(name)
    except (ValueError, KeyError):
        return None


class LiveGraph:
    """One ``tf.Graph`` and the op log TensorFlow's logger builds from it.

    An op's traceback never changes, so each is read once; ``changed_since`` tells a profiler
    whether anything it was given before (nodes, static shapes) has changed since.
    """

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self._token = next(_TOKENS)  # tells this LiveGraph's states from another's
        self._frames: dict[str, tuple] = {}  # op name -> its traceback as (file, line, function, text)
        self._shape_edits = 0  # static shapes filled from RunMetadata so far

    def graph_def(self) -> Any:
        """``as_graph_def(add_shapes=True)``, as TensorFlow sends it; None for an empty graph."""
        graph_def = self.graph.as_graph_def(add_shapes=True)
        return graph_def if len(graph_def.node) else None

    def state(self) -> tuple[int, int, int]:
        """What the op log depends on: which graph, its version (ops added) and shapes filled."""
        return (self._token, self.graph.version, self._shape_edits)

    # ---------------------------------------------------- shapes (docs/TFPROF_BEHAVIOUR.md, 'Op log builder', step 2)

    def fill_shapes(self, run_meta: Any) -> int:
        """Give each graph op's outputs whose static shape is not fully defined the shape the
        run recorded (TensorFlow's ``_fill_missing_graph_shape``); returns how many changed.

        Skipped as TensorFlow skips them: records without outputs, names the graph lacks, and
        ops whose output count differs from the record's (a conditional's). Incompatible shapes
        print TensorFlow's stderr line and are left as they are.
        """
        changed = 0
        for dev in run_meta.step_stats.dev_stats:
            for ns in dev.node_stats:
                if not ns.output:
                    continue
                try:
                    op = self.graph.get_operation_by_name(ns.node_name)
                except (KeyError, ValueError):
                    continue  # not a graph op (RecvTensor, _SOURCE, ...)
                outputs = op.outputs
                if len(ns.output) != len(outputs):
                    continue
                # tfprof_logger pairs the i-th record with the i-th output, whatever its slot.
                for tensor, out in zip(outputs, ns.output):
                    static = tensor.get_shape()
                    if static.is_fully_defined():
                        continue
                    runtime = [d.size for d in out.tensor_description.shape.dim]
                    try:
                        merged = static.merge_with(runtime)
                    except ValueError as exc:
                        sys.stderr.write(f"Node {ns.node_name} incompatible shapes: {exc}.\n")
                        continue
                    if merged.as_proto() != static.as_proto():
                        tensor.set_shape(merged)
                        changed += 1
        self._shape_edits += changed
        return changed

    # ------------------------------------------------------------------ flops (docs/TFPROF_BEHAVIOUR.md, 'FLOPs rules')

    def _shape_frame(self, ops: list) -> pl.DataFrame:
        rows = []
        for i, op in enumerate(ops):
            formula = OP_FORMULAS.get(op.type)
            if formula is None:
                continue
            inputs = op.inputs  # NodeDef.input[0], [1] as the registry reads them: real slots
            attrs = {name: _attr(op, name) for name in _RULE_ATTRS.get(formula, ())}
            data_format = attrs.get("data_format") or b""
            rows.append(
                (
                    i, op.name, op.type, formula,
                    _dims(op.outputs[0].get_shape()) if op.outputs else None,
                    _dims(inputs[0].get_shape()) if len(inputs) > 0 else None,
                    _dims(inputs[1].get_shape()) if len(inputs) > 1 else None,
                    len(inputs) + len(op.control_inputs),  # len(NodeDef.input): control inputs count
                    bool(attrs.get("transpose_a")), bool(attrs.get("adj_x")),
                    data_format in (b"NCHW", b"NCDHW"),
                    attrs.get("strides"), attrs.get("ksize"),
                )
            )  # fmt: skip
        return pl.DataFrame(rows, schema=_FRAME_SCHEMA, orient="row")

    def flops(self, ops: list | None = None) -> pl.DataFrame:
        """Per op whose type has a rule: ``name``, ``float_ops`` (null: a shape the rule needs is
        not fully defined, which TensorFlow counts as "no flops stats"), in graph order."""
        ops = self.graph.get_operations() if ops is None else ops
        return apply_formulas(self._shape_frame(ops)).select("name", "float_ops")

    # -------------------------------------------------------- the op log (docs/TFPROF_BEHAVIOUR.md, 'Op log builder')

    def _traceback(self, op: Any) -> tuple:
        frames = self._frames.get(op.name)
        if frames is None:
            frames = self._frames[op.name] = tuple(tuple(f) for f in (op.traceback or ()))
        return frames

    def op_log(self, run_meta: Any = None, add_trace: bool = True, add_trainable_var: bool = True) -> Any:
        """TensorFlow's default op log of the graph (``_get_logged_ops``), as an OpLogProto.

        ``run_meta`` (our RunMetadata message) first fills missing static shapes. Entries follow
        graph order: an op gets one when it has float operations or, with ``add_trace``, always
        (its traceback outermost first); trainable variables' ops then get the
        `_trainable_variables` type. Strings are numbered on first sight from 1 (0 is `none`).
        """
        if run_meta is not None:
            self.fill_shapes(run_meta)
        ops = self.graph.get_operations()
        flops = self.flops(ops)
        float_ops = dict(zip(flops["name"].to_list(), flops["float_ops"].to_list()))
        missing = sum(v is None for v in float_ops.values())
        strings = {"none": 0}

        def sid(s: str) -> int:
            return strings.setdefault(s, len(strings)) if s else 0

        log = tfprof_log_pb2.OpLogProto()
        entries: dict[str, Any] = {}
        for op in ops:
            value = float_ops.get(op.name)
            if not value and not add_trace:
                continue
            entry = entries[op.name] = log.log_entries.add(name=op.name)
            if value:
                entry.float_ops = value
            if add_trace:
                traces = entry.code_def.traces
                for file, lineno, function, line in self._traceback(op):
                    traces.add(
                        file_id=sid(file), lineno=lineno or -1, function_id=sid(function), line_id=sid(line),
                        func_start_line=-1,
                    )  # fmt: skip
        if add_trainable_var:
            for var in self.graph.get_collection("trainable_variables"):
                name = var.op.name
                if name not in entries:
                    entries[name] = log.log_entries.add(name=name)
                entries[name].types.append(TRAINABLE_VARIABLES)
        if missing and run_meta is None:
            sys.stderr.write(f"{missing} ops no flops stats due to incomplete shapes.\n")
        for s, i in strings.items():
            log.id_to_string[i] = s
        return log

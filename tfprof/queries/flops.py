"""FLOPs from tensor shapes: TensorFlow's flops registry as a table of formulas
(docs/TFPROF_BEHAVIOUR.md, 'FLOPs rules').

The real tfprof never computes FLOPs itself. TensorFlow's *Python* op-log builder
(``tfprof_logger``) asks the statistics registry for a ``flops`` value per op, from the graph's
static shapes, and writes the non-zero ones into the OpLogProto; the C++ profiler only reads
them. So a profile made from a GraphDef without an op log shows ``0/0 flops`` everywhere, in the
real tool and in ours (docs/TFPROF_BEHAVIOUR.md, 'Missing data'), and the default views keep doing so.

``flops_from_shapes`` recomputes what that registry would write, as one polars query over
``nodes`` + ``output_shapes`` + ``node_inputs`` + ``node_attrs``: ``FORMULAS`` holds one row per
rule (an expression over shape-derived columns and the shapes it needs fully defined), and
``OP_FORMULAS`` maps every op type TensorFlow 2.21 registers to its rule. Nothing loops over
nodes. ``with_flops_from_shapes`` is the explicit opt-in that feeds those numbers to the views,
merged as the Python API merges them (docs/TFPROF_BEHAVIOUR.md, 'Op log builder': a non-zero op-log value wins).

Deliberate differences from TensorFlow (docs/COMPATIBILITY.md row 9, docs/TFPROF_BEHAVIOUR.md, 'Known quirks' #13), flagged per row in
``diverges``: BatchMatMul's ``k`` honours ``adj_x`` (TensorFlow reads a ``transpose_a`` attr these
ops do not have), and pooling and conv-backprop rules also count NCHW graphs (TensorFlow
raises, so those nodes get no FLOPs). Everything else, ``int()`` truncation and requirements on
shapes a formula does not even use included, is reproduced.

Input shapes are the producer's output shape at the slot tfprof records (``node_inputs
.output_slot``), which TF 2.21 release builds always record as 0: an input written ``x:1`` is
read as ``x:0``. The fixtures never feed a formula's shape from a slot other than 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from tfprof.profile import Profile
from tfprof.schema.flops_rules import MAC_FORMULAS, OP_FORMULAS, node_flops_table
from tfprof.schema.tables import FOREIGN_NO_SOURCE

# ----------------------------------------------------------------------------- shape columns

# AttrValue encodings compared as bytes (node_attrs keeps serialized AttrValues):
# b=true is field 5 varint 1; s="NCHW" is field 2, length 4.
_TRUE = b"\x28\x01"
_CHANNELS_FIRST = (b"\x12\x04NCHW", b"\x12\x05NCDHW")
_LIST_ATTRS = ("strides", "ksize")
_BOOL_ATTRS = ("transpose_a", "adj_x")


def _elems(dims: str) -> pl.Expr:
    """Number of elements of a fully defined shape; null for unknown rank or an unknown dim."""
    d = pl.col(dims)
    defined = (d.list.len() > 0) & (d.list.min() >= 0)
    return pl.when(defined).then(d.list.eval(pl.element().product()).list.first())


def _dim(dims: str, i: int) -> pl.Expr:
    return pl.col(dims).list.get(i, null_on_oob=True)


def _channels(dims: str) -> pl.Expr:
    """The channel dim: last for NHWC (TensorFlow's ``shape[-1]``), second for NCHW."""
    return pl.when(pl.col("nchw")).then(_dim(dims, 1)).otherwise(_dim(dims, -1))


def _stride_hw() -> pl.Expr:
    """strides[1]·strides[2] for NHWC (TensorFlow's rule); the H and W strides for NCHW."""
    s = "strides"
    return pl.when(pl.col("nchw")).then(_dim(s, 2) * _dim(s, 3)).otherwise(_dim(s, 1) * _dim(s, 2))


_KSIZE = pl.col("ksize").list.eval(pl.element().product()).list.first()
_OUT, _IN0, _IN1 = pl.col("out_n"), pl.col("in0_n"), pl.col("in1_n")


# ----------------------------------------------------------------------------- the rules


@dataclass(frozen=True)
class Formula:
    """One rule: ``flops`` over shape columns, valid only when every ``requires`` is known."""

    expression: str  # the rule in words (notation of docs/TFPROF_BEHAVIOUR.md, 'FLOPs rules')
    requires: tuple[str, ...]  # element counts TensorFlow asserts fully defined
    flops: pl.Expr
    nhwc_only: bool = False  # TensorFlow raises unless data_format is NHWC


FORMULAS: dict[str, Formula] = {
    "unary": Formula("elems(in0)", ("in0_n",), _IN0),
    "rsqrt": Formula("2 * elems(in0)", ("in0_n",), 2 * _IN0),
    "softmax": Formula("5 * elems(in0)", ("in0_n",), 5 * _IN0),
    "l2_loss": Formula("3 * elems(in0) - 1", ("in0_n",), 3 * _IN0 - 1),
    "binary": Formula("elems(out)", ("out_n",), _OUT),
    "squared_difference": Formula("2 * elems(out)", ("out_n",), 2 * _OUT),
    "rsqrt_grad": Formula("4 * elems(out)", ("out_n",), 4 * _OUT),
    # reductions: elems(in0)·r + elems(out)·(f − r); Mean has r = f = 1, the others r = 1, f = 0
    "mean": Formula("elems(in0)", ("in0_n", "out_n"), _IN0),
    "reduction": Formula("elems(in0) - elems(out)", ("in0_n", "out_n"), _IN0 - _OUT),
    "bias_add": Formula("elems(in0)", ("in0_n",), _IN0),
    "add_n": Formula("elems(in0) * (inputs - 1)", ("in0_n",), _IN0 * (pl.col("n_inputs") - 1)),
    "pool": Formula("prod(ksize) * elems(out)", ("out_n",), _KSIZE * _OUT, nhwc_only=True),
    "avg_pool_grad": Formula("2 * prod(ksize) * elems(in1)", ("in1_n",), 2 * _KSIZE * _IN1, nhwc_only=True),
    "max_pool_grad": Formula(
        "prod(ksize) * elems(in1) + elems(in1)", ("in1_n",), _KSIZE * _IN1 + _IN1, nhwc_only=True
    ),
    # Python's int(2·a·b / (c·s)) is the floor of the exact quotient for non-negative values.
    "conv2d_backprop_input": Formula(
        "int(2 * elems(out) * elems(in1) / (channels(out) * stride_h * stride_w))",
        ("out_n", "in1_n"),
        (2 * _OUT * _IN1) // (_channels("out_dims") * _stride_hw()),
        nhwc_only=True,
    ),
    "conv2d_backprop_filter": Formula(
        "int(2 * elems(in0) * elems(out) / (channels(in0) * stride_h * stride_w))",
        ("in0_n", "out_n"),
        (2 * _IN0 * _OUT) // (_channels("in0_dims") * _stride_hw()),
        nhwc_only=True,
    ),
    "matmul": Formula(
        "2 * k * elems(out), k = in0[0] if transpose_a else in0[1]",
        ("in0_n", "out_n"),
        2 * pl.when(pl.col("transpose_a")).then(_dim("in0_dims", 0)).otherwise(_dim("in0_dims", 1)) * _OUT,
    ),
    "batch_matmul": Formula(
        "2 * k * elems(out), k = in0[-2] if adj_x else in0[-1]",
        ("in0_n", "out_n"),
        2 * pl.when(pl.col("adj_x")).then(_dim("in0_dims", -2)).otherwise(_dim("in0_dims", -1)) * _OUT,
    ),
    "conv2d": Formula(
        "2 * elems(out) * in1[0] * in1[1] * in1[2]",
        ("in0_n", "in1_n", "out_n"),
        2 * _OUT * _dim("in1_dims", 0) * _dim("in1_dims", 1) * _dim("in1_dims", 2),
    ),
    "conv3d": Formula(
        "2 * elems(out) * in1[0] * in1[1] * in1[2] * in1[3]",
        ("in0_n", "in1_n", "out_n"),
        2 * _OUT * _dim("in1_dims", 0) * _dim("in1_dims", 1) * _dim("in1_dims", 2) * _dim("in1_dims", 3),
    ),
    "depthwise_conv2d": Formula(
        "2 * elems(out) * in1[0] * in1[1]",
        ("in0_n", "in1_n", "out_n"),
        2 * _OUT * _dim("in1_dims", 0) * _dim("in1_dims", 1),
    ),
    "dilation2d": Formula(
        "2 * elems(out) * in1[0] * in1[1]",
        ("in0_n", "in1_n", "out_n"),
        2 * _OUT * _dim("in1_dims", 0) * _dim("in1_dims", 1),
    ),
}

# ``OP_FORMULAS`` (op type -> rule) and ``MAC_FORMULAS`` live in tfprof.schema.flops_rules, where
# the ingest reads them too (``node_flops``); tests/test_flops.py checks them against this table.


def formula_table() -> pl.DataFrame:
    """The rules as data: one row per op type (op, formula, expression, requires, nhwc_only).

    >>> formula_table().filter(pl.col("op") == "MatMul")["expression"].item()
    '2 * k * elems(out), k = in0[0] if transpose_a else in0[1]'
    """
    rows = [
        (op, name, FORMULAS[name].expression, list(FORMULAS[name].requires), FORMULAS[name].nhwc_only)
        for op, name in OP_FORMULAS.items()
    ]
    return pl.DataFrame(rows, schema=["op", "formula", "expression", "requires", "nhwc_only"], orient="row")


# ----------------------------------------------------------------------------- attrs


def _packed_ints(values: pl.Series) -> pl.Series:
    """Decode AttrValues holding ``list { i: ... }`` (strides, ksize) without a per-row loop.

    Such an AttrValue is ``0a L 1a M v1 v2 ...``: read as a stream of varints it is
    ``[10, L, 26, M, v1, v2, ...]``, so every value's bytes are decoded at once with numpy and
    the ints are the varints from the fifth on. Rows of another layout (an empty or unpacked
    list) give null.
    """
    n = len(values)
    if n == 0:
        return pl.Series(values.name, [], pl.List(pl.Int64))
    arr = values.to_arrow()
    arr = (arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr).cast(pa.large_binary())
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + n + 1]
    data = np.frombuffer(arr.buffers()[2], np.uint8)[offsets[0] : offsets[-1]].astype(np.int64)
    ends = (data & 0x80) == 0
    starts = np.flatnonzero(np.r_[True, ends[:-1]])
    pos = np.arange(len(data)) - np.repeat(starts, np.diff(np.r_[starts, len(data)]))
    ints = np.add.reduceat((data & 0x7F) << (7 * pos), starts) if len(data) else np.zeros(0, np.int64)
    row = np.searchsorted(offsets - offsets[0], starts, side="right") - 1
    stream = pl.DataFrame({"row": row, "v": ints}).with_columns(pl.int_range(pl.len()).over("row").alias("k"))
    header = stream.filter(pl.col("k") < 4).group_by("row").agg(pl.col("v").sort_by("k").alias("h"))
    good = header.filter(
        (pl.col("h").list.len() == 4) & (pl.col("h").list.get(0) == 10) & (pl.col("h").list.get(2) == 26)
    ).select("row")
    lists = stream.filter(pl.col("k") >= 4).join(good, on="row").group_by("row").agg(pl.col("v").sort_by("k"))
    out = pl.DataFrame({"row": np.arange(n)}).join(lists, on="row", how="left").sort("row")
    return out["v"].alias(values.name)


def _node_attrs(prof: Profile, node_ids: pl.LazyFrame) -> pl.DataFrame:
    """Per node of ``node_ids``: transpose_a, adj_x, nchw, strides, ksize."""
    attrs = (
        prof.lazy("node_attrs")
        .join(node_ids, on="node_id", how="semi")
        .with_columns(pl.col("attr").cast(pl.String))
        .filter(pl.col("attr").is_in((*_LIST_ATTRS, *_BOOL_ATTRS, "data_format")))
        .collect()
    )
    lists = attrs.filter(pl.col("attr").is_in(_LIST_ATTRS))
    lists = lists.with_columns(_packed_ints(lists["value"]).alias("ints"))
    flags = attrs.group_by("node_id").agg(
        *(((pl.col("attr") == a) & (pl.col("value") == _TRUE)).any().alias(a) for a in _BOOL_ATTRS),
        ((pl.col("attr") == "data_format") & pl.col("value").is_in(_CHANNELS_FIRST)).any().alias("nchw"),
    )
    per_list = [
        lists.filter(pl.col("attr") == a).select("node_id", pl.col("ints").alias(a)) for a in _LIST_ATTRS
    ]
    out = flags
    for frame in per_list:
        out = out.join(frame, on="node_id", how="left")
    return out


# ----------------------------------------------------------------------------- the query


def _shape_frame(prof: Profile) -> pl.DataFrame:
    """Nodes whose op has a rule, with the shape columns the rules read."""
    nodes = (
        prof.lazy("nodes")
        .select("node_id", "name", pl.col("op").cast(pl.String))
        .join(pl.LazyFrame({"op": list(OP_FORMULAS), "formula": list(OP_FORMULAS.values())}), on="op")
    )
    shapes = prof.lazy("output_shapes")
    out = shapes.filter(pl.col("slot") == 0).select("node_id", pl.col("dims").alias("out_dims"))
    inputs = prof.lazy("node_inputs").join(nodes.select("node_id"), on="node_id", how="semi")
    producer = shapes.select(pl.col("node_id").alias("input_id"), pl.col("slot").alias("output_slot"), "dims")
    fed = inputs.filter(pl.col("input_idx") < 2).join(producer, on=["input_id", "output_slot"], how="left")
    per_input = fed.group_by("node_id").agg(
        *(pl.col("dims").filter(pl.col("input_idx") == i).first().alias(f"in{i}_dims") for i in (0, 1))
    )
    counts = inputs.group_by("node_id").agg(pl.len().cast(pl.Int64).alias("n_inputs"))
    frame = (
        nodes.join(out, on="node_id", how="left")
        .join(per_input, on="node_id", how="left")
        .join(counts, on="node_id", how="left")
        .with_columns(pl.col("n_inputs").fill_null(0))
        .collect()
    )
    attrs = _node_attrs(prof, frame.lazy().select("node_id"))
    return frame.join(attrs, on="node_id", how="left").with_columns(pl.col(*_BOOL_ATTRS, "nchw").fill_null(False))


def flops_from_shapes(prof: Profile) -> pl.DataFrame:
    """Per node whose op type has a rule: the FLOPs TensorFlow's registry computes from shapes.

    Columns: ``node_id``, ``name``, ``op``, ``formula`` (a key of ``FORMULAS``), ``float_ops``
    (null when a shape the rule needs is not fully defined: TensorFlow's "incomplete shape"),
    ``macs`` (float_ops / 2 for multiply-accumulate rules, else null) and ``diverges`` (true where
    we count what TensorFlow does not: NCHW pooling/conv backprop, BatchMatMul with adj_x).
    Sorted by node_id.

    >>> import tfprof
    >>> f = flops_from_shapes(tfprof.load(tfprof.sample_path()))
    >>> int(f.filter(pl.col("op") == "Conv2D")["float_ops"].sum())
    2097152
    """
    return apply_formulas(_shape_frame(prof))


def apply_formulas(frame: pl.DataFrame) -> pl.DataFrame:
    """The rules applied to one row per node: ``node_id``, ``name``, ``op``, ``formula``, the
    shapes ``out_dims``/``in0_dims``/``in1_dims`` (tfprof's shape lists: -1 an unknown dim, []
    an unknown rank, [1] a scalar), ``n_inputs``, ``transpose_a``, ``adj_x``, ``nchw``,
    ``strides`` and ``ksize``. ``flops_from_shapes`` builds that frame from a profile's tables;
    the capture API builds it from a live ``tf.Graph``, whose inputs name their real slots.
    """
    frame = frame.with_columns(_elems(f"{s}_dims").alias(f"{s}_n") for s in ("out", "in0", "in1"))
    flops = pl.lit(None, pl.Int64)
    macs = pl.lit(None, pl.Int64)
    for name, f in FORMULAS.items():
        known = pl.all_horizontal(pl.col(c).is_not_null() for c in f.requires)
        value = pl.when(known).then(f.flops.cast(pl.Int64))
        flops = pl.when(pl.col("formula") == name).then(value).otherwise(flops)
        if name in MAC_FORMULAS:
            macs = pl.when(pl.col("formula") == name).then(value // 2).otherwise(macs)
    nhwc_only = [n for n, f in FORMULAS.items() if f.nhwc_only]
    diverges = (pl.col("formula").is_in(nhwc_only) & pl.col("nchw")) | (
        (pl.col("formula") == "batch_matmul") & pl.col("adj_x")
    )
    return frame.select(
        "node_id", "name", "op", "formula",
        flops.alias("float_ops"), macs.alias("macs"), diverges.alias("diverges"),
    ).sort("node_id")


def ops_without_formula(prof: Profile) -> pl.DataFrame:
    """Op types of the profile's graph nodes that no rule covers (they get no FLOPs), with
    how many nodes each has, most frequent first."""
    has_shape = prof.lazy("output_shapes").select("node_id").unique()
    return (
        prof.lazy("nodes")
        # RunMetadata-only nodes (op = own name, no shapes) are not graph ops: leave them out.
        .join(has_shape, on="node_id", how="semi")
        .select(pl.col("op").cast(pl.String))
        .filter(~pl.col("op").is_in(list(OP_FORMULAS)))
        .group_by("op")
        .agg(pl.len().alias("nodes"))
        .sort(["nodes", "op"], descending=[True, False])
        .collect()
    )


def macs_gaps(prof: Profile) -> tuple[bool, list[str]]:
    """What a view with ``macs`` selected says above its report: whether ``node_flops`` is empty
    although some node's op type has a rule (a store written before the table existed), and the
    op types of nodes without a ``node_flops`` row (no rule: 0 MACs), most nodes first. Of a
    tfprof profile only graph nodes count (RunMetadata-only ones have no shapes, as in
    ``ops_without_formula``); a foreign trace's nodes are all ops."""
    ops = prof.lazy("nodes").select("node_id", pl.col("op").cast(pl.String))
    if prof.source not in FOREIGN_NO_SOURCE:
        ops = ops.join(prof.lazy("output_shapes").select("node_id").unique(), on="node_id", how="semi")
    if prof.row_counts()["node_flops"] == 0:
        stale = ops.filter(pl.col("op").is_in(list(OP_FORMULAS))).head(1).collect().height > 0
        if stale:
            return True, []
    missing = (
        ops.join(prof.lazy("node_flops").select("node_id"), on="node_id", how="anti")
        .group_by("op").agg(pl.len().alias("nodes"))
        .sort(["nodes", "op"], descending=[True, False])
        .collect()
    )
    return False, missing["op"].to_list()


def with_flops_from_shapes(prof: Profile) -> Profile:
    """``prof`` with ``nodes.float_ops`` filled from shapes where it is 0: the numbers
    ``tf.compat.v1.profiler.profile(graph=...)`` shows, which builds its op log this way.

    The merge is the Python API's (tfprof_logger.merge_default_with_oplog,
    docs/TFPROF_BEHAVIOUR.md, 'Op log builder'): a
    non-zero op-log value wins, a shape rule fills the rest, and incomplete shapes stay 0.
    The real tfprof CLI never does this, so the views only see these numbers on request.
    ``node_flops`` follows the new float_ops, ``estimated`` where a shape rule filled one in.
    """
    computed = flops_from_shapes(prof).select("node_id", pl.col("float_ops").alias("_shape_flops"))
    nodes = (
        pl.from_arrow(prof.table("nodes"))
        .join(computed, on="node_id", how="left", maintain_order="left")
        .with_columns(
            pl.when(pl.col("float_ops") != 0)
            .then(pl.col("float_ops"))
            .otherwise(pl.col("_shape_flops").fill_null(0))
            .alias("float_ops"),
            # ours, not the op log's: estimated (node_flops.estimated)
            ((pl.col("float_ops") == 0) & (pl.col("_shape_flops").fill_null(0) != 0)).alias("_estimated"),
        )
        .drop("_shape_flops")
    )
    table = nodes.drop("_estimated").to_arrow().cast(prof.table("nodes").schema)
    node_flops = pl.from_arrow(node_flops_table(table)).drop("estimated").join(
        nodes.select("node_id", pl.col("_estimated").alias("estimated")), on="node_id", maintain_order="left"
    )
    tables = {**prof.tables(), "nodes": table,
              "node_flops": node_flops.to_arrow().cast(prof.table("node_flops").schema)}
    return Profile(tables, source=prof.source)

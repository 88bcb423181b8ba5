"""FLOPs from shapes (tfprof.queries.flops) against the float_ops TensorFlow's registry wrote.

Every fixture's op log was written by TensorFlow's op-log builder, so each node's
``nodes.float_ops`` is TensorFlow's own number; ``flops_from_shapes`` must give the same per
node, from a GraphDef and from a ProfileProto. ``tests/fixtures/flops`` (tools/make_flops_fixture.py)
covers every op type TensorFlow registers a rule for, and its registry dump pins the list.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import tfprof
from tfprof.api import run_view
from tfprof.queries.flops import (
    FORMULAS,
    OP_FORMULAS,
    flops_from_shapes,
    formula_table,
    ops_without_formula,
    with_flops_from_shapes,
)
from tfprof.schema.flops_rules import MAC_FORMULAS

FIXTURES = Path(__file__).parent / "fixtures"
GOLDEN = Path(__file__).parent / "golden"
FLOPS = FIXTURES / "flops"
WITH_OP_LOG = ("cnn", "rnn", "multistep", "flops")


def _load(fixture: str, source: str) -> tfprof.Profile:
    d = FIXTURES / fixture
    if source == "profile":
        return tfprof.load(d / "profile.pb")
    return tfprof.load(graph_path=d / "graph.pb", op_log_path=d / "op_log.pb")


def _compared(prof: tfprof.Profile) -> pl.DataFrame:
    """Per graph node: TensorFlow's float_ops (op log) beside ours (0 where no rule or no shape)."""
    ours = flops_from_shapes(prof).select("node_id", "formula", pl.col("float_ops").alias("ours"), "diverges")
    return (
        prof.frame("nodes")
        .select("node_id", "name", pl.col("op").cast(pl.String), pl.col("float_ops").alias("tf"))
        .join(ours, on="node_id", how="left")
        .with_columns(pl.col("ours").fill_null(0), pl.col("diverges").fill_null(False))
    )


@pytest.mark.parametrize("source", ["graph", "profile"])
@pytest.mark.parametrize("fixture", WITH_OP_LOG)
def test_per_node_equal_to_tensorflow(fixture, source):
    cmp = _compared(_load(fixture, source))
    assert cmp.filter(pl.col("tf") != 0).height > 0, "the fixture's op log has no float_ops"
    bad = cmp.filter(~pl.col("diverges") & (pl.col("tf") != pl.col("ours")))
    assert bad.height == 0, f"{bad.height} nodes differ from TensorFlow:\n{bad}"


def test_divergences_are_only_the_decided_ones():
    """Where we diverge (docs/COMPATIBILITY.md row 9), TensorFlow's number is 0 (NCHW) or uses the
    wrong k (adj_x), and ours equals TensorFlow's for the same geometry written the way it counts."""
    cmp = _compared(_load("flops", "graph"))
    div = cmp.filter(pl.col("diverges"))
    pairs = json.loads((FLOPS / "pairs.json").read_text())
    assert sorted(div["name"]) == sorted(p["ours"] for p in pairs)
    assert (div["tf"] != div["ours"]).all()
    by_name = dict(zip(cmp["name"], cmp["ours"]))
    tf_by_name = dict(zip(cmp["name"], cmp["tf"]))
    for p in pairs:
        assert tf_by_name[p["reference"]] > 0
        assert by_name[p["ours"]] == tf_by_name[p["reference"]], p


def test_every_registered_op_type_has_a_formula_and_is_covered():
    registry = json.loads((FLOPS / "registry.json").read_text())
    assert sorted(OP_FORMULAS) == registry["flops_ops"]
    assert set(OP_FORMULAS.values()) == set(FORMULAS)
    ops = set(_load("flops", "graph").frame("nodes")["op"].cast(pl.String))
    assert set(OP_FORMULAS) <= ops, set(OP_FORMULAS) - ops


def test_incomplete_shapes_counted_like_tensorflow():
    """TensorFlow counts a ValueError (incomplete shape, or a non-NHWC format) per op; ours is
    null for the first and counted (diverges) for the second."""
    registry = json.loads((FLOPS / "registry.json").read_text())
    f = flops_from_shapes(_load("flops", "graph"))
    nulls = f.filter(pl.col("float_ops").is_null())
    nchw = f.filter(pl.col("diverges") & (pl.col("formula") != "batch_matmul"))
    assert nulls.height + nchw.height == registry["ops_missing_shape"]
    assert sorted(nulls["name"]) == ["unknown/MatMul", "unknown/Mean", "unknown/Neg"]


def test_quirks_reproduced():
    f = flops_from_shapes(_load("flops", "graph"))
    by_name = dict(zip(f["name"], f["float_ops"]))
    assert by_name["unary/L2LossEmpty"] == -1  # 3·0 − 1, logged because it is non-zero
    assert by_name["addn/AddN_control"] == by_name["addn/AddN"] * 3 // 2  # the ^input counts
    assert by_name["conv/Conv2DBackpropInput"] == 2 * 25 * 27 // 4  # int() of 337.5


def test_macs_are_half_of_multiply_accumulate_rules():
    f = flops_from_shapes(_load("flops", "graph")).filter(pl.col("float_ops").is_not_null())
    assert MAC_FORMULAS <= set(FORMULAS)
    mac_rules = sorted(MAC_FORMULAS)
    macs = f.filter(pl.col("formula").is_in(mac_rules))
    assert macs.height > 0 and (macs["macs"] == macs["float_ops"] // 2).all()
    assert f.filter(~pl.col("formula").is_in(mac_rules))["macs"].is_null().all()


def test_formula_table_is_one_row_per_op_type():
    t = formula_table()
    assert t.height == len(OP_FORMULAS) and t["op"].n_unique() == t.height
    assert t.filter(pl.col("op") == "Conv2DBackpropInput")["nhwc_only"].item()


def test_ops_without_formula_lists_the_rest():
    prof = _load("cnn", "graph")
    missing = ops_without_formula(prof)
    ops = set(missing["op"])
    assert {"Const", "Relu", "FusedBatchNormV3"} <= ops
    assert not ops & set(OP_FORMULAS)
    # RunMetadata-only nodes (op = own name) are not graph ops
    assert not any(o.startswith("_retval") for o in ops)
    with_rule = flops_from_shapes(prof).height
    assert missing["nodes"].sum() + with_rule == prof.frame("output_shapes")["node_id"].n_unique()


def test_no_shapes_no_flops():
    """gpu_tiny's hand-written graph has no _output_shapes: the MatMul rule has nothing to read."""
    f = flops_from_shapes(tfprof.load(FIXTURES / "gpu_tiny" / "profile.pb"))
    assert f["op"].to_list() == ["MatMul"] and f["float_ops"].is_null().all()


def test_default_views_keep_the_real_tools_zeros():
    """A graph without an op log: the real tool shows 0 flops (docs/TFPROF_BEHAVIOUR.md, 'Missing data'); so do the views,
    unless with_flops_from_shapes is asked for."""
    prof = tfprof.load(graph_path=FIXTURES / "cnn" / "graph.pb")
    assert prof.frame("nodes")["float_ops"].sum() == 0
    text = run_view(prof, "scope", {"select": ["float_ops"], "max_depth": 1}).text
    assert "_TFProfRoot (--/0 flops)" in text
    filled = with_flops_from_shapes(prof)
    assert filled.frame("nodes")["float_ops"].sum() == _load("cnn", "graph").frame("nodes")["float_ops"].sum()


def test_op_log_value_wins_in_the_merge():
    prof = _load("flops", "graph")
    merged = with_flops_from_shapes(prof).frame("nodes").select("name", "float_ops")
    got = dict(zip(merged["name"], merged["float_ops"]))
    assert got["matmul/BatchMatMulV2_adj_x"] == 144  # TensorFlow's non-zero op-log value stays
    assert got["nchw/AvgPool"] == 288  # 0 in the op log: the shape rule fills it


def _golden_cases():
    cases = json.loads((GOLDEN / "cnn" / "cases.json").read_text())
    for c in cases:
        o = c["options"]
        if (
            c["cmd"] in ("scope", "graph", "op")
            and "float_ops" in o["select"]
            and "op_types" not in o["select"]
            and o["account_type_regexes"] == [".*"]
        ):
            yield pytest.param(c, id=c["id"])


@pytest.mark.parametrize("case", list(_golden_cases()))
def test_views_fed_from_shapes_match_the_real_tool_with_op_log(case):
    """cnn without its op log, FLOPs filled from shapes: the float_ops goldens (made with the
    op log) come out line for line."""
    d = FIXTURES / "cnn"
    runs = sorted(d.glob("run_meta_*.pb"))
    prof = with_flops_from_shapes(tfprof.load(graph_path=d / "graph.pb", run_meta_path=[str(p) for p in runs]))
    text = run_view(prof, case["cmd"], case["options"]).text
    want = (GOLDEN / "cnn" / f"{case['id']}.txt").read_text()
    assert text[text.find("node name |"):] == want[want.find("node name |"):]

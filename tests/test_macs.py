"""MACs surfaced (docs/COMPATIBILITY.md row 24): ``node_flops`` per node, the ``macs`` select field and order key in
every view, the header line naming op types without a rule, stores written before the table,
and a PyTorch trace's estimated MACs.

MACs are held against a hand computation from the shapes the fixture's graph recorded (m·k·n for
a matrix product, elems(out)·kh·kw·cin for a convolution); everything else against the tables.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from math import prod
from pathlib import Path

import polars as pl
import pytest
from test_foreign_flops import ADAPTIVE, BINARY, POOLS, REDUCTIONS, RSQRT, TORCH, UNARY, hand_and_ours

import tfprof
from tfprof.api import run_view
from tfprof.queries.flops import with_flops_from_shapes
from tfprof.queries.options import Options
from tfprof.queries.reference import run
from tfprof.queries.scope import scope
from tfprof.queries.spec import BUILTIN, tree_spec
from tfprof.schema.flops_rules import MAC_FORMULAS

FIXTURES = Path(__file__).parent / "fixtures"
FLOPS = FIXTURES / "flops"
CNN = FIXTURES / "cnn"


def _flops_profile() -> tfprof.Profile:
    return tfprof.load(graph_path=FLOPS / "graph.pb", op_log_path=FLOPS / "op_log.pb")


def _shapes(prof: tfprof.Profile) -> dict[str, list[list[int]]]:
    """Per node name, the shapes of its first two inputs and its output, from the raw tables."""
    names = dict(zip(prof.frame("nodes")["node_id"], prof.frame("nodes")["name"]))
    out = {names[i]: d for i, s, d in prof.frame("output_shapes").iter_rows() if s == 0}
    inputs: dict[str, list] = {}
    for row in prof.frame("node_inputs").sort("node_id", "input_idx").iter_rows(named=True):
        inputs.setdefault(names[row["node_id"]], []).append(out.get(row["input_name"]))
    return {n: [*(inputs.get(n) or [])[:2], out.get(n)] for n in names.values()}


def hand_macs(op: str, a: list[int], b: list[int], o: list[int]) -> int:
    """Multiply-adds by hand: a [m, k] @ [k, n] product does m·n·k; a convolution k_h·k_w·c_in per output."""
    if op == "MatMul":
        return prod(o) * a[1]  # untransposed: k is the second dim of the first input
    return prod(o) * b[0] * b[1] * b[2]  # Conv2D, HWIO filter


def test_macs_per_node_equal_a_hand_computation_from_shapes():
    prof = _flops_profile()
    shapes = _shapes(prof)
    rows = (
        prof.frame("nodes").join(prof.frame("node_flops"), on="node_id")
        .filter(pl.col("op").cast(pl.String).is_in(["MatMul", "Conv2D"]) & (pl.col("float_ops") > 0))
    )
    attrs = prof.frame("node_attrs").filter(pl.col("attr").cast(pl.String) == "transpose_a")
    transposed = set(attrs.filter(pl.col("value") == b"\x28\x01")["node_id"])
    nchw = set(prof.frame("node_attrs").filter(pl.col("value") == b"\x12\x04NCHW")["node_id"])
    checked = 0
    for node_id, name, op, macs, formula, estimated in rows.select(
        "node_id", "name", pl.col("op").cast(pl.String), "macs", pl.col("flops_formula").cast(pl.String), "estimated"
    ).iter_rows():
        assert formula == {"MatMul": "matmul", "Conv2D": "conv2d"}[op] and not estimated
        if node_id in transposed or node_id in nchw:
            continue
        a, b, o = shapes[name]
        assert macs == hand_macs(op, a, b, o), name
        checked += 1
    assert checked >= 2
    ops = set(rows["op"].cast(pl.String))
    assert ops == {"MatMul", "Conv2D"}


def test_macs_are_half_the_float_ops_of_mac_rules_and_zero_elsewhere():
    prof = _flops_profile()
    t = prof.frame("nodes").join(prof.frame("node_flops"), on="node_id")
    mac = pl.col("flops_formula").cast(pl.String).is_in(sorted(MAC_FORMULAS))
    assert (t.filter(mac)["macs"] == t.filter(mac)["float_ops"].clip(0) // 2).all()
    assert (t.filter(~mac)["macs"] == 0).all() and t.filter(mac).height > 5
    # no row for an op type without a rule
    assert prof.frame("node_flops").height == t.height < prof.row_counts()["nodes"]


def test_order_by_macs_sorts_siblings_by_total_macs():
    prof = tfprof.load(CNN / "profile.pb")
    frame = scope(prof, Options(max_depth=4, select=("macs",), order_by="macs"))
    assert frame["total_macs"][0] > 0
    top = frame.filter(pl.col("level") == 1)["total_macs"].to_list()
    assert top == sorted(top, reverse=True) and top[0] > top[-1]


def test_select_macs_text_and_json():
    prof = tfprof.load(CNN / "profile.pb")
    res = run_view(prof, "scope", {"max_depth": 1, "select": ["macs", "float_ops"]})
    root = res.frame.row(0, named=True)
    assert "node name | # float_ops | # MACs" in res.text
    assert f"--/{_fmt(root['total_macs'])} MACs" in res.text.splitlines()[res.text.splitlines().index(
        "node name | # float_ops | # MACs") + 1]
    assert root["total_macs"] == prof.frame("node_flops")["macs"].sum() > 0
    proc = subprocess.run([sys.executable, "-m", "tfprof", "scope", "--profile_path", str(CNN / "profile.pb"),
                           "--max_depth", "1", "--select", "macs", "--format", "json"],
                          check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    rows = doc["rows"] if isinstance(doc, dict) else doc
    assert rows[0]["total_macs"] == root["total_macs"] and "float_ops" not in rows[0]


def _fmt(n: int) -> str:
    from tfprof.views.units import FORMATS

    return FORMATS["number"](n)


@pytest.mark.parametrize("cmd", ["scope", "op", "code", "graph"])
def test_without_macs_nothing_changes_and_with_it_the_header_names_op_types_without_a_rule(cmd):
    prof = tfprof.load(CNN / "profile.pb")
    plain = run_view(prof, cmd, {"max_depth": 3, "select": ["float_ops"]}).text
    assert "MACs" not in plain and "macs" not in plain
    text = run_view(prof, cmd, {"max_depth": 3, "select": ["macs"]}).text
    line = next(x for x in text.splitlines() if x.startswith("No FLOPs rule (0 MACs) for op types: "))
    from tfprof.queries.flops import ops_without_formula

    missing = ops_without_formula(prof)["op"].to_list()
    assert len(missing) > 8
    assert line.endswith(f"{', '.join(missing[:8])} and {len(missing) - 8} more.")
    assert text.index(line) < text.index("Profile:")


def test_protos_leave_macs_out():
    prof = tfprof.load(CNN / "profile.pb")
    proto = run_view(prof, "scope", {"max_depth": 2, "select": ["macs"]}).proto
    assert not any("macs" in f.name for f in proto.DESCRIPTOR.fields)
    assert proto.total_float_ops > 0


@pytest.mark.parametrize("cmd", ["scope", "graph", "op", "code"])
def test_reference_backend_equals_the_engine_with_macs(cmd):
    from test_reference_backend import assert_same

    prof = tfprof.load(CNN / "profile.pb")
    opts = Options(max_depth=6, select=("macs", "micros"), order_by="macs")
    assert assert_same(prof, cmd, opts, f"{cmd} macs") > 0
    spec = tree_spec(BUILTIN[cmd], opts)
    assert run(prof, spec).rows["total_macs"].max() > 0


def test_a_store_written_before_node_flops_opens_with_zero_macs_and_says_so(tmp_path):
    store = tfprof.save(tfprof.load(CNN / "profile.pb"), tmp_path / "new")
    old = tmp_path / "old"
    shutil.copytree(store, old)
    (old / "node_flops.parquet").unlink()
    manifest = json.loads((old / "tfprof_store.json").read_text())
    del manifest["tables"]["node_flops"]
    manifest["files"] = {k: v for k, v in manifest.get("files", {}).items()
                         if not k.startswith(("node_flops", "indexes"))}
    shutil.rmtree(old / "indexes", ignore_errors=True)
    manifest.pop("indexes", None)
    (old / "tfprof_store.json").write_text(json.dumps(manifest))
    prof = tfprof.load(old)
    assert prof.row_counts()["node_flops"] == 0
    res = run_view(prof, "scope", {"max_depth": 2, "select": ["macs", "float_ops"]})
    assert res.frame["total_macs"][0] == 0 and res.frame["total_float_ops"][0] > 0
    assert "No MACs in this store: it was written before tfprof counted them (shown as 0)" in res.text
    assert "No FLOPs rule" not in res.text
    new = run_view(tfprof.load(store), "scope", {"max_depth": 2, "select": ["macs"]})
    assert new.frame["total_macs"][0] > 0 and "No MACs in this store" not in new.text


def test_flops_from_shapes_fill_macs_marked_estimated():
    prof = tfprof.load(graph_path=FLOPS / "graph.pb")  # no op log: every float_ops is 0
    assert prof.frame("node_flops")["macs"].sum() == 0
    filled = with_flops_from_shapes(prof)
    t = filled.frame("node_flops")
    assert t["macs"].sum() > 0 and t.filter(pl.col("macs") > 0)["estimated"].all()
    logged = _flops_profile().frame("node_flops").select("node_id", pl.col("macs").alias("logged"))
    both = t.join(logged, on="node_id").filter(pl.col("macs") > 0)
    assert both.height > 5


@pytest.mark.parametrize("name", TORCH)
def test_torch_macs_are_half_the_hand_flops_of_matrix_products_and_convolutions(name):
    want, prof, first = hand_and_ours(name)
    rows = prof.frame("node_flops").join(prof.frame("nodes"), on="node_id").join(first, on="node_id")
    assert rows["estimated"].all()
    checked = 0
    for op, macs, start in zip(rows["op"].cast(str), rows["macs"], rows["start_ns"], strict=True):
        if "softmax" in op or op in BINARY | UNARY | RSQRT | POOLS | ADAPTIVE | REDUCTIONS:  # no multiply-adds
            assert macs == 0
        elif start in want:
            assert macs == want[start] // 2, op
            checked += macs > 0
    assert checked >= 2

"""FLOPs surfaced: `tfprof check` lists the op types no shape rule covers."""

from __future__ import annotations

import json

import polars as pl

import tfprof
from tfprof.cli.main import main
from tfprof.queries.flops import OP_FORMULAS


def test_check_lists_op_types_without_a_flops_rule(capsys):
    path = str(tfprof.sample_path())
    assert main(["check", path, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["ops_without_flops_rule"]
    # independently: graph nodes (those with static shapes) whose op has no rule, counted per op
    prof = tfprof.load(path)
    shaped = set(prof.frame("output_shapes")["node_id"].to_list())
    nodes = prof.frame("nodes").filter(pl.col("node_id").is_in(list(shaped)))
    want: dict[str, int] = {}
    for op in nodes["op"].cast(pl.String).to_list():
        if op not in OP_FORMULAS:
            want[op] = want.get(op, 0) + 1
    assert {m["op"]: m["nodes"] for m in listed} == want and want
    assert [m["nodes"] for m in listed] == sorted((m["nodes"] for m in listed), reverse=True)
    assert "Conv2D" not in want and "MatMul" not in want
    assert main(["check", path]) == 0
    out = capsys.readouterr().out
    assert f"op types with no FLOPs rule ({len(want):,} types, {sum(want.values()):,} nodes)" in out
    assert all(f"  {op}: {n:,} node" in out for op, n in want.items())

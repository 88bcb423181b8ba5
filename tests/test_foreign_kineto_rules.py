"""Kineto reading rules: a `/` inside a name is no scope level, FLOPs are counted per execution, every
`[memory]` instant is charged (to its op, else to its step), and values the trace cannot hold
(`Bytes` beyond int64, NaN counters) are errors or findings, never silently dropped. Expected values
come from the raw files (tests/foreign_expect.py, tests/foreign_expect_gpu.py) or from the tiny traces
written here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from foreign_expect import kineto_expect, load_trace_events
from foreign_expect_gpu import kineto_allocator_memory, kineto_memory_outside_ops
from test_foreign_flops import outermost_ruled

import tfprof
from tfprof.api import run_view
from tfprof.ingest.foreign.kineto import NAME_SLASH
from tfprof.ingest.foreign.memory import OUTSIDE_OPS

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
TORCH = ["torch_cnn.pt.trace.json", "torch_transformer.pt.trace.json.gz"]
WITH_MEMORY = [*TORCH, "kineto_resnet50_step6.pt.trace.json.gz"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfprof", *args], capture_output=True, text=True, timeout=300)


def trace(tmp_path: Path, events: list[dict], name: str = "t.pt.trace.json") -> Path:
    """A Kineto trace file of ``events`` (one step marker over them all is added)."""
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000}
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": [step, *events]}))
    return path


def op(name: str, ts: float, dur: float, cat: str = "cpu_op", **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


# ---------------------------------------------------------------- a name is a name


def test_a_slash_inside_a_name_is_no_scope_level(tmp_path):
    events = [op("Torch-Compiled Region: 0/0", 1, 50), op("aten::mm", 2, 10),
              op("fwd/bwd", 60, 30, cat="user_annotation"), op("aten::add", 61, 5),
              {**op("nn.Module: Block/Inner_0", 100, 40, cat="python_function")}, op("aten::relu", 101, 5)]
    prof = tfprof.load(trace(tmp_path, events))
    chains = [["Torch-Compiled Region: 0/0"], ["Torch-Compiled Region: 0/0", "aten::mm"], ["fwd/bwd", "aten::add"],
              ["Block/Inner_0", "aten::relu"]]
    want = {"/".join(part.replace("/", NAME_SLASH) for part in chain) for chain in chains}
    assert set(prof.frame("nodes")["name"].to_list()) == want
    # the op type and the trace event keep the name as recorded
    assert "Torch-Compiled Region: 0/0" in prof.frame("nodes")["op"].cast(str).to_list()
    assert "Torch-Compiled Region: 0/0" in prof.frame("trace_events")["name"].cast(str).to_list()
    scope = run_view(prof, "scope", {"max_depth": 10}).frame
    depth = dict(zip(scope["name"], scope["depth"]))
    region = "Torch-Compiled Region: 0" + NAME_SLASH + "0"
    root = depth["_TFProfRoot"]
    assert depth[region] == root + 1 and depth[region + "/aten::mm"] == root + 2
    assert not any(n.endswith("/0") or n == "Torch-Compiled Region: 0" for n in depth)


# ---------------------------------------------------------------- FLOPs per execution


@pytest.mark.parametrize("name", TORCH)
def test_float_ops_per_step_add_up_every_execution(name):
    _, events = load_trace_events(FOREIGN / name)
    top, _ = load_trace_events(FOREIGN / name)
    base = int(top.get("baseTimeNanoseconds") or 0)
    hand = outermost_ruled(events)  # event start (ns, without the base) -> its float ops
    prof = tfprof.load(FOREIGN / name)
    execs = pl.from_arrow(prof.table("trace_events")).filter(
        pl.col("node_id").is_not_null() & (pl.col("phase").cast(str) == "X")).select(
        "node_id", "step", (pl.col("start_ns") - base).alias("start"))
    want: dict[tuple[int, int], int] = defaultdict(int)
    for node, step, start in execs.iter_rows():
        want[(node, step)] += hand.get(start, 0) or 0
    got = {(n, s): f for n, s, f in prof.frame("node_steps").select("node_id", "step", "float_ops").iter_rows()}
    assert got == {k: want.get(k, 0) for k in got}
    assert sum(got.values()) == sum(v or 0 for v in hand.values()) > 0
    # nodes.float_ops stays the first execution's count
    first = execs.sort("start").group_by("node_id").agg(pl.col("start").first())
    nodes = prof.frame("nodes").join(first, on="node_id")
    assert all(f == (hand.get(s, 0) or 0) for f, s in zip(nodes["float_ops"], nodes["start"]))


def test_repeated_executions_with_other_shapes_are_counted_each(tmp_path):
    """One path that runs with other shapes (a last short batch, a layer called twice): each
    execution counts its own shapes; first * runs would be wrong."""
    events = [op("aten::mm", 1, 10, **{"Input Dims": [[4, 8], [8, 16]]}),
              op("aten::mm", 20, 10, **{"Input Dims": [[2, 8], [8, 3]]})]
    prof = tfprof.load(trace(tmp_path, events))
    node = prof.frame("nodes").filter(pl.col("name") == "aten::mm")
    assert node["float_ops"].to_list() == [2 * 4 * 8 * 16]  # the first execution's, as tfprof keeps one count
    steps = prof.frame("node_steps").join(node.select("node_id"), on="node_id")
    assert steps["float_ops"].to_list() == [2 * 4 * 8 * 16 + 2 * 2 * 8 * 3]
    assert steps["run_count"].to_list() == [2]


def test_other_readers_have_no_per_execution_count():
    prof = tfprof.load(FOREIGN / "jax_mlp.xplane.pb")
    assert prof.frame("node_steps")["float_ops"].null_count() == prof.frame("node_steps").height
    own = tfprof.load(tfprof.sample_path())
    assert own.frame("node_steps")["float_ops"].null_count() == own.frame("node_steps").height


# ---------------------------------------------------------------- memory outside ops


@pytest.mark.parametrize("name", WITH_MEMORY)
def test_every_memory_instant_is_charged(name):
    k = kineto_expect(FOREIGN / name)
    outside = kineto_memory_outside_ops(FOREIGN / name)
    prof = tfprof.load(FOREIGN / name)
    allocations = prof.frame("allocations")
    assert allocations.height == k["memory_events"]
    assert allocations.filter(pl.col("alloc_bytes") > 0)["alloc_bytes"].sum() == k["memory_alloc_bytes"]
    assert -allocations.filter(pl.col("alloc_bytes") < 0)["alloc_bytes"].sum() == k["memory_free_bytes"]
    assert prof.frame("memory")["requested_bytes"].sum() == k["memory_alloc_bytes"]
    node = prof.frame("nodes").filter(pl.col("name") == OUTSIDE_OPS)["node_id"].to_list()
    mine = allocations.filter(pl.col("node_id").is_in(node))
    assert outside["count"] > 0 and mine.height == outside["count"]
    assert mine.filter(pl.col("alloc_bytes") > 0)["alloc_bytes"].sum() == outside["alloc_bytes"]
    assert -mine.filter(pl.col("alloc_bytes") < 0)["alloc_bytes"].sum() == outside["free_bytes"]
    # one record per step, in the steps the instants fall in
    records = prof.frame("memory").filter(pl.col("node_id").is_in(node))
    assert sorted(records["step"].to_list()) == sorted(mine["step"].unique().to_list())


def test_memory_is_worked_out_per_allocator():
    """An op's peak is the sum of its peaks on each allocator (tfprof's rule for a RunMetadata's
    allocators): the ResNet step's ops allocate on the CPU and on the GPU."""
    name = "kineto_resnet50_step6.pt.trace.json.gz"
    want = kineto_allocator_memory(FOREIGN / name)
    assert set(want) == {"cpu", "cuda:0"}
    prof = tfprof.load(FOREIGN / name)
    nodes = prof.frame("nodes").filter(pl.col("name") != OUTSIDE_OPS).select("node_id")
    per_allocator = prof.frame("allocator_memory").join(nodes, on="node_id")
    got = per_allocator.group_by("allocator").agg(pl.len(), pl.col("total_bytes").sum(), pl.col("peak_bytes").sum(),
                                                  pl.col("live_bytes").sum())
    assert {r[0]: tuple(r[1:]) for r in got.rows()} == want
    records = prof.frame("memory").join(nodes, on="node_id")
    assert records["peak_bytes"].sum() == sum(v[2] for v in want.values())
    assert records["residual_bytes"].sum() == sum(v[3] for v in want.values())
    assert per_allocator["allocator_bytes_in_use"].sum() == 0  # this PyTorch wrote no `Total Allocated`


def test_allocator_bytes_in_use_is_an_accelerator_allocators_total(tmp_path):
    path = tmp_path / "two.pt.trace.json"
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::to", "pid": 1, "tid": 1, "ts": 1, "dur": 10},
              memory_event(2, **{"Device Type": 0, "Device Id": -1, "Bytes": 64, "Total Allocated": 64}),
              memory_event(3, **{"Device Type": 1, "Device Id": 0, "Bytes": 512, "Total Allocated": 4096}),
              memory_event(4, **{"Device Type": 1, "Device Id": 0, "Bytes": -512, "Total Allocated": 3584}),
              memory_event(5, **{"Device Type": 1, "Device Id": 0, "Bytes": 256, "Total Allocated": 3840}),
              memory_event(6, **{"Device Type": 0, "Device Id": -1, "Bytes": 32, "Total Allocated": 96})]
    path.write_text(json.dumps({"traceEvents": events}))
    prof = tfprof.load(path)
    rows = prof.frame("allocator_memory").sort("allocator").select(
        "allocator", "total_bytes", "peak_bytes", "live_bytes", "allocator_bytes_in_use").rows()
    assert rows == [("cpu", 96, 96, 96, 96), ("cuda:0", 768, 512, 256, 3840)]
    memory = prof.frame("memory").row(0, named=True)
    assert (memory["requested_bytes"], memory["peak_bytes"], memory["residual_bytes"]) == (864, 608, 352)
    assert memory["allocator_bytes_in_use"] == 3840  # the GPU's total after the op's last instant there


def memory_event(ts: float, **args) -> dict:
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts, "args": args}


def test_bytes_beyond_int64_are_an_error(tmp_path):
    path = tmp_path / "big.pt.trace.json"
    path.write_text('{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":5},'
                    '{"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":2,'
                    '"args":{"Bytes":99999999999999999999}}]}')
    proc = cli("scope", "--profile_path", str(path))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr and str(path) in lines[0]
    assert "Bytes" in lines[0] and "1e+20" in lines[0]


def test_nan_counters_are_reported_and_bytes_beside_them_still_read(tmp_path):
    path = tmp_path / "nan.pt.trace.json"
    path.write_text('{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":5},'
                    '{"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":2,'
                    '"args":{"Bytes":4.0,"Total Allocated":NaN,"Total Reserved":8}},'
                    '{"ph":"C","name":"util","pid":1,"tid":1,"ts":3,"args":{"x":NaN,"y":1}}]}')
    prof = tfprof.load(path)
    assert prof.frame("allocations")["alloc_bytes"].to_list() == [4]
    found = prof.frame("validation").filter(pl.col("code").cast(str) == "non_finite_counter")
    assert found["count"].sum() == 2
    counters = prof.frame("counters")
    assert counters["value"].is_finite().all() and counters.height == 2  # Total Reserved 8, y 1

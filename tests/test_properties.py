"""Properties of accounting that hold for every profile, checked on profiles hypothesis makes.

Each example is a GraphDef (nodes named from a few scope words, so names nest, share prefixes
and collide with scopes) and one or more RunMetadata steps with random times and memory for a
random subset of the nodes (and now and then a node the graph does not have). The properties:

* a tree view's total is the row's own value plus its displayed children's totals, for every
  metric, when nothing is hidden, under each account mode (a row shown only as the ancestor of
  accounted rows prints `--` for its own value but counts it, as the real tool does);
* with ``account_displayed_op_only``, the same holds for whatever the filters leave displayed;
* without it, display filters (max_depth, min_micros, show/hide regexes) change which rows are
  shown, never the totals of the rows shown;
* the op view's total is a running sum of the rows from the bottom up;
* a profile written as a store and opened again has the same tables and prints the same views.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfprof
from tfprof.api import run_view
from tfprof.schema import TABLES
from tfprof.schema.proto import graph_pb2, run_metadata_pb2, step_stats_pb2

METRICS = (
    "exec_micros", "accelerator_exec_micros", "cpu_exec_micros", "requested_bytes", "peak_bytes",
    "residual_bytes", "output_bytes", "params", "float_ops", "run_count",
)
SETTINGS = settings(
    max_examples=25, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU = "/job:localhost/replica:0/task:0/device:GPU:0"
OPS = ("MatMul", "Conv2D", "Add", "VariableV2", "Const", "Relu")
WORDS = ("a", "b", "c", "dense", "conv")


@st.composite
def profiles(draw) -> dict:
    """A graph and its steps, as plain data (written to files by ``_load``)."""
    names = draw(st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map("/".join), min_size=1, max_size=25, unique=True,
    ))
    ops = [draw(st.sampled_from(OPS)) for _ in names]
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        ran = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
        if draw(st.booleans()):
            ran.append("only_in/run_meta")  # a node the graph does not have
        stats = []
        for name in ran:
            start = draw(st.integers(1, 10**6))
            dur = draw(st.integers(0, 5000))
            stats.append(dict(
                name=name, device=draw(st.sampled_from((CPU, GPU))), start=start, dur=dur,
                requested=draw(st.integers(0, 10**6)), peak=draw(st.integers(0, 10**6)),
            ))
        steps.append(stats)
    return dict(names=names, ops=ops, steps=steps)


def _load(spec: dict, folder: Path):
    graph = graph_pb2.GraphDef()
    for name, op in zip(spec["names"], spec["ops"]):
        node = graph.node.add(name=name, op=op, device=CPU)
        if op == "VariableV2":
            shape = node.attr["shape"].shape
            for d in (3, 4):
                shape.dim.add(size=d)
    (folder / "graph.pb").write_bytes(graph.SerializeToString())
    paths = []
    for i, stats in enumerate(spec["steps"]):
        rm = run_metadata_pb2.RunMetadata()
        by_device: dict[str, step_stats_pb2.DeviceStepStats] = {}
        for s in stats:
            dev = by_device.get(s["device"])
            if dev is None:
                dev = by_device[s["device"]] = rm.step_stats.dev_stats.add(device=s["device"])
            ns = dev.node_stats.add(
                node_name=s["name"], all_start_micros=s["start"], op_start_rel_micros=0,
                op_end_rel_micros=s["dur"], all_end_rel_micros=s["dur"],
            )
            mem = ns.memory.add(allocator_name="cpu")
            mem.total_bytes, mem.peak_bytes = s["requested"], s["peak"]
        path = folder / f"run_meta_{i}.pb"
        path.write_bytes(rm.SerializeToString())
        paths.append(str(path))
    return tfprof.load(graph_path=folder / "graph.pb", run_meta_path=",".join(paths))


def _children(depths: list[int]) -> list[list[int]]:
    """Each displayed row's displayed children, from the depths of rows in pre-order."""
    kids: list[list[int]] = [[] for _ in depths]
    stack: list[int] = []
    for i, d in enumerate(depths):
        while stack and depths[stack[-1]] >= d:
            stack.pop()
        if stack:
            kids[stack[-1]].append(i)
        stack.append(i)
    return kids


def _assert_totals_add_up(frame: pl.DataFrame, what: str) -> None:
    rows = frame.to_dicts()
    for i, kids in enumerate(_children(frame["depth"].to_list())):
        row = rows[i]
        for m in METRICS:
            # an unaccounted row shown as the ancestor of accounted ones prints `--` for its own
            # value, yet the real tool counts that value in its total (checked with tfprof)
            want = row[m] + sum(rows[k]["total_" + m] for k in kids)
            assert row["total_" + m] == want, (what, row["name"], m, row["total_" + m], want)


ALL = {"max_depth": 1000, "select": ["micros", "bytes", "peak_bytes", "residual_bytes", "output_bytes", "params",
                                    "float_ops", "occurrence"]}


@given(spec=profiles(), view=st.sampled_from(["scope", "code"]), step=st.sampled_from([-1, 0]),
       account=st.sampled_from([[".*"], ["MatMul|Conv2D"], ["VariableV2"]]))
@SETTINGS
def test_total_is_self_plus_children(spec, view, step, account):
    with tempfile.TemporaryDirectory() as tmp:
        prof = _load(spec, Path(tmp))
        if view == "code":  # graph-made profiles have no code traces; the scope tree stands in
            view = "scope"
        frame = tfprof.view(prof, view, **ALL, step=step, account_type_regexes=account)
        _assert_totals_add_up(frame, f"{view} step={step} account={account}")


FILTERS = st.sampled_from([
    {"max_depth": 2}, {"max_depth": 3}, {"min_micros": 100}, {"min_micros": 2500},
    {"show_name_regexes": [".*a.*"]}, {"hide_name_regexes": ["b.*"]}, {"show_name_regexes": ["dense.*|conv.*"]},
])


@given(spec=profiles(), filt=FILTERS, account=st.sampled_from([[".*"], ["MatMul|Add|Relu"]]))
@SETTINGS
def test_displayed_only_totals_add_up_under_filters(spec, filt, account):
    with tempfile.TemporaryDirectory() as tmp:
        prof = _load(spec, Path(tmp))
        frame = tfprof.view(prof, "scope", **{**ALL, **filt}, account_type_regexes=account, account_displayed_op_only=True)
        _assert_totals_add_up(frame, f"displayed only, {filt}")


@given(spec=profiles(), filt=FILTERS, view=st.sampled_from(["scope", "graph"]))
@SETTINGS
def test_filters_never_change_the_totals_of_displayed_nodes(spec, filt, view):
    with tempfile.TemporaryDirectory() as tmp:
        prof = _load(spec, Path(tmp))
        whole = tfprof.view(prof, view, **ALL)
        shown = tfprof.view(prof, view, **{**ALL, **filt})
        totals = ["name"] + [f"total_{m}" for m in METRICS]
        if view == "graph":  # a graph node may print under several consumers: compare by name only where unique
            whole = whole.filter(pl.col("name").is_unique())
        joined = shown.select(totals).join(whole.select(totals), on="name", how="inner", suffix="_all")
        assert joined.height == shown.filter(pl.col("name").is_in(whole["name"].implode())).height
        for m in METRICS:
            diff = joined.filter(pl.col(f"total_{m}") != pl.col(f"total_{m}_all"))
            assert diff.is_empty(), (filt, m, diff.head(3).to_dicts())


@given(spec=profiles(), order=st.sampled_from(["micros", "name", "bytes", "occurrence"]))
@SETTINGS
def test_op_view_totals_are_running_sums_from_the_bottom(spec, order):
    with tempfile.TemporaryDirectory() as tmp:
        prof = _load(spec, Path(tmp))
        frame = tfprof.view(prof, "op", max_depth=1000, order_by=order, select=ALL["select"])
        for m in ("exec_micros", "requested_bytes", "params", "float_ops"):
            own = frame[m].to_list()
            acc = frame["accounted"].to_list()
            running, want = 0, []
            for v, a in zip(reversed(own), reversed(acc)):
                running += v if a else 0
                want.append(running)
            assert frame[f"total_{m}"].to_list() == want[::-1], (order, m)


@given(spec=profiles())
@settings(SETTINGS, max_examples=10)
def test_store_round_trip_is_identical(spec):
    with tempfile.TemporaryDirectory() as tmp:
        prof = _load(spec, Path(tmp))
        tfprof.save(prof, Path(tmp) / "store")
        again = tfprof.load(Path(tmp) / "store")
        for name in TABLES:
            assert again.table(name).equals(prof.table(name)), name
        for view in ("scope", "graph", "op"):
            opts = {"max_depth": 100, "select": ["micros", "bytes", "params", "occurrence"]}
            assert run_view(again, view, opts).text == run_view(prof, view, opts).text, view


def test_children_of_depths():
    """The helper the properties rest on: pre-order depths to children."""
    assert _children([0, 1, 2, 2, 1, 0]) == [[1, 4], [2, 3], [], [], [], []]


@pytest.mark.parametrize("bad", [[0, 1, 1], [0, 1, 2, 1]])
def test_a_wrong_total_is_caught(bad):
    """The totals check fails on a frame whose totals do not add up (so it can fail)."""
    n = len(bad)
    cols = {"name": [f"n{i}" for i in range(n)], "depth": bad, "accounted": [True] * n}
    for m in METRICS:
        cols[m] = [1] * n
        cols["total_" + m] = [1] * n  # the root (and any parent) should have more
    with pytest.raises(AssertionError):
        _assert_totals_add_up(pl.DataFrame(cols), "broken")

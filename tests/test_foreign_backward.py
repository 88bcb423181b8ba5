"""PyTorch's backward ops are named after the forward op they differentiate, as TensorFlow names its
gradients (``gradients/<forward path>_grad/…``, docs/FOREIGN.md): held against the trace's own
``fwdbwd`` flows, or for PyTorch 1.8 (no flows) its sequence numbers, read by ``foreign_expect``
without tfprof's readers."""

from __future__ import annotations

import re
from collections import Counter

import polars as pl
import pytest
from foreign_expect import kineto_expect, kineto_gradients, load_trace_events
from test_foreign_ingest import FOREIGN, load

from tfprof import kernels
from tfprof.api import run_view
from tfprof.ingest import foreign

TRAINING = ["torch_cnn.pt.trace.json", "torch_transformer.pt.trace.json.gz", "kineto_ddp_nccl_step5.pt.trace.json.gz",
            "kineto_resnet50_step6.pt.trace.json.gz"]
EVALUATE = "autograd::engine::evaluate_function: "
ROOT = re.compile(r"^gradients/(.*)_grad/([^/]*)$")


def _root_executions(name: str) -> pl.DataFrame:
    """(name, runs) of the nodes that are backward roots, with their executions on the host."""
    prof = load(name)
    nodes = prof.frame("nodes").select("node_id", pl.col("name").cast(pl.String))
    runs = prof.frame("execs").filter(pl.col("kind") == "cpu").group_by("node_id").len("runs")
    return nodes.join(runs, on="node_id").filter(pl.col("name").str.contains(ROOT.pattern)).select("name", "runs")


@pytest.mark.parametrize("name", TRAINING)
def test_each_backward_op_sits_under_the_forward_op_its_trace_names(name):
    modules = set(kineto_expect(FOREIGN / name)["modules"])
    ours: Counter = Counter()
    for path, runs in _root_executions(name).iter_rows():
        forward, root = ROOT.match(path).groups()
        levels = forward.split("/")
        ours[tuple(level for level in levels if level in modules), levels[-1], root.removeprefix(EVALUATE)] += runs
    expected = kineto_gradients(FOREIGN / name)
    assert sum(expected.values()) >= 28
    assert ours == expected


@pytest.mark.parametrize("name", TRAINING)
def test_backward_time_is_moved_whole(name):
    """Only names move: the time under ``gradients/`` is the backward roots' spans, to the ns, and no
    backward op with a sequence number is left at the top."""
    _, events = load_trace_events(FOREIGN / name)
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator")]
    roots = {(e["tid"], e["ts"]): e for e in ops if "Sequence number" in (e.get("args") or {})
             and (e["name"].startswith(EVALUATE) or re.search(r"Backward\d*$", e["name"]))}
    roots = [e for e in roots.values() if not any(o is not e and o["tid"] == e["tid"] and o["ts"] <= e["ts"]
                                                  and e["ts"] + e["dur"] <= o["ts"] + o["dur"] for o in roots.values())]
    expected_ns = sum(round(e["dur"] * 1000) for e in roots)
    prof = load(name)
    execs = prof.frame("execs").filter(pl.col("kind") == "cpu").join(
        prof.frame("nodes").select("node_id", pl.col("name").cast(pl.String)), on="node_id")
    under = execs.filter(pl.col("name").str.starts_with("gradients/"))
    assert under["duration_ns"].sum() == expected_ns
    top = execs.filter(~pl.col("name").str.contains("/") & pl.col("name").str.contains(r"Backward\d*$"))
    assert top.filter(~pl.col("name").str.contains("AccumulateGrad")).is_empty()


def test_the_code_view_folds_backward_ops_into_their_forward_lines():
    prof = load("torch_cnn.pt.trace.json")
    options = {"max_depth": 100, "order_by": "micros", "select": ["micros"]}
    rows = run_view(prof, "code", options).frame.select(pl.col("name").cast(pl.String), "total_exec_micros")
    gradient = rows.filter(pl.col("name").str.ends_with(" (gradient)"))
    assert gradient["name"].str.contains(r"^conv\.py:\d+:_conv_forward \(gradient\)$").any()
    scope = run_view(prof, "scope", {"max_depth": 2, "select": ["micros"]}).frame
    gradients_total = scope.filter(pl.col("name").cast(pl.String) == "gradients")["total_exec_micros"].item()
    assert gradients_total > 0
    assert gradient["total_exec_micros"].max() == gradients_total  # (the outermost folded frame)


def test_both_engines_name_backward_ops_alike(monkeypatch):
    path = FOREIGN / "torch_transformer.pt.trace.json.gz"
    names = {}
    for engine in ("reference", "kernels"):
        monkeypatch.setenv("TFPROF_ENGINE", engine)
        with kernels.using(engine == "kernels"):
            names[engine] = pl.from_arrow(foreign.read(path, "kineto")["nodes"])["name"].to_list()
    assert names["reference"] == names["kernels"]
    assert sum(n.startswith("gradients/") for n in names["kernels"]) > 100


def test_a_trace_without_sequence_numbers_keeps_its_names():
    names = pl.from_arrow(load("kineto_alexnet.pt.trace.json.gz").table("nodes"))["name"]
    assert not names.str.starts_with("gradients/").any()


def test_backward_ops_without_a_stack_take_their_forward_ops():
    """PyTorch 1.8 ran the backward pass on its autograd thread, where no op records a stack: each
    backward op's frames are then its forward op's, and the code view shows it as ``(gradient)``."""
    prof = load("kineto_resnet50_step6.pt.trace.json.gz")
    nodes = prof.frame("nodes").select("node_id", pl.col("name").cast(pl.String))
    frames = prof.frame("code_frames").select("node_id", "depth", pl.col("file").cast(pl.String), "lineno")
    stack = frames.sort("depth").group_by("node_id").agg(pl.col("file", "lineno"))
    backward = nodes.filter(pl.col("name").str.starts_with("gradients/")).with_columns(
        pl.col("name").str.extract(r"^gradients/(.*?)_grad/", 1).alias("forward"))
    pairs = backward.join(nodes.rename({"node_id": "forward_id", "name": "forward"}), on="forward")
    assert pairs.height == backward.height > 40
    mine = pairs.join(stack, on="node_id").join(stack, left_on="forward_id", right_on="node_id", suffix="_forward")
    assert mine.height == pairs.height
    assert (mine["file"] == mine["file_forward"]).all() and (mine["lineno"] == mine["lineno_forward"]).all()

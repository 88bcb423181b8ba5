"""PyTorch's backward ops are named after the forward op they differentiate, as TensorFlow names its
gradients (``gradients/<forward path>_grad/…``, docs/FOREIGN.md): held against the trace's own
``fwdbwd`` flows, or for PyTorch 1.8 (no flows) its sequence numbers, read by ``foreign_expect``
without tfprof's readers."""

from __future__ import annotations

import json
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


def _op(name: str, tid: int, ts: float, dur: float, seq: int | None = None, **args) -> dict:
    extra = {"Sequence number": seq} if seq is not None else {}
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": {**extra, **args}}


def _flow(ph: str, flow_id: int, tid: int, ts: float) -> dict:
    return {"ph": ph, "id": flow_id, "pid": 1, "tid": tid, "ts": ts, "cat": "fwdbwd", "name": "fwdbwd",
            **({"bp": "e"} if ph == "f" else {})}


def _linked_names(events: list[dict]) -> dict[str, str]:
    """{backward root: the path the trace's own fwdbwd flows give its forward op}, read from the
    events alone: the innermost op starting at a flow's ``s`` end, with the ops around it on its
    thread, outermost first; the root is the ``evaluate_function`` op around the ``f`` end."""
    ops = [e for e in events if e["ph"] == "X"]

    def around(e: dict) -> list[dict]:
        return sorted((o for o in ops if o["tid"] == e["tid"] and o["ts"] <= e["ts"] <= o["ts"] + o["dur"]),
                      key=lambda o: (o["ts"], -o["dur"]))

    ends = {(e["id"], e["ph"]): e for e in events if e.get("cat") == "fwdbwd"}
    out = {}
    for (flow_id, ph), s in ends.items():
        if ph != "s":
            continue
        forward = [o for o in around(s) if o["ts"] <= s["ts"]]
        while forward[-1]["ts"] != s["ts"]:
            forward.pop()
        root = next(o for o in around(ends[flow_id, "f"]) if o["name"].startswith(EVALUATE))
        out[root["name"]] = "/".join(o["name"] for o in forward)
    return out


def test_a_backward_op_is_named_after_the_forward_op_its_flow_links_not_the_last_of_its_number(tmp_path):
    """Several forward ops with one sequence number (an op and the ops that ran after it before the
    next autograd node was made): the backward op was named after the last of them that started
    before it, `…/fbgemm::bounds_check_indices/aten::zero__grad/…`; the trace's own fwdbwd flow says
    which forward op made its node. A root without a flow keeps the number's match."""
    events = [
        _op("aten::embedding_bag", 1, 100.0, 50.0, seq=7),  # made the node: the flow starts here
        _op("fbgemm::bounds_check_indices", 1, 200.0, 40.0, seq=7),
        _op("aten::zero_", 1, 210.0, 10.0, seq=7),
        _op("aten::mul", 1, 300.0, 10.0, seq=8),
        _op(EVALUATE + "EmbeddingBagBackward0", 2, 500.0, 30.0, seq=7, **{"Fwd thread id": 1}),
        _op("EmbeddingBagBackward0", 2, 501.0, 20.0, seq=7, **{"Fwd thread id": 1}),
        _op(EVALUATE + "MulBackward0", 2, 600.0, 10.0, seq=8, **{"Fwd thread id": 1}),  # no flow
        _flow("s", 1, 1, 100.0), _flow("f", 1, 2, 501.0),
    ]
    path = tmp_path / "shared_number.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    names = set(pl.from_arrow(foreign.read(path, "kineto")["nodes"])["name"].to_list())
    (root, forward), = _linked_names(events).items()
    assert forward == "aten::embedding_bag"
    assert f"gradients/{forward}_grad/{root}" in names
    assert not any(n.startswith("gradients/fbgemm::bounds_check_indices/") for n in names)
    assert f"gradients/aten::mul_grad/{EVALUATE}MulBackward0" in names  # matched by its number

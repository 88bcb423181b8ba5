"""PyTorch 1.8 records each op's Python stack in its ``Call stack`` arg (``file.py(LINE): function;…``,
innermost first) instead of ``python_function`` spans: those stacks are the code view's, so a real GPU
trace's time, GPU time included, is ranked by the Python line that launched it. Held against the raw
file read with ``json`` (``foreign_expect``), not with tfprof's reader."""

from __future__ import annotations

import re

import polars as pl
from foreign_expect import load_trace_events
from test_foreign_ingest import FOREIGN, load

from tfprof.api import run_view

RESNET = "kineto_resnet50_step6.pt.trace.json.gz"
FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")


def _first_executions(name: str) -> pl.DataFrame:
    """(node_id, start) of each node's first execution, start in µs as the file writes it."""
    top, _ = load_trace_events(FOREIGN / name)
    base = int(top.get("baseTimeNanoseconds") or 0)
    events = pl.from_arrow(load(name).table("trace_events"))
    return events.filter(pl.col("node_id").is_not_null()).group_by("node_id").agg(
        (pl.col("start_ns").sort_by("event_id").first() - base).alias("start"))


def test_each_nodes_frames_are_its_first_executions_call_stack():
    _, events = load_trace_events(FOREIGN / RESNET)
    stacks = {round(e["ts"] * 1000): e["args"]["Call stack"] for e in events
              if e.get("ph") == "X" and "Call stack" in (e.get("args") or {})}
    frames = load(RESNET).frame("code_frames").sort("node_id", "depth")
    got = {n: list(zip(g["file"].cast(str), g["lineno"], g["function"].cast(str), strict=True))
           for (n,), g in frames.group_by("node_id")}
    checked = 0
    for node, start in _first_executions(RESNET).iter_rows():
        if start not in stacks:
            continue
        want = [FRAME.match(f).groups() for f in reversed(stacks[start].split(";")) if f]
        assert got[node] == [(file, int(line), function) for file, line, function in want], node
        checked += 1
    assert checked > 50


def test_the_code_view_ranks_gpu_time_by_python_line():
    prof = load(RESNET)
    options = {"max_depth": 100, "select": ["micros", "accelerator_micros"], "order_by": "accelerator_micros"}
    code = run_view(prof, "code", options).frame.with_columns(pl.col("name").cast(pl.String))
    scope = run_view(prof, "scope", options).frame
    gpu = scope.filter(pl.col("name") == "_TFProfRoot")["total_accelerator_exec_micros"].item()
    assert code.filter(pl.col("name") == "_TFProfRoot")["total_accelerator_exec_micros"].item() > 0.99 * gpu
    conv = code.filter(pl.col("name").str.contains(r"^conv\.py:\d+:_conv_forward"))
    assert set(conv["name"].str.ends_with(" (gradient)")) == {True, False}  # the forward and backward convs
    assert conv["total_accelerator_exec_micros"].min() > 0

"""Chrome-trace ``B``/``E`` pairs become spans, each ``E`` closing the innermost open ``B`` of its thread,
and are then ops, scopes and frames exactly as ``X`` events are. The trace is written here by hand
so that the expected spans can be read off it.
"""

from __future__ import annotations

import json

import pytest

import tfprof
from tfprof import kernels


def _ev(ph, name, ts, tid=1, cat="cpu_op", **extra):
    return {"ph": ph, "name": name, "ts": ts, "pid": 7, "tid": tid, "cat": cat, **extra}


TRACE = [
    _ev("E", "stray", 0.0, tid=2),  # closes nothing: dropped
    _ev("B", "aten::outer", 0.0),
    _ev("B", "aten::inner", 2.0),
    _ev("B", "aten::other", 1.0, tid=2),  # another thread: its own stack
    _ev("E", "", 5.0),  # closes aten::inner
    _ev("E", "", 4.5, tid=2),  # closes aten::other
    _ev("E", "", 10.0),  # closes aten::outer
    _ev("X", "aten::x", 12.0, dur=3.0),
    _ev("B", "nn.Module: Linear_0", 20.0, cat="python_function"),
    _ev("B", "aten::linear", 21.0),
    _ev("E", "", 24.0),
    _ev("B", "aten::add", 24.0),  # starts where the last one ended
    _ev("E", "", 24.5),
    _ev("E", "", 30.0),
    _ev("B", "aten::never_closed", 40.0),
    {"ph": "C", "name": "queue", "ts": 3.0, "pid": 7, "args": {"depth": 2, "bytes": 2.5}},  # a counter
]
# (name, start µs, duration µs) of every span, read off the trace above
WANT_SPANS = {("aten::outer", 0, 10), ("aten::inner", 2, 3), ("aten::other", 1, 3.5), ("aten::x", 12, 3),
              ("nn.Module: Linear_0", 20, 10), ("aten::linear", 21, 3), ("aten::add", 24, 0.5)}


@pytest.mark.parametrize("engine", [True, False])
def test_begin_end_pairs_are_spans(tmp_path, engine):
    path = tmp_path / "be.json"
    path.write_text(json.dumps({"traceEvents": TRACE}))
    with kernels.using(engine):
        prof = tfprof.load(path)
    spans = prof.frame("trace_events").filter(prof.frame("trace_events")["phase"].cast(str) == "X")
    got = {(n, s / 1000, d / 1000) for n, s, d in zip(spans["name"].cast(str), spans["start_ns"] - spans["start_ns"].min(),
                                                        spans["duration_ns"])}
    assert got == WANT_SPANS
    nodes = dict(zip(prof.frame("nodes")["name"].to_list(), prof.frame("nodes")["node_id"].to_list()))
    assert set(nodes) == {"aten::outer", "aten::outer/aten::inner", "aten::other", "aten::x", "Linear_0/aten::linear",
                          "Linear_0/aten::add"}
    execs = prof.frame("execs")
    self_us = dict(zip(execs["node_id"].to_list(), execs["duration_micros"].to_list()))
    assert self_us[nodes["aten::outer"]] == 10 - 3  # less aten::inner
    assert self_us[nodes["aten::other"]] == 4  # 3.5 µs, to even
    counters = prof.frame("counters")
    assert sorted(zip(counters["series"].cast(str), counters["value"])) == [("bytes", 2.5), ("depth", 2.0)]

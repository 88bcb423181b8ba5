"""A foreign profile's timeline is its own events (``tfprof.queries.raw_trace``): checked against
the trace files read with ``json`` alone — every event of a one-step GPU trace with its time to
the ns and its args, every flow, and for a two-step trace only events of the step's time."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest
from conftest import FIXTURES

import tfprof
from tfprof.api.run import run_view
from tfprof.api.sinks import write_output
from tfprof.api.steps import chrome_trace
from tfprof.errors import OptionError
from tfprof.queries.options import Options
from tfprof.queries.raw_trace import raw_trace

RESNET = FIXTURES / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz"
TORCH = tfprof.sample_path("torch")


def _source(path) -> list[dict]:
    with gzip.open(path, "rb") as f:
        return json.loads(f.read())["traceEvents"]


def _key(e: dict) -> tuple:
    return e["ph"], e["name"], round(float(e["ts"]) * 1000), round(float(e.get("dur", 0)) * 1000)


def test_every_event_and_flow_of_a_one_step_gpu_trace():
    source = [e for e in _source(RESNET) if e.get("ph") in ("X", "i")]
    ours = json.loads(raw_trace(tfprof.load(RESNET), 6))["traceEvents"]
    got = [e for e in ours if e["ph"] in ("X", "i")]
    assert Counter(map(_key, got)) == Counter(map(_key, source))
    # the args as recorded: the launch calls' correlation ids, the kernels' grids
    by_key = {_key(e): e for e in source}
    for e in got[:2000]:
        assert e.get("args", {}) == by_key[_key(e)].get("args", {}), e["name"]
    flows = Counter(e["ph"] for e in _source(RESNET) if e.get("ph") in ("s", "f"))
    assert Counter(e["ph"] for e in ours if e["ph"] in ("s", "f")) == flows
    # each flow ends on the thread (stream) of a kernel: its `f` binds to an enclosing slice
    threads = {(e["pid"], e["tid"]) for e in ours if e["ph"] == "X" and e["cat"] == "Kernel"}
    assert sum((e["pid"], e["tid"]) in threads for e in ours if e["ph"] == "f") > 1000


def test_a_step_of_a_two_step_trace_holds_its_own_time_only():
    prof = tfprof.load(TORCH)
    source = _source(TORCH)
    ours = json.loads(chrome_trace(prof, 2))["traceEvents"]
    mine = next(e for e in ours if e["name"] == "ProfilerStep#2")
    assert not any(e["name"] == "ProfilerStep#3" for e in ours)
    # the trace's times are from its base time; ours since the epoch: one shift for every event
    shift = mine["ts"] - next(e for e in source if e["name"] == "ProfilerStep#2")["ts"]
    lo, hi = mine["ts"], mine["ts"] + mine["dur"]
    spans = [e for e in ours if e["ph"] in ("X", "i")]
    assert all(e["ts"] <= hi + 1 and e["ts"] + e.get("dur", 0) >= lo - 1 for e in spans)  # each overlaps the step
    inside = Counter(_key({**e, "ts": e["ts"] + shift}) for e in source if e.get("ph") in ("X", "i")
                     and lo <= e["ts"] + shift and e["ts"] + shift + e.get("dur", 0) <= hi)
    assert not inside - Counter(map(_key, spans))  # every event inside the step is there
    assert sum(e["ph"] == "C" for e in ours) > 0  # the allocator totals as counters
    with pytest.raises(OptionError):
        chrome_trace(prof, 99)


def test_output_timeline_of_a_foreign_profile_writes_its_events(tmp_path):
    prof = tfprof.load(RESNET)
    out = tmp_path / "t.json"
    result = run_view(prof, "graph", Options.from_tfprof({"output": f"timeline:outfile={out}"}))
    written = write_output(prof, result)
    data = json.loads((tmp_path / "t.json_6").read_text())
    assert [str(p) for p in written.paths] == [str(tmp_path / "t.json_6")]
    assert "the trace's own events of step 6" in written.stdout
    assert sum(e["ph"] == "X" for e in data["traceEvents"]) == sum(e.get("ph") == "X" for e in _source(RESNET))


def test_epoch_times_in_whole_microseconds_stay_exact():
    """Kineto's times in µs since the epoch (1.6e15) times 1000 are beyond a double's exact
    integers; the reader keeps them whole (a multiplication first moved them by up to 128 ns)."""
    source = [e for e in _source(RESNET) if e.get("ph") == "X"]
    assert all(float(e["ts"]).is_integer() for e in source)  # the file's times are whole µs
    events = tfprof.load(RESNET).frame("trace_events")
    assert (events["start_ns"] % 1000 == 0).all()
    first = min(int(e["ts"]) for e in source)
    assert events["start_ns"].min() == first * 1000

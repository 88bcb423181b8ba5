"""A foreign profile's timeline in the UI is its own events laid out in lanes
(``tfprof.queries.raw_lanes``): checked against the trace file read with ``json`` alone — every
slice with its time to the ns, threads and streams as tracks, nesting levels that never overlap,
every flow joining the two slices it names, and a kernel opening the op that launched it."""

from __future__ import annotations

import gzip
import itertools
import json
from collections import Counter, defaultdict

import pytest
from conftest import FIXTURES, read_columns

import tfprof
from tfprof.api.steps import step_timeline
from tfprof.queries.raw_trace import window_events

RESNET = FIXTURES / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz"


@pytest.fixture(scope="module")
def resnet():
    with gzip.open(RESNET, "rb") as f:
        source = json.loads(f.read())["traceEvents"]
    return source, step_timeline(tfprof.load(RESNET), 6)


def _bars(t: dict) -> list[tuple]:
    return [(round(ts * 1000) + t["origin_ns"], round(dur * 1000), t["names"][n], lane)
            for ts, dur, n, lane in zip(t["ts"], t["dur"], t["name"], t["lane"])]


def test_every_slice_of_the_step_to_the_ns(resnet):
    source, t = resnet
    slices = [e for e in source if e.get("ph") == "X"]
    # the trace's µs times are whole here; ours are ns since the epoch
    want = Counter((int(e["ts"]) * 1000, int(e["dur"]) * 1000, e["name"]) for e in slices)
    assert Counter(b[:3] for b in _bars(t)) == want and len(t["ts"]) == len(slices) == 7441


def test_tracks_are_threads_and_streams_and_levels_never_overlap(resnet):
    source, t = resnet
    threads = {e["args"]["name"] for e in source if e.get("ph") == "M" and e.get("name") == "thread_name"}
    tracks = [lane["label"] for lane in t["lanes"] if lane["label"]]
    assert {label.split(" · ", 1)[1] for label in tracks} <= threads | {"stream 7"} and len(tracks) == 3
    by_lane = defaultdict(list)
    for start, dur, _, lane in _bars(t):
        by_lane[lane].append((start, start + dur))
    for bars in by_lane.values():
        assert bars == sorted(bars) and all(a[1] <= b[0] for a, b in itertools.pairwise(bars))
    # a slice below the top level starts while a slice one level up on its track is still open
    track_of = [lane["track"] for lane in t["lanes"]]
    for lane, bars in by_lane.items():
        if lane == 0 or track_of[lane - 1] != track_of[lane]:
            continue
        above = by_lane[lane - 1]
        for start, _ in bars[:500]:
            opener = max((b for b in above if b[0] <= start), default=None)
            assert opener is not None and opener[1] > start
    assert len(by_lane) > 3  # the CPU ops nest


def test_flows_join_launches_to_kernels(resnet):
    source, t = resnet
    starts = {e["id"]: e for e in source if e.get("ph") == "s"}
    assert len(t["flow_from"]) == len(starts) == 1516
    cats = Counter((t["cats"][t["cat"][a]], t["cats"][t["cat"][b]]) for a, b in zip(t["flow_from"], t["flow_to"]))
    assert cats[("Runtime", "Kernel")] > 1000 and set(cats) <= {("Runtime", c) for c in ("Kernel", "Memcpy", "Memset")}


def test_a_kernel_opens_the_op_that_launched_it(resnet):
    source, t = resnet
    op_of = {e["args"]["External id"]: e["name"] for e in source
             if e.get("cat") == "Operator" and "External id" in e.get("args", {})}
    want = Counter(op_of.get(e["args"]["external id"]) for e in source if e.get("cat") == "Kernel")
    got = Counter(t["nodes"][node].rsplit("/", 1)[-1] for node, cat in zip(t["node"], t["cat"])
                  if t["cats"][cat] == "Kernel")
    assert got == want and sum(want.values()) == 1462


def test_the_ui_sends_the_same_columns(resnet):
    from test_ui_api import page_client

    from tfprof.ui.app import make_app
    from tfprof.ui.profiles import Profiles

    _, t = resnet
    with page_client(make_app(Profiles.load([str(RESNET)]))) as client:
        got = read_columns(client.get("/api/timeline/0?step=6").content)
    for key in ("ts", "dur", "lane", "name", "node", "flow_from", "flow_to"):
        assert got[key] == list(t[key]), key
    assert got["names"] == t["names"] and got["lanes"] == t["lanes"]


def test_a_step_window_holds_only_its_time():
    prof = tfprof.load(tfprof.sample_path("torch"))
    ev, lo, hi = window_events(prof, 2)
    t = step_timeline(prof, 2)
    slices = ev.filter(ev["phase"].cast(str) == "X")
    assert len(t["ts"]) == slices.height and min(t["ts"]) >= -(lo - int(slices["start_ns"].min())) / 1000
    assert any(name == "ProfilerStep#2" for name in t["names"]) and "ProfilerStep#3" not in t["names"]


DDP = FIXTURES / "foreign" / "kineto_ddp_nccl_step5.pt.trace.json.gz"


def test_gpu_streams_are_named_by_the_traces_gpu_labels_after_the_host_threads():
    """A GPU stream's track is named as the trace labels its process (`process_labels`: `GPU 0`),
    not after the host process's name, and the host's threads (a negative thread id among them)
    come before the device's streams."""
    with gzip.open(DDP, "rb") as f:
        source = json.loads(f.read())["traceEvents"]
    gpu_label = {e["pid"]: e["args"]["labels"] for e in source
                 if e.get("ph") == "M" and e.get("name") == "process_labels" and e["args"]["labels"].startswith("GPU")}
    stream_pids = {e["pid"] for e in source if e.get("ph") == "X" and e.get("cat") == "kernel"}
    assert stream_pids and stream_pids <= gpu_label.keys()
    prof = tfprof.load(DDP)
    t = step_timeline(prof, prof.frame("steps")["step"][0])
    tracks = [lane["label"] for lane in t["lanes"] if lane["label"]]
    devices = [label for label in tracks if label.split(" · ")[0] in set(gpu_label.values())]
    assert devices and tracks[-len(devices):] == devices  # the streams last
    assert not any(label.startswith("python") and "stream" in label for label in tracks)

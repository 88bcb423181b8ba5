"""The GPU checks on real traces: one ResNet-50 training step on a V100, and a small training run on an
AMD MI250 (tests/fixtures/foreign/README.md).

Every number is held against ``advisor_gpu_expect``, which reads the same file with ``json``.
"""

from __future__ import annotations

from pathlib import Path

import advisor_gpu_expect as expect
import pytest

import tfprof
from tfprof.api import advise
from tfprof.api.advice import advice_output

REAL = Path(__file__).parent / "fixtures" / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz"


@pytest.fixture(scope="module")
def result():
    return advise(tfprof.load(REAL))


@pytest.fixture(scope="module")
def events():
    return expect.load(REAL)


def test_idle_share_per_step(result, events):
    rows = result.evidence["GpuIdleChecker"]
    want = expect.idle(events)
    assert {(r["step"], r["device"]): (r["window_ns"], r["idle_ns"]) for r in rows.iter_rows(named=True)} == want
    (step, device), (window, idle_ns) = next(iter(want.items()))
    assert 0 < idle_ns < window
    line = result.proto.checkers["GpuIdleChecker"].reports[0]
    assert line.startswith(f"step {step}, device {device}: idle {100 * idle_ns / window:.2f}% of ")
    # the evidence names real events: the one after the longest gap has the name given for it
    r = rows.row(0, named=True)
    assert events[r["gap_before_event"]]["name"] == r["gap_before_name"]


def test_short_kernels(result, events):
    rows = result.evidence["KernelLaunchChecker"]
    want = expect.short_kernels(events)
    assert dict(zip(rows["name"], zip(rows["short_kernels"], rows["launched"], strict=True), strict=True)) == want
    assert sum(v[0] for v in want.values()) > 100  # elementwise kernels of a few us, launches of ~8 us
    head = result.proto.checkers["KernelLaunchChecker"].reports[0]
    assert head.startswith(f"{sum(v[0] for v in want.values())} kernels ran shorter than their launch call")
    for r in rows.head(5).iter_rows(named=True):  # the example is a short kernel of that name, with its launch
        kernel, launch = events[r["example_event"]], events[r["example_launch_event"]]
        assert kernel["name"] == r["name"] and launch["name"] == "cudaLaunchKernel"
        assert kernel["args"]["correlation"] == launch["args"]["correlation"] and kernel["dur"] < launch["dur"]


def test_syncs_per_step(result, events):
    rows = result.evidence["HostSyncChecker"]
    want = expect.syncs(events)
    got = {s: (sum(rows.filter(rows["step"] == s)["outer_count"]), sum(rows.filter(rows["step"] == s)["outer_ns"]))
           for s in set(rows["step"])}
    assert got == want and want


def test_pageable_copies(result, events):
    rows = result.evidence["PageableCopyChecker"]
    want = expect.pageable(events)
    assert {r["name"]: (r["count"], r["total_ns"], r["bytes"]) for r in rows.iter_rows(named=True)} == want
    assert "Memcpy HtoD (Pageable -> Device)" in want


def test_no_communication(result, events):
    assert expect.exposed_comm(events) == {}
    assert list(result.proto.checkers["CommOverlapChecker"].reports) == ["no NCCL/RCCL kernels"]


def test_launch_queue(result, events):
    rows = result.evidence["LaunchQueueChecker"]
    want = expect.launch_bound(events)
    got = {(r["step"], r["device"]): (r["ops"], r["bound_ops"], r["bound_ns"]) for r in rows.iter_rows(named=True)}
    assert got == want
    assert all(ops > 1000 for ops, _, _ in want.values())
    # the report speaks of the device's idle time that launch-bound gaps cover, never more than it idled
    idle = {(r["step"], r["device"]): (r["idle_ns"], r["bound_idle_ns"]) for r in rows.iter_rows(named=True)}
    assert idle == expect.bound_idle(events)
    assert all(0 < covered <= free for free, covered in idle.values())
    steps_idle = {(r["step"], r["device"]): r["idle_ns"] for r in result.evidence["GpuIdleChecker"].iter_rows(named=True)}
    assert {k: v[0] for k, v in idle.items()} == {k: steps_idle[k] for k in idle}


def test_json_formats_the_numbers(result):
    import json

    doc = json.loads(advice_output(result, "json"))
    idle = next(c for c in doc["checkers"] if c["name"] == "GpuIdleChecker")
    row = idle["evidence"][0]
    assert row["display"]["idle_share"] == f"{100 * row['idle_share']:.2f}%"
    assert row["display"]["window_ns"].endswith("ms") and "window_start_ns" not in row["display"]
    assert idle["reports"] == list(result.proto.checkers["GpuIdleChecker"].reports)


XSPACE = Path(__file__).parent / "fixtures" / "foreign" / "tf_gpu_bert_slice.xplane.pb"


def test_the_checks_read_an_xspace_gpu_capture():
    """The same checks on a slice of a real TensorFlow GPU capture (XSpace: device-plane events
    with correlation ids, launches on host threads named after their kernels)."""
    found = advise(tfprof.load(XSPACE))
    events = expect.load(XSPACE)
    assert sum(e["cat"] == "kernel" for e in events) == 52
    idle = found.evidence["GpuIdleChecker"]
    want = expect.idle(events)
    assert {(r["step"], r["device"]): (r["window_ns"], r["idle_ns"]) for r in idle.iter_rows(named=True)} == want
    (_, device), (window, idle_ns) = next(iter(want.items()))
    assert device == "4" and 0 < idle_ns < window
    launched = found.evidence["KernelLaunchChecker"]
    assert dict(zip(launched["name"], zip(launched["short_kernels"], launched["launched"], strict=True),
                    strict=True)) == expect.short_kernels(events)
    queue = found.evidence["LaunchQueueChecker"]
    assert {(r["step"], r["device"]): (r["ops"], r["bound_ops"], r["bound_ns"]) for r in queue.iter_rows(named=True)} \
        == expect.launch_bound(events) == {(0, "4"): (51, 0, 0)}
    reports = found.proto.checkers["GpuIdleChecker"].reports
    assert reports[0].startswith(f"step 0, device 4: idle {100 * idle_ns / window:.2f}% of ")


def _copy_space(path: Path, src_kind: str) -> Path:
    """A host thread launching one host-to-device copy from ``src_kind`` memory, 4 KiB (XSpace as
    TensorFlow's GPU tracer writes it: the copy's sizes and memory kinds in ``memcpy_details``)."""
    from tfprof.schema.proto import xplane_pb2

    space = xplane_pb2.XSpace()
    for name, line_name, start_ps, dur_ps, details in (
        ("/host:CPU", "tf_Compute", 1_000_000, 3_000_000, None),
        ("/device:GPU:0", "Stream #13(MemcpyH2D)", 5_000_000, 40_000_000,
         f"kind_src:{src_kind} kind_dst:device size:4096 dest:0 async:1"),
    ):
        plane = space.planes.add(id=len(space.planes), name=name)
        plane.stat_metadata[1].id, plane.stat_metadata[1].name = 1, "correlation_id"
        plane.stat_metadata[2].id, plane.stat_metadata[2].name = 2, "memcpy_details"
        plane.event_metadata[1].id, plane.event_metadata[1].name = 1, "MemcpyH2D"
        line = plane.lines.add(id=1, name=line_name, timestamp_ns=1_000)
        event = line.events.add(metadata_id=1, offset_ps=start_ps, duration_ps=dur_ps)
        event.stats.add(metadata_id=1, int64_value=7)
        if details:
            event.stats.add(metadata_id=2, str_value=details)
    path.write_bytes(space.SerializeToString())
    return path


@pytest.mark.parametrize("src_kind", ["pageable", "pinned"])
def test_an_xspace_copy_from_pageable_memory(tmp_path, src_kind):
    found = advise(tfprof.load(_copy_space(tmp_path / "copy.xplane.pb", src_kind)))
    rows = found.evidence["PageableCopyChecker"]
    if src_kind == "pinned":
        assert rows.height == 0
        return
    assert rows.select("name", "count", "total_ns", "bytes").rows() == [("MemcpyH2D", 1, 40_000, 4096)]


def test_a_store_written_before_the_kernels_table_says_to_ingest_again(tmp_path):
    """A store from before the ``kernels`` table opens with it empty: the GPU checks and ``-select
    kernels`` say the store predates it, not that the trace has no GPU events."""
    import json

    from tfprof.api import run_view
    from tfprof.api.inputs import ingest_to_store

    store, _ = ingest_to_store(tmp_path / "old", profile_path=str(REAL))
    manifest = store / "tfprof_store.json"
    doc = json.loads(manifest.read_text())
    doc["tables"].pop("kernels")
    doc["files"].pop("kernels.parquet")
    manifest.write_text(json.dumps(doc))
    (store / "kernels.parquet").unlink()
    old = tfprof.load(store)
    assert old.predates == {"kernels"} and tfprof.load(REAL).predates == frozenset()
    reports = advise(old).proto.checkers
    for checker in ("GpuIdleChecker", "LaunchQueueChecker"):
        assert list(reports[checker].reports) == [
            "this store was written before tfprof kept a `kernels` table, which this check reads: ingest the trace "
            "again (tfprof ingest TRACE --out STORE --force)"]
    notes = run_view(old, "scope", {"select": ["accelerator_micros", "kernels"], "max_depth": 1}).notes
    assert any("written before tfprof kept a `kernels` table" in n for n in notes)


ROCM = Path(__file__).parent / "fixtures" / "foreign" / "kineto_mi250_rocm.pt.trace.json.gz"


def test_the_gpu_checks_on_an_amd_gpu():
    """On ROCm (an MI250 capture) the launches and syncs are HIP's: each check finds what the raw
    file holds, the host-device sync is ``hipDeviceSynchronize`` and the GEMM kernels' launches
    (``hipExtModuleLaunchKernel``) count as launches."""
    result, events = advise(tfprof.load(ROCM)), expect.load(ROCM)
    rows = result.evidence["HostSyncChecker"]
    assert set(rows["name"]) == {"hipDeviceSynchronize"}
    got = {s: (sum(rows.filter(rows["step"] == s)["outer_count"]), sum(rows.filter(rows["step"] == s)["outer_ns"]))
           for s in set(rows["step"])}
    assert got == expect.syncs(events)
    rows = result.evidence["KernelLaunchChecker"]
    want = expect.short_kernels(events)
    assert dict(zip(rows["name"], zip(rows["short_kernels"], rows["launched"], strict=True), strict=True)) == want
    from tfprof.queries.advisor.launch_overhead import launched_kernels

    calls = launched_kernels(tfprof.load(ROCM))["call"].to_list()
    assert calls.count("hipExtModuleLaunchKernel") == sum(e.get("name") == "hipExtModuleLaunchKernel"
                                                          for e in events) > 0
    assert len(calls) == sum(e.get("name") in expect.LAUNCHES for e in events)  # one kernel each
    rows = result.evidence["GpuIdleChecker"]
    assert {(r["step"], r["device"]): (r["window_ns"], r["idle_ns"]) for r in rows.iter_rows(named=True)} == \
        expect.idle(events)
    rows = result.evidence["LaunchQueueChecker"]
    got = {(r["step"], r["device"]): (r["ops"], r["bound_ops"], r["bound_ns"]) for r in rows.iter_rows(named=True)}
    assert got == expect.launch_bound(events)

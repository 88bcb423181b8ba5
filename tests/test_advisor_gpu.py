"""The advisor's GPU checks on small synthetic Kineto traces, one per rule's edge cases (docs/ADVISOR.md,
'GPU checks'), and the framework gate.

Each trace is written here in today's Kineto format (``cpu_op``, ``cuda_runtime``, ``kernel``,
``gpu_memcpy``; args ``device``, ``stream``, ``correlation``; times in us) and read through
``tfprof.load``; expected values are worked out by hand in the comments and cross-checked with
``advisor_gpu_expect`` (plain ``json``).
"""

from __future__ import annotations

import json

import advisor_gpu_expect as expect
import polars as pl
import pytest

import tfprof
from tfprof.api import advise
from tfprof.ingest.foreign import KINDS
from tfprof.queries.advisor import CHECKS, TRACE_CHECKS
from tfprof.queries.advisor.framework import framework, xspace_framework
from tfprof.queries.advisor.trace import FOREIGN_KINDS

GPU = [c.name for c in TRACE_CHECKS]


def step(n, ts, dur):
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def cpu(name, ts, dur, tid=1, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def call(name, ts, dur, corr, tid=1):
    return cpu(name, ts, dur, tid, "cuda_runtime", correlation=corr)


def gpu(name, ts, dur, corr=None, device=0, stream=7, cat="kernel", **args):
    a = {"device": device, "stream": stream, **({"correlation": corr} if corr is not None else {}), **args}
    return {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur, "args": a}


def load(tmp_path, events, name="t.json"):
    doc = {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
                           cpu("aten::mm", 0, 1), *events]}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return tfprof.load(path), expect.load(path)


def reports(prof, checker):
    return list(advise(prof, [checker]).proto.checkers[checker].reports)


# ------------------------------------------------------------------------------ idle share


def test_idle_share_per_step_and_device(tmp_path):
    prof, events = load(tmp_path, [
        step(1, 0, 90), step(2, 100, 50),  # windows [0, 100) and [100, 150)
        gpu("k_a", 10, 20, stream=7), gpu("k_b", 20, 20, stream=8),  # overlap: busy [10, 40) once
        gpu("k_c", 90, 30),  # across the boundary: 10 us in step 1, 20 in step 2
        gpu("k_d", 130, 10, device=1),  # device 1 runs nothing in step 1
    ])
    rows = advise(prof, ["GpuIdleChecker"]).evidence["GpuIdleChecker"]
    got = {(r["step"], r["device"]): (r["window_ns"], r["idle_ns"]) for r in rows.iter_rows(named=True)}
    assert got == {(1, "0"): (100_000, 60_000), (2, "0"): (50_000, 30_000),
                   (1, "1"): (100_000, 100_000), (2, "1"): (50_000, 40_000)}
    assert got == expect.idle(events)
    assert reports(prof, "GpuIdleChecker") == [
        "step 1, device 0: idle 60.00% of 100us (60us); longest gap 50us after `k_b`",
        "step 2, device 0: idle 60.00% of 50us (30us); longest gap 30us after `k_c`",
        "step 1, device 1: idle 100.00% of 100us (100us); longest gap 100us idle the whole step",
        "step 2, device 1: idle 80.00% of 50us (40us); longest gap 30us at the step's start, before `k_d`",
    ]
    assert rows["severity"].to_list() == ["high", "high", "high", "high"]


def test_idle_without_step_markers_is_one_step(tmp_path):
    prof, events = load(tmp_path, [gpu("k", 10, 5), gpu("k", 25, 5), gpu("k", 31, 9)])  # [10, 40): 11 idle
    rows = advise(prof, ["GpuIdleChecker"]).evidence["GpuIdleChecker"]
    assert rows.select("step", "window_ns", "idle_ns", "longest_gap_ns").rows() == [(0, 30_000, 11_000, 10_000)]
    assert expect.idle(events) == {(0, "0"): (30_000, 11_000)}
    assert rows["severity"][0] == "moderate"


def test_an_empty_step_marker_is_no_step(tmp_path):
    # PyTorch opens one more ProfilerStep as the profiler stops, after the last op: it holds nothing
    prof, events = load(tmp_path, [
        step(1, 0, 90), step(2, 100, 5),
        gpu("k", 10, 20), gpu("k", 80, 40),  # the second runs past the empty marker's start
        cpu("cudaDeviceSynchronize", 110, 12, cat="cuda_runtime"),  # after the empty marker's end
    ])
    rows = advise(prof, ["GpuIdleChecker"]).evidence["GpuIdleChecker"]
    assert rows.select("step", "window_ns", "idle_ns").rows() == [(1, 120_000, 60_000)]
    assert expect.idle(events) == {(1, "0"): (120_000, 60_000)}
    syncs = advise(prof, ["HostSyncChecker"]).evidence["HostSyncChecker"]
    assert syncs.select("step", "count").rows() == [(1, 1)]


def test_cpu_only_trace_says_no_gpu_events_once_per_check(tmp_path):
    prof, _ = load(tmp_path, [step(1, 0, 10), cpu("aten::item", 2, 3)])
    result = advise(prof)
    for name in GPU:
        assert list(result.proto.checkers[name].reports) == [
            "no GPU events (kernels, copies, memsets): nothing to check on this capture"]
        assert result.evidence[name].height == 0
    assert f"\n{GPU[0]}:\nno GPU events" in result.text


def test_tfprofs_own_profiles_get_no_gpu_checks_unless_asked():
    prof = tfprof.load(tfprof.sample_path())
    assert not set(GPU) & set(advise(prof).evidence)
    assert reports(prof, "KernelLaunchChecker") == [
        "no trace events: this check reads Kineto and XSpace traces, not tfprof's own profiles"]


# ------------------------------------------------------------------------------ launch overhead


def test_kernels_shorter_than_their_launch(tmp_path):
    prof, events = load(tmp_path, [
        call("cudaLaunchKernel", 0, 5, 1), gpu("k1", 10, 2, 1),  # 2 < 5: short
        call("cudaLaunchKernel", 20, 5, 2), gpu("k1", 30, 6, 2),  # 6 > 5: not
        call("cudaLaunchKernel", 40, 5, 3), gpu("k2", 50, 5, 3),  # equal: not short
        gpu("k3", 60, 1),  # no launch found: not counted
        call("cudaMemcpyAsync", 70, 10, 4), gpu("Memcpy HtoD (Pinned -> Device)", 80, 1, 4, cat="gpu_memcpy"),
    ])
    rows = advise(prof, ["KernelLaunchChecker"]).evidence["KernelLaunchChecker"]
    assert rows.select("name", "short_kernels", "launched", "kernel_ns", "launch_ns").rows() == [
        ("k1", 1, 2, 2_000, 5_000)]
    assert expect.short_kernels(events) == {"k1": (1, 2)}
    assert events[rows["example_event"][0]]["args"]["correlation"] == 1
    assert reports(prof, "KernelLaunchChecker") == [
        "1 kernel ran shorter than their launch call: kernel time 2us, launch time 5us; fuse them or use CUDA graphs",
        "`k1`: 1 of 2 (50.00%), kernel 2us vs launch 5us"]


def test_mtia_syncs_and_copy_sizes(tmp_path):
    prof, events = load(tmp_path, [
        gpu("k", 1, 1),
        cpu("synchronizeStream", 10, 4, cat="mtia_runtime"), cpu("synchronize", 20, 3, cat="mtia_runtime"),
        gpu("dma_request", 30, 2, cat="mtia_ccp_events", direction="HOST_TO_DEVICE", size=4096),
    ])
    rows = advise(prof, ["HostSyncChecker"]).evidence["HostSyncChecker"]
    assert sorted(rows.select("name", "count").rows()) == [("synchronize", 1), ("synchronizeStream", 1)]
    assert sum(v[0] for v in expect.syncs(events).values()) == 2
    from tfprof.queries.advisor.trace import device_events
    copies = device_events(prof).filter(pl.col("name") == "dma_request")
    assert copies.select("copy", "bytes").rows() == [("memcpy_htod", 4096)]


def test_kernels_launched_through_hip_suggest_hip_graphs(tmp_path):
    prof, _ = load(tmp_path, [call("hipLaunchKernel", 0, 5, 1), gpu("k1", 10, 2, 1)])
    rows = advise(prof, ["KernelLaunchChecker"]).evidence["KernelLaunchChecker"]
    assert rows["runtime"].to_list() == ["HIP"]
    assert reports(prof, "KernelLaunchChecker")[0].endswith("; fuse them or use HIP graphs")
    prof, _ = load(tmp_path, [call("hipLaunchKernel", 0, 5, 1), gpu("k1", 10, 2, 1),
                              call("cudaLaunchKernel", 20, 5, 2), gpu("k2", 30, 2, 2)], name="mixed.json")
    assert reports(prof, "KernelLaunchChecker")[0].endswith("; fuse them or use CUDA/HIP graphs")


def test_no_short_kernels_is_one_line(tmp_path):
    prof, _ = load(tmp_path, [call("cudaLaunchKernel", 0, 1, 1), gpu("k", 10, 50, 1)])
    assert reports(prof, "KernelLaunchChecker") == ["no kernel ran shorter than the call that launched it"]


# ------------------------------------------------------------------------------ host-device syncs


def test_syncs_count_nested_ones_once(tmp_path):
    prof, events = load(tmp_path, [
        step(1, 0, 90), step(2, 100, 50), gpu("k", 1, 1),
        cpu("aten::item", 10, 20), cpu("aten::_local_scalar_dense", 11, 18),
        cpu("cudaStreamSynchronize", 12, 16, cat="cuda_runtime"),  # three nested: one wait of 20 us
        cpu("cudaDeviceSynchronize", 40, 5, cat="cuda_runtime"),
        cpu("cudaEventSynchronize", 110, 2, tid=2, cat="cuda_runtime"),
    ])
    rows = advise(prof, ["HostSyncChecker"]).evidence["HostSyncChecker"]
    per_step = rows.group_by("step").agg(pl.col("outer_count").sum(), pl.col("outer_ns").sum()).sort("step")
    assert per_step.rows() == [(1, 2, 25_000), (2, 1, 2_000)]
    assert expect.syncs(events) == {1: (2, 25_000), 2: (1, 2_000)}
    assert rows.filter(pl.col("step") == 1)["count"].sum() == 4
    assert reports(prof, "HostSyncChecker") == [
        "step 1: 2 host-device syncs, 25us: aten::item x1 (20us), aten::_local_scalar_dense x1 (18us), "
        "cudaStreamSynchronize x1 (16us), cudaDeviceSynchronize x1 (5us)",
        "step 2: 1 host-device sync, 2us: cudaEventSynchronize x1 (2us)"]


# ------------------------------------------------------------------------------ pageable copies


def test_only_pageable_host_to_device_copies(tmp_path):
    memcpy = {"cat": "gpu_memcpy"}
    prof, events = load(tmp_path, [
        gpu("Memcpy HtoD (Pageable -> Device)", 0, 1500, bytes=1000, **memcpy),
        gpu("Memcpy HtoD (Pageable -> Device)", 2000, 500, bytes=3000, **memcpy),
        gpu("Memcpy HtoD (Pinned -> Device)", 3000, 100, bytes=5000, **memcpy),
        gpu("Memcpy DtoH (Device -> Pageable)", 4000, 100, bytes=7000, **memcpy),
    ])
    rows = advise(prof, ["PageableCopyChecker"]).evidence["PageableCopyChecker"]
    assert rows.select("name", "count", "total_ns", "bytes").rows() == [
        ("Memcpy HtoD (Pageable -> Device)", 2, 2_000_000, 4000)]
    assert expect.pageable(events) == {"Memcpy HtoD (Pageable -> Device)": (2, 2_000_000, 4000)}
    assert reports(prof, "PageableCopyChecker")[0].startswith(
        "2 host-to-device copies from pageable memory (`Memcpy HtoD (Pageable -> Device)`) in 1 step: 2.00ms, 4.00KB;")


# ------------------------------------------------------------------------------ communication overlap


def test_exposed_communication_per_device(tmp_path):
    prof, events = load(tmp_path, [
        gpu("ncclKernel_AllReduce_RING_LL_Sum_float", 0, 100), gpu("gemm", 20, 30, stream=8),
        gpu("gemm", 40, 30, stream=9),  # compute union [20, 70): 50 of 100 hidden
        gpu("ncclDevKernel_Broadcast", 300, 10), gpu("gemm", 290, 30, stream=8),  # fully hidden
        gpu("Memset (Device)", 0, 100, cat="gpu_memset"),  # a memset is not compute
        gpu("ncclKernel_AllReduce_RING_LL_Sum_float", 0, 10, device=1),
        gpu("gemm", 200, 10, device=1),  # later: hides nothing
    ])
    rows = advise(prof, ["CommOverlapChecker"]).evidence["CommOverlapChecker"]
    got = rows.group_by("device").agg(pl.col("comm_ns").sum(), pl.col("exposed_ns").sum()).sort("device")
    assert got.rows() == [("0", 110_000, 50_000), ("1", 10_000, 10_000)]
    assert expect.exposed_comm(events) == {"0": (110_000, 50_000), "1": (10_000, 10_000)}
    assert reports(prof, "CommOverlapChecker")[0] == (
        "device 0: 45.45% of communication time with no compute kernel running (50us of 110us, 2 kernels); "
        "most exposed: `ncclKernel_AllReduce_RING_LL_Sum_float` 50us")


# ------------------------------------------------------------------------------ launch queue


def _launched(n, first, spacing, device, tid, corr, run_after=3, dur=2, back_to_back=None):
    """n launches ``spacing`` us apart on host thread ``tid``; each kernel runs ``run_after`` us after
    its call ends, or back to back from ``back_to_back`` us."""
    out = []
    for i in range(n):
        ts = first + i * spacing
        out.append(call("cudaLaunchKernel", ts, 2, corr + i, tid=tid))
        start = ts + 2 + run_after if back_to_back is None else back_to_back + i * 20
        out.append(gpu("k", start, dur if back_to_back is None else 20, corr + i, device=device))
    return out


def test_launch_queue_rule(tmp_path):
    prof, events = load(tmp_path, [
        *_launched(5, 10, 10, device=0, tid=1, corr=100),  # each kernel ends before the next call: bound
        *_launched(5, 10, 1, device=1, tid=2, corr=200, back_to_back=100),  # queued ahead: no gaps
        *_launched(3, 10, 100, device=2, tid=3, corr=300),  # waited, but the host paused 100 us: not bound
    ])
    rows = advise(prof, ["LaunchQueueChecker"]).evidence["LaunchQueueChecker"]
    got = {r["device"]: (r["ops"], r["bound_ops"], r["bound_ns"], r["cpu_bound"]) for r in rows.iter_rows(named=True)}
    # device 0: kernel i runs [10i+15, 10i+17): gaps of 8 us, every next call starts after the last kernel ended
    assert got == {"0": (4, 4, 32_000, True), "1": (4, 0, 0, False), "2": (2, 0, 0, False)}
    assert {d: v[:3] for (_, d), v in expect.launch_bound(events).items()} == {d: v[:3] for d, v in got.items()}
    # one stream: each of its gaps is device idle time; the step (no markers) spans every device's work
    idle_ns, covered = expect.bound_idle(events)[(0, "0")]
    assert covered == 32_000 and idle_ns > covered
    assert reports(prof, "LaunchQueueChecker")[0] == (
        "step 0, device 0: CPU-bound launch queue: 4 of 4 operations (100.00%) waited for their launch, covering "
        f"32us of the device's {idle_ns // 1000}us idle time (median gap 8us, launch spacing 10us)")


def test_launch_queue_idle_is_the_devices_not_the_streams(tmp_path):
    """Two streams of one device each wait for their launches at the same time: their gaps add up
    to twice the device's idle time, which the report must not exceed."""
    prof, events = load(tmp_path, [
        *_launched(4, 10, 10, device=0, tid=1, corr=100),
        *[{**e, "tid": 8, "args": {**e["args"], "stream": 8}} if e.get("cat") == "kernel" else e
          for e in _launched(4, 10, 10, device=0, tid=2, corr=200)],
    ])
    rows = advise(prof, ["LaunchQueueChecker"]).evidence["LaunchQueueChecker"]
    row = rows.row(0, named=True)
    want = expect.bound_idle(events)[(0, "0")]
    assert (row["idle_ns"], row["bound_idle_ns"]) == want
    assert row["bound_ns"] == 2 * want[1] and want[1] <= want[0]


# ------------------------------------------------------------------------------ framework gate


def test_foreign_kinds_match_the_ingest():
    assert FOREIGN_KINDS == KINDS


def test_framework_of_each_kind(tmp_path):
    prof, _ = load(tmp_path, [gpu("k", 0, 1)])
    assert framework(prof) == "pytorch"
    assert framework(tfprof.load(tfprof.sample_path())) == "tensorflow"
    tf_op = pl.LazyFrame({"name": ["a/b:MatMul"], "category": ["MatMul"], "args": [None]},
                         schema={"name": pl.String, "category": pl.String, "args": pl.String})
    hlo = pl.LazyFrame({"name": ["fusion.1"], "category": [None], "args": ['{"hlo_op": "fusion.1"}']},
                       schema={"name": pl.String, "category": pl.String, "args": pl.String})
    assert xspace_framework(tf_op) == "tensorflow" and xspace_framework(hlo) == "jax"
    assert xspace_framework(pl.concat([tf_op, hlo])) == "tensorflow"  # TF with XLA: the TF ops decide
    assert xspace_framework(hlo.with_columns(pl.lit(None, pl.String).alias("args"))) == "unknown"


def test_tensorflow_checks_are_left_out_or_skipped_in_one_line(tmp_path):
    """By default a PyTorch trace gets no TensorFlow check at all; asked for by name, one line says why not."""
    prof, _ = load(tmp_path, [gpu("k", 0, 1)])
    gated = [c.name for c in CHECKS if c.frameworks]
    assert gated == ["OperationChecker"]
    default = advise(prof)
    assert "OperationChecker" not in default.reports and "OperationChecker" not in default.proto.checkers
    assert "TensorFlow" not in default.text
    result = advise(prof, ["OperationChecker", "GpuIdleChecker"])
    assert list(result.proto.checkers["OperationChecker"].reports) == [
        "skipped: a check for TensorFlow profiles; this profile is from PyTorch"]
    assert "\nOperationChecker:\nskipped: a check for TensorFlow profiles; this profile is from PyTorch\n\n" in result.text


@pytest.mark.parametrize("checker", GPU)
def test_every_gpu_check_is_documented(checker):
    from pathlib import Path

    doc = (Path(__file__).parent.parent / "docs" / "ADVISOR.md").read_text()
    assert f"| {checker} |" in doc

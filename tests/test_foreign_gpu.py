"""GPU Kineto traces: every kernel, memcpy and memset charged to the op that launched it, held against
tests/foreign_expect_gpu.py's independent walk of the raw JSON (correlation -> runtime call -> innermost
op around it on its thread), on real captures of three PyTorch generations and of ROCm (tests/fixtures/foreign/README.md).
Times are compared in integer ns; the views' µs are those ns over 1000.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from foreign_expect import load_trace_events
from foreign_expect_gpu import kineto_cpu_self_ns, kineto_gpu_expect
from test_foreign_ingest import cli, load

import tfprof
from tfprof.api import run_view
from tfprof.ingest.foreign.gpu import UNLINKED_SCOPE

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
GPU = ["kineto_resnet50_step6.pt.trace.json.gz", "kineto_ddp_nccl_step5.pt.trace.json.gz",
       "kineto_alexnet.pt.trace.json.gz", "kineto_mi250_rocm.pt.trace.json.gz",
       "kineto_mtia_train_slice.pt.trace.json.gz",
       # our own, on an H200 (tools/capture_foreign.py torch-gpu): two steps each
       "torch_cuda_cnn.pt.trace.json.gz", "torch_cuda_transformer.pt.trace.json.gz",
       "torch_cuda_compiled_transformer.pt.trace.json.gz"]


def ns(micros: float) -> int:
    """A view's exact µs (a float of ns / 1000) back in ns."""
    return round(micros * 1000)


def steps_of(prof: tfprof.Profile) -> list[int]:
    return prof.frame("steps")["step"].to_list()


@pytest.mark.parametrize("name", GPU)
def test_every_gpu_event_is_one_kernels_row_as_the_raw_file_says(name):
    want = kineto_gpu_expect(FOREIGN / name)
    prof = load(name)
    kernels = prof.frame("kernels")
    assert kernels.height == want["gpu_events"] > 0
    assert kernels["node_id"].null_count() == want["unlinked"]
    streams = kernels.group_by(pl.col("device").cast(str), pl.col("stream").cast(str)).agg(pl.col("duration_ns").sum())
    assert {(d, s): n for d, s, n in streams.iter_rows()} == want["ns_by_stream"]
    assert dict(Counter(kernels["kind"].cast(str).to_list())) == want["count_by_kind"]
    assert steps_of(prof) == (want["steps"] or [0])
    # each is an accelerator execution of a node, and a trace event of that node
    assert prof.frame("execs").filter(pl.col("kind").cast(str) == "accelerator").height == want["gpu_events"]
    events = prof.frame("trace_events").join(kernels.select("event_id", "node_id"), on="event_id")
    assert events.filter(pl.col("node_id_right").is_not_null())["node_id"].to_list() == \
        events.filter(pl.col("node_id_right").is_not_null())["node_id_right"].to_list()


@pytest.mark.parametrize("name", GPU)
def test_accelerator_time_per_op_type_is_the_gpu_time_it_launched(name):
    want = kineto_gpu_expect(FOREIGN / name)
    prof = load(name)
    got = prof.sql("SELECT n.op::VARCHAR AS op, sum(e.duration_ns)::BIGINT AS ns FROM execs e JOIN nodes n "
                   "USING (node_id) WHERE e.kind = 'accelerator' AND NOT starts_with(n.name, '[unlinked') GROUP BY ALL")
    assert dict(got.iter_rows()) == want["accelerator_ns_by_op"]
    view: Counter = Counter()  # each step's view, summed over the capture's steps
    root_ns = 0
    for step in steps_of(prof):
        frame = run_view(prof, "op", {"step": step, "select": ["accelerator_micros"], "max_depth": 10_000,
                                      "order_by": "accelerator_micros"}).frame
        view.update({n: ns(v) for n, v in zip(frame["name"], frame["accelerator_exec_micros"]) if v})
        assert frame["accelerator_exec_micros"].to_list() == sorted(frame["accelerator_exec_micros"], reverse=True)
        root = run_view(prof, "scope", {"step": step, "max_depth": 1, "select": ["accelerator_micros"]}).frame.row(
            0, named=True)
        root_ns += ns(root["total_accelerator_exec_micros"])
    # a GPU event no op launched is an op of its own kind, named as it is (MTIA's DMA copies carry no correlation)
    assert dict(view) == dict(Counter(want["accelerator_ns_by_op"]) + Counter(want["unlinked_ns_by_name"]))
    assert root_ns == want["gpu_ns"]


@pytest.mark.parametrize("name", GPU)
def test_the_cpu_self_time_of_ops_is_unchanged(name):
    got = load(name).sql("SELECT n.op::VARCHAR AS op, sum(e.duration_ns)::BIGINT AS ns FROM execs e JOIN nodes n "
                         "USING (node_id) WHERE e.kind = 'cpu' GROUP BY ALL")
    assert dict(got.iter_rows()) == kineto_cpu_self_ns(FOREIGN / name)


@pytest.mark.parametrize("name", GPU)
def test_an_op_with_gpu_work_is_placed_on_its_gpu_with_its_streams(name):
    prof = load(name)
    execs = prof.frame("execs").filter(pl.col("kind").cast(str) == "accelerator")
    placed = prof.frame("nodes").filter(pl.col("node_id").is_in(execs["node_id"].unique().implode()))
    assert placed["canonical_device"].cast(str).str.starts_with("/device:gpu:").all()
    assert (placed["host_device"].cast(str) == "/device:cpu:0").all()
    assert execs["device"].cast(str).str.ends_with("/stream:all").all()
    devices = set(prof.frame("exec_devices")["device"].cast(str))
    kernels = prof.frame("kernels")
    assert {f"{d}/stream:{s}" for d, s in zip(kernels["device"].cast(str), kernels["stream"].cast(str))} <= devices
    assert prof.frame("validation").filter(pl.col("code").cast(str) == "device_without_stream").height == 0


def test_order_by_accelerator_micros_on_the_command_line():
    name = GPU[0]
    want = kineto_gpu_expect(FOREIGN / name)["accelerator_ns_by_op"]
    proc = cli("op", "--profile_path", str(FOREIGN / name), "--select", "accelerator_micros",
               "--order_by", "accelerator_micros", "--max_depth", "3")
    assert proc.returncode == 0, proc.stderr
    rows = [line.split()[0] for line in proc.stdout.split("Profile:")[1].splitlines()[2:] if line.strip()]
    assert rows[:3] == [op for op, _ in Counter(want).most_common(3)]


def test_old_and_new_formats_read_alike():
    """PyTorch 1.8's categories (Operator, Runtime, Kernel, Memcpy, Memset; ProfilerStep#N an Operator)
    read as the later ones do: the step is a step, not an op."""
    _, events = load_trace_events(FOREIGN / GPU[0])
    assert {"Operator", "Runtime", "Kernel", "Memset"} <= {e.get("cat") for e in events}
    nodes = load(GPU[0]).frame("nodes")
    assert not nodes["name"].str.contains("ProfilerStep").any()
    _, events = load_trace_events(FOREIGN / GPU[1])
    assert {"cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "ac2g"} <= {e.get("cat") for e in events}


def _unlinkable(tmp_path: Path) -> tuple[Path, int]:
    """The alexnet fixture with the launch calls of three GPU events removed and two moved to a
    thread without ops: a trace with GPU events no op launched."""
    top, events = load_trace_events(FOREIGN / GPU[2])
    gpu = [e for e in events if e.get("cat") == "kernel"]
    drop = {e["args"]["correlation"] for e in gpu[:3]}
    move = {e["args"]["correlation"] for e in gpu[3:5]}
    out = []
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") == "cuda_runtime" and corr in drop:
            continue
        out.append({**e, "tid": 999_999} if e.get("cat") == "cuda_runtime" and corr in move else e)
    path = tmp_path / "unlinked.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps({**top, "traceEvents": out}).encode()))
    return path, len(drop) + len(move)


def test_unlinked_gpu_events_are_kept_counted_and_reported(tmp_path):
    path, broken = _unlinkable(tmp_path)
    want = kineto_gpu_expect(path)
    assert want["unlinked"] == broken
    prof = tfprof.load(path)
    kernels = prof.frame("kernels")
    assert kernels.height == want["gpu_events"] and kernels["node_id"].null_count() == want["unlinked"]
    own = prof.frame("nodes").filter(pl.col("name").str.starts_with(UNLINKED_SCOPE + "/"))
    unlinked_ns = prof.frame("execs").join(own.select("node_id"), on="node_id")["duration_ns"].sum()
    assert unlinked_ns == want["gpu_ns"] - sum(want["accelerator_ns_by_op"].values())
    runs = prof.frame("node_steps").join(own.select("node_id"), on="node_id")["run_count"].sum()
    assert runs == want["unlinked"]
    found = prof.frame("validation").filter(pl.col("code").cast(str) == "unlinked_gpu_event")
    assert found["count"].sum() == want["unlinked"]
    proc = cli("check", str(path))
    assert proc.returncode == 0, proc.stderr
    assert f"unlinked_gpu_event {want['unlinked']}" in proc.stdout
    assert "no launch call has its correlation id" in proc.stdout
    assert "no op encloses its launch call `cudaLaunchKernel`" in proc.stdout


def test_gpu_events_launched_in_a_scope_but_no_op_stay_under_that_scope(tmp_path):
    """A launch call that no op holds but a ``record_function`` annotation does (apex's fused
    optimizers launch so, inside ``Optimizer.step#…``): its GPU events go to nodes under that
    annotation's scope, so the scope view charges it their time; they are still counted as
    unlinked (no op has them), with where they were kept."""
    top, events = load_trace_events(FOREIGN / GPU[2])
    gpu = [e for e in events if e.get("cat") == "kernel"]
    move = {e["args"]["correlation"] for e in gpu[3:5]}
    calls = [e for e in events if e.get("cat") == "cuda_runtime" and (e.get("args") or {}).get("correlation") in move]
    thread = {"pid": calls[0]["pid"], "tid": 999_999}
    lo, hi = min(e["ts"] for e in calls) - 1, max(e["ts"] + e["dur"] for e in calls) + 1
    scope = {"ph": "X", "cat": "user_annotation", "name": "## optimizer ##", "ts": lo, "dur": hi - lo, **thread}
    out = [{**e, **thread} if e in calls else e for e in events] + [scope]
    path = tmp_path / "scoped.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps({**top, "traceEvents": out}).encode()))
    want = kineto_gpu_expect(path)
    assert want["unlinked"] == len(move)
    prof = tfprof.load(path)
    moved = [e for e in gpu if e["args"]["correlation"] in move]
    nodes = prof.frame("nodes").filter(pl.col("name").str.starts_with("## optimizer ##/"))
    assert sorted(nodes["name"]) == sorted({f"## optimizer ##/{e['name']}" for e in moved})
    root = run_view(prof, "scope", {"max_depth": 2, "select": ["accelerator_micros"]}).frame
    row = root.filter(pl.col("name") == "## optimizer ##").row(0, named=True)
    assert ns(row["total_accelerator_exec_micros"]) == sum(round(e["dur"] * 1000) for e in moved)
    assert not prof.frame("nodes")["name"].str.starts_with(UNLINKED_SCOPE).any()
    found = prof.frame("validation").filter(pl.col("code").cast(str) == "unlinked_gpu_event")
    assert found["count"].sum() == len(move)
    assert "kept under the scope of its launch call" in cli("check", str(path)).stdout


def test_mtia_stream_events_are_no_gpu_work_and_copies_say_their_direction(tmp_path):
    """On MTIA (HTA's inference trace holds these), a stream recording or waiting on an event is no
    GPU event, and a ``dma_request`` copy's direction is its ``direction`` arg."""
    top, events = load_trace_events(FOREIGN / "kineto_mtia_train_slice.pt.trace.json.gz")
    dma = next(e for e in events if e.get("name") == "dma_request")
    added = [
        {**dma, "name": "event_wait", "dur": 5000.0, "args": {"stream": 108, "wait_on_stream": 104}},
        {**dma, "name": "event_record", "dur": 1.0, "args": {"stream": 108}},
        {**dma, "args": {**dma["args"], "direction": "DEVICE_TO_DEVICE"}},
    ]
    path = tmp_path / "mtia.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps({**top, "traceEvents": events + added}).encode()))
    want = kineto_gpu_expect(path)
    prof = tfprof.load(path)
    kernels = prof.frame("kernels")
    assert kernels.height == want["gpu_events"] == 505 + 1
    assert dict(Counter(kernels["kind"].cast(str).to_list())) == want["count_by_kind"]
    assert want["count_by_kind"]["memcpy_dtod"] == 1
    marks = prof.frame("trace_events").filter(pl.col("name").cast(str).is_in(["event_wait", "event_record"]))
    assert marks.height == 2 and marks["node_id"].null_count() == 2  # kept as trace events, charged to nothing


def test_gpu_event_kinds_from_names():
    from tfprof.ingest.foreign.gpu import kind

    frame = pl.DataFrame({
        "category": ["gpu_memcpy", "gpu_memcpy", "gpu_memcpy", "Memcpy", "gpu_memset", "kernel", "kernel", None,
                     "mtia_ccp_events", "mtia_ccp_events"],
        "name": ["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)", "Memcpy DtoD (Device -> Device)",
                 "Memcpy PtoP (Device -> Device)", "Memset (Device)", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
                 "void at::native::elementwise_kernel<128>()", "MemcpyD2H", "dma_request", "add-dtype_Float"],
        "direction": [None] * 8 + ["HOST_TO_DEVICE", None],
    })
    got = frame.select(kind(pl.col("category"), pl.col("name"), pl.col("direction")).alias("kind"))["kind"].to_list()
    assert got == ["memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memcpy_other", "memset", "communication", "compute",
                   "memcpy_dtoh", "memcpy_htod", "compute"]


def test_kernels_table_survives_a_store(tmp_path):
    out = tmp_path / "store"
    proc = cli("ingest", "--profile_path", str(FOREIGN / GPU[2]), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    stored, fresh = tfprof.load(out), load(GPU[2])
    for table in ("kernels", "node_steps", "execs"):
        assert stored.table(table).equals(fresh.table(table)), table



@pytest.mark.parametrize("name", GPU)
def test_select_kernels_lists_the_gpu_work_under_the_op_that_launched_it(name):
    """``-select kernels``: under each op's row of the scope view, one line per GPU event name it
    launched, with its runs and time; over the whole report they are the raw file's links."""
    want = kineto_gpu_expect(FOREIGN / name)["by_op_kernel"]
    prof = load(name)
    result = run_view(prof, "scope", {"max_depth": 1000, "select": ["accelerator_micros", "kernels"], "step": -1})
    steps = len(steps_of(prof))
    lines = result.text.split("Profile:\n", 1)[1].splitlines()
    got: dict[tuple[str, str], list] = {}
    op, indent = None, 0
    for line in lines:
        body = line.lstrip(" ")
        found = re.match(r"\[(compute|communication|memset|memcpy_\w+)\] (.*) \(([^(]*), (\d+) runs?\)$", body)
        if found:
            kernel, runs = found.group(2), int(found.group(4))
            assert len(line) - len(body) == indent + 2  # one level below its op
            acc = got.setdefault((op, kernel), [0, 0])
            acc[0] += runs
            acc[1] += 1
        else:
            indent = len(line) - len(body)
            op = body.rsplit(" (", 1)[0].rsplit("/", 1)[-1].replace("\u2215", "/")
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in want.items()}
    # the times, exact: each op row's lines add up to its own accelerator time, per step of the capture
    from tfprof.queries.launched import launched

    rows = result.frame
    work = launched(prof, rows, -1)
    per_row = work.group_by("row").agg(pl.col("ns").sum(), pl.len().alias("names"))
    own = rows.with_row_index("row").join(per_row, on="row")
    for r in own.iter_rows(named=True):
        assert 0 <= ns(r["accelerator_exec_micros"]) - r["ns"] < max(r["names"], 1) * (steps > 1) + 1
    names = rows.with_row_index("row").select("row", pl.col("name").str.split("/").list.last()
                                               .str.replace_all("\u2215", "/", literal=True).alias("op"))
    summed = work.join(names, on="row").group_by("op", "name").agg(pl.col("ns").sum())
    if steps <= 1:
        assert {(o, k): n for o, k, n in summed.iter_rows()} == {k: t for k, (_, t) in want.items()}


def test_select_kernels_on_a_cpu_profile_adds_nothing():
    prof = tfprof.load(tfprof.sample_path())
    plain = run_view(prof, "scope", {"select": ["micros"]}).text
    with_kernels = run_view(prof, "scope", {"select": ["micros", "kernels"]}).text
    body = lambda t: t.split("Profile:\n", 1)[1]  # noqa: E731
    assert body(with_kernels) == body(plain) and "kernels: The GPU kernels" in with_kernels
    notes = run_view(prof, "op", {"select": ["micros", "kernels"]}).notes
    assert any("scope and graph views list GPU kernels" in n for n in notes)

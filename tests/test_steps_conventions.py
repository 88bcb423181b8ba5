"""``tfprof steps`` with the peers' conventions (``--window marker|kernels``, ``--drop-last-step``),
a whole-trace row (``--total``) and the unlinked GPU time per reason (``--unlinked``), held
against ``advisor_gpu_expect`` (the raw files read with ``json``/protobuf and plain loops), a
small trace written here, and HTA's own figures for one public trace."""

from __future__ import annotations

import functools
import gzip
import json
import subprocess
import sys
from pathlib import Path

import advisor_gpu_expect as expect
import polars as pl
import pytest

import tfprof
from tfprof.errors import OptionError

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
GPU = ["kineto_resnet50_step6.pt.trace.json.gz", "kineto_ddp_nccl_step5.pt.trace.json.gz",
       "tf_gpu_bert_slice.xplane.pb", "torch_cuda_cnn.pt.trace.json.gz",
       "torch_cuda_compiled_transformer.pt.trace.json.gz", "jax_cuda_mlp.xplane.pb"]
PARTS = ("window_ns", "compute_ns", "communication_ns", "memcpy_ns", "idle_ns", "communication_total_ns",
         "overlapped_ns")
UNLINKED = ("unlinked_no_correlation_ns", "unlinked_before_capture_ns", "unlinked_outside_ops_ns")
CONVENTIONS = [("marker", False, True), ("kernels", True, True), ("next", True, False), ("kernels", False, False)]


@functools.cache
def _load(name: str):
    return tfprof.load(FOREIGN / name)


@functools.cache
def _events(name: str) -> list[dict]:
    return expect.load(FOREIGN / name)


def _keyed(rows: pl.DataFrame, columns: tuple[str, ...]) -> dict:
    return {(r["step"], r["device"]): tuple(r[c] for c in columns) for r in rows.iter_rows(named=True)}


@pytest.mark.parametrize("name", GPU)
@pytest.mark.parametrize(("window", "drop", "total"), CONVENTIONS)
def test_each_convention_is_the_raw_files(name, window, drop, total):
    rows = tfprof.steps(_load(name), window=window, drop_last_step=drop, total=total)
    want = expect.breakdown(_events(name), window, drop, total)
    assert _keyed(rows, PARTS) == want and want
    for r in rows.iter_rows(named=True):
        assert r["compute_ns"] + r["communication_ns"] + r["memcpy_ns"] + r["idle_ns"] == r["window_ns"]
    assert (rows["step"].null_count() > 0) == total


def test_the_defaults_are_ours_and_the_conventions_differ():
    prof = _load("torch_cuda_cnn.pt.trace.json.gz")
    rows = tfprof.steps(prof)
    assert rows.equals(tfprof.steps(prof, "next", False, False, False)) and not set(UNLINKED) & set(rows.columns)
    marker, kernels = (tfprof.steps(prof, window=w) for w in ("marker", "kernels"))
    assert (marker["window_ns"] <= rows["window_ns"]).all() and not marker["window_ns"].equals(rows["window_ns"])
    assert (kernels["window_ns"] < rows["window_ns"]).all()
    assert tfprof.steps(prof, drop_last_step=True)["step"].to_list() == rows["step"].to_list()[:-1]


def test_hta_temporal_breakdown_on_a_public_trace():
    """HTA 0.5.0's ``get_temporal_breakdown`` on this file (one step: nothing to drop) gives
    kernel_time 117806 us, idle 17200 us, compute 98570 us; HTA reads whole us, rounded down."""
    rows = tfprof.steps(_load("kineto_resnet50_step6.pt.trace.json.gz"), window="kernels", drop_last_step=True,
                        total=True)
    r = rows.filter(pl.col("step").is_null()).row(0, named=True)
    assert (r["window_ns"] // 1000, r["idle_ns"] // 1000, r["compute_ns"] // 1000) == (117806, 17200, 98570)


@pytest.mark.parametrize("name", [*GPU, "kineto_mtia_train_slice.pt.trace.json.gz"])
def test_unlinked_time_per_reason(name):
    rows = tfprof.steps(_load(name), unlinked=True, total=True)
    events = _events(name) if name.endswith(".xplane.pb") else expect.load(FOREIGN / name)
    wins = [(r["step"], r["window_start_ns"], r["window_start_ns"] + r["window_ns"])
            for r in rows.unique("step", maintain_order=True).iter_rows(named=True)]
    got = _keyed(rows, UNLINKED)
    if name.startswith("kineto_mtia"):  # its device clock is shifted on reading: the whole trace only
        wins = [(None, 0, 2**62)]
        got = {k: v for k, v in got.items() if k[0] is None}
    want = expect.unlinked(events, wins)
    if name.endswith(".xplane.pb"):  # the raw XSpace events hold no ops to enclose a launch call
        got, want = ({k: v[:2] for k, v in d.items()} for d in (got, want))
    assert got == want
    if name.startswith("kineto_mtia"):  # its copies carry no correlation id
        assert all(v[0] > 0 for k, v in got.items() if k[0] is not None)
    if name.startswith("tf_gpu_bert"):  # one kernel launched before the capture
        assert sum(v[1] for k, v in got.items() if k[0] is None) > 0


def _trace(tmp_path: Path) -> Path:
    """Two steps on GPU 0: a kernel linked to an op, one with no correlation id, one whose launch
    call is not in the trace, one launched outside every op."""
    def span(name, cat, ts, dur, tid=1, **args):
        return {"ph": "X", "name": name, "cat": cat, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}

    def kernel(ts, dur, corr=None):
        args = {"device": 0, "stream": 7, **({} if corr is None else {"correlation": corr})}
        return {"ph": "X", "name": f"k{ts}", "cat": "kernel", "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}

    events = [span("ProfilerStep#1", "user_annotation", 100, 100), span("ProfilerStep#2", "user_annotation", 200, 100),
              span("aten::mm", "cpu_op", 110, 20), span("cudaLaunchKernel", "cuda_runtime", 115, 5, correlation=1),
              span("cudaLaunchKernel", "cuda_runtime", 210, 5, correlation=2),
              kernel(90, 30, None), kernel(130, 10, 1), kernel(150, 20, 99), kernel(230, 40, 2)]
    path = tmp_path / "small.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    return path


def test_each_reason_on_a_small_trace(tmp_path):
    path = _trace(tmp_path)
    rows = tfprof.steps(tfprof.load(path), unlinked=True, total=True)
    got = _keyed(rows, ("window_ns", *UNLINKED))
    # step 1 runs 100-200 us (the kernel at 90 us lies before it: in no step), step 2 200-300 us
    assert got == {(1, "0"): (100_000, 20_000, 20_000, 0), (2, "0"): (100_000, 0, 0, 40_000),
                   (None, "0"): (200_000, 20_000, 20_000, 40_000)}
    kernels = tfprof.steps(tfprof.load(path), window="kernels")  # only launched kernels shape a window
    assert _keyed(kernels, ("window_start_ns", "window_ns")) == {(1, "0"): (130_000, 10_000), (2, "0"): (230_000, 40_000)}


def test_tfprofs_own_profile_total_and_kernels_window():
    gpu = Path(__file__).parent / "fixtures" / "gpu_tiny"
    prof = tfprof.load(graph_path=str(gpu / "graph.pbtxt"), run_meta_path=str(gpu / "run_meta_0.pbtxt"))
    execs = prof.frame("execs").to_dicts()
    kernels = [(e["start_micros"] * 1000, (e["start_micros"] + e["duration_micros"]) * 1000) for e in execs
               if str(e["kind"]) == "accelerator"]
    rows = tfprof.steps(prof, window="kernels", total=True, unlinked=True)
    span = max(e for _, e in kernels) - min(s for s, _ in kernels)
    assert rows["window_ns"].to_list() == [span, span] and rows["step"].to_list()[1] is None
    assert rows["compute_ns"].to_list() == [sum(e - s for s, e in expect.merge(kernels))] * 2
    assert rows.select(UNLINKED).null_count().row(0) == (2, 2, 2)


def test_a_bad_window():
    from tfprof.api.breakdown import WINDOWS
    from tfprof.queries.advisor.trace import WINDOWS as DEFINED

    assert WINDOWS == DEFINED  # the command line's and the UI's check is the query's
    with pytest.raises(OptionError, match="--window steps: give one of next, marker, kernels"):
        tfprof.steps(_load("jax_cuda_mlp.xplane.pb"), window="steps")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfprof", "steps", *args], capture_output=True, text=True,
                          timeout=120)


def test_the_command(tmp_path):
    bad = _run(str(FOREIGN / "jax_cuda_mlp.xplane.pb"), "--window", "xprof")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == "Error: --window xprof: give one of next, marker, kernels\n"
    table = _run(str(_trace(tmp_path)), "--total", "--unlinked", "--window", "marker")
    assert table.returncode == 0, table.stderr
    head, *lines = table.stdout.splitlines()
    assert "unlinked: no correlation id" in head and "unlinked: launched outside any op" in head
    assert [line.split()[0] for line in lines] == ["1", "2", "total"]
    csv = _run(str(_trace(tmp_path)), "--drop-last-step", "--unlinked", "--format", "csv")
    assert csv.stdout.splitlines()[0].endswith(",".join(UNLINKED)) and len(csv.stdout.splitlines()) == 2


def test_the_ui_takes_the_same_options():
    from starlette.testclient import TestClient

    from tfprof.ui.app import make_app
    from tfprof.ui.guard import TOKEN_HEADER
    from tfprof.ui.profiles import Profiles

    trace = FOREIGN / "torch_cuda_cnn.pt.trace.json.gz"
    app = make_app(Profiles.load([str(trace)]))
    client = TestClient(app, base_url="http://127.0.0.1:8765", headers={TOKEN_HEADER: app.state.token})
    answer = client.get("/api/steps/0?window=kernels&drop_last_step=1&total=1&unlinked=1")
    assert answer.status_code == 200
    rows = tfprof.steps(_load(trace.name), "kernels", True, True, True)
    assert answer.json()["rows"] == json.loads(rows.write_json()) and "\ntotal " in answer.json()["text"]
    for bad in ("window=xprof", "total=yes"):
        assert client.get(f"/api/steps/0?{bad}").status_code == 400

"""One definition per figure: on every GPU trace we hold, each page and command that shows a
step's length, a GPU's busy or idle time or its utilization shows the same number — ``tfprof
steps`` (``tfprof.queries.breakdown``), the overview (text and the UI's ``/api/overview``), the
UI's ``/api/steps``, and the advisor's AcceleratorUtilizationChecker, GpuIdleChecker and
LaunchQueueChecker (evidence and text). TensorFlow-only lines print for TensorFlow's traces only."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import polars as pl
import pytest
from starlette.testclient import TestClient

import tfprof
from tfprof.api import advise
from tfprof.api.overview import findings, overview, overview_report
from tfprof.queries.advisor.framework import framework
from tfprof.ui.app import make_app
from tfprof.ui.guard import TOKEN_HEADER
from tfprof.ui.profiles import Profiles

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
TRACES = sorted(p.name for p in FOREIGN.iterdir() if p.name.endswith((".json.gz", ".json", ".xplane.pb")))
# the captures with accelerator work (the others are CPU captures: no GPU figure to compare)
GPU_TRACES = ["jax_cuda_mlp.xplane.pb", "jax_cuda_mlp_thunks.xplane.pb", "kineto_alexnet.pt.trace.json.gz",
              "kineto_ddp_nccl_step5.pt.trace.json.gz", "kineto_mi250_rocm.pt.trace.json.gz",
              "kineto_mtia_train_slice.pt.trace.json.gz", "kineto_resnet50_step6.pt.trace.json.gz",
              "tf_gpu_bert_slice.xplane.pb", "torch_cuda_cnn.pt.trace.json.gz",
              "torch_cuda_compiled_transformer.pt.trace.json.gz", "torch_cuda_transformer.pt.trace.json.gz"]


@pytest.fixture(scope="module", params=GPU_TRACES)
def traced(request):
    prof = tfprof.load(FOREIGN / request.param)
    return request.param, prof, tfprof.steps(prof)


def test_every_capture_with_gpu_work_is_compared():
    """A new fixture with accelerator work joins GPU_TRACES (its raw file has device events)."""
    device_event = re.compile(rb'"cat":\s*"(?i:kernel|gpu_memcpy|gpu_memset|mtia_ccp_events)"|/device:GPU:')

    def has_gpu(name):
        import gzip
        raw = (FOREIGN / name).read_bytes()
        return device_event.search(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw) is not None
    assert [n for n in TRACES if has_gpu(n)] == GPU_TRACES


def _per_device(rows: pl.DataFrame) -> dict[str, float]:
    """Each GPU's busy share over the steps, from ``tfprof steps``' rows."""
    out = {}
    for part in rows.filter(pl.col("device").is_not_null()).partition_by("device"):
        window = part["window_ns"].sum()
        out[part["device"][0]] = (window - part["idle_ns"].sum()) / window
    return out


def test_the_advisor_reads_the_steps_definitions(traced):
    name, prof, rows = traced
    found = advise(prof)
    steps = {(r["step"], r["device"]): r for r in rows.iter_rows(named=True) if r["device"] is not None}
    idle = found.evidence["GpuIdleChecker"]
    assert {(r["step"], r["device"]): (r["window_ns"], r["idle_ns"]) for r in idle.iter_rows(named=True)} \
        == {k: (r["window_ns"], r["idle_ns"]) for k, r in steps.items()}
    queue = found.evidence["LaunchQueueChecker"]
    for r in queue.iter_rows(named=True):
        assert r["idle_ns"] == steps[(r["step"], r["device"])]["idle_ns"]
        assert 0 <= r["bound_idle_ns"] <= r["idle_ns"]
    util = found.evidence["AcceleratorUtilizationChecker"]
    want = _per_device(rows)
    got = {d.removeprefix("/device:gpu:"): u for d, u in zip(util["device"], util["utilization"], strict=True)}
    assert got.keys() == want.keys() and all(abs(got[d] - want[d]) < 1e-12 for d in want)
    assert all(0.0 <= u <= 1.0 for u in got.values())
    text = found.text
    for d, u in want.items():  # the text says the same number
        assert re.search(rf"device: /device:gpu:{d} (low )?utilization: {u:.2f}\n", text), (name, text)
    if framework(prof) != "tensorflow":  # TensorFlow's advice only for TensorFlow's traces
        assert "\nOperationChecker:" not in text and "TensorFlow" not in text


def test_the_overview_shows_the_steps_numbers(traced):
    name, prof, rows = traced
    o = overview(prof)
    assert o["steps"] == rows.select("step", "device", "window_ns", "utilization").to_dicts()
    windows = dict(zip(rows["step"], rows["window_ns"], strict=True))
    assert o["step_count"] == len(windows) and o["step_window_ns"] == round(statistics.median(windows.values()))
    assert "trainable variables" not in o["facts"] and "trainable parameters" not in o["facts"]
    text = overview_report(o, findings(prof))
    for r in rows.iter_rows(named=True):
        assert f"{100 * r['utilization']:.1f}% busy" in text
    assert "trainable" not in text
    if framework(prof) != "tensorflow":
        assert "\nOperationChecker:" not in text
    head = text.splitlines()[0]
    assert head.startswith(f"{prof.source}, {len(windows)} step") and "summed over threads and devices" in head


def test_the_ui_pages_show_the_same_numbers(traced):
    name, prof, rows = traced
    app = make_app(Profiles.load([str(FOREIGN / name)]))
    client = TestClient(app, base_url="http://127.0.0.1:8765", headers={TOKEN_HEADER: app.state.token})
    pid = client.get("/api/profiles").json()["profiles"][0]["id"]
    page = client.get(f"/api/steps/{pid}").json()["rows"]
    assert [(r["step"], r["device"], r["window_ns"], r["idle_ns"]) for r in page] \
        == list(rows.select("step", "device", "window_ns", "idle_ns").iter_rows())
    landing = client.get(f"/api/overview/{pid}").json()
    assert [(r["step"], r["device"], r["window_ns"]) for r in landing["steps"]] \
        == list(rows.select("step", "device", "window_ns").iter_rows())
    assert landing["step_window_ns"] == overview(prof)["step_window_ns"]
    advice = {c["name"]: c for c in client.get(f"/api/advice/{pid}").json()["checkers"]}
    assert ("OperationChecker" in advice) == (framework(prof) == "tensorflow")
    assert advice["AcceleratorUtilizationChecker"]["reports"] == list(
        advise(prof).proto.checkers["AcceleratorUtilizationChecker"].reports)

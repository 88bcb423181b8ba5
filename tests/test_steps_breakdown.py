"""``tfprof steps`` / ``tfprof.steps``: each step's time per GPU in parts that add up to it, held
against ``advisor_gpu_expect.breakdown`` (the raw JSON with ``json``, the XSpace with protobuf, and
plain loops) on real GPU captures, and against the RunMetadata's own intervals for tfprof's own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import advisor_gpu_expect as expect
import pytest

import tfprof

FIXTURES = Path(__file__).parent / "fixtures"
GPU = ["kineto_resnet50_step6.pt.trace.json.gz", "kineto_ddp_nccl_step5.pt.trace.json.gz",
       "kineto_alexnet.pt.trace.json.gz", "tf_gpu_bert_slice.xplane.pb", "torch_cuda_cnn.pt.trace.json.gz",
       "torch_cuda_compiled_transformer.pt.trace.json.gz", "jax_cuda_mlp.xplane.pb"]
PARTS = ("window_ns", "compute_ns", "communication_ns", "memcpy_ns", "idle_ns", "communication_total_ns",
         "overlapped_ns")


@pytest.mark.parametrize("name", GPU)
def test_the_parts_are_the_raw_files_and_add_up_to_the_step(name):
    rows = tfprof.steps(tfprof.load(FIXTURES / "foreign" / name))
    want = expect.breakdown(expect.load(FIXTURES / "foreign" / name))
    got = {(r["step"], r["device"]): tuple(r[c] for c in PARTS) for r in rows.iter_rows(named=True)}
    assert got == want and want
    for r in rows.iter_rows(named=True):
        assert r["compute_ns"] + r["communication_ns"] + r["memcpy_ns"] + r["idle_ns"] == r["window_ns"]
        assert r["utilization"] == pytest.approx(1 - r["idle_ns"] / r["window_ns"])


def test_communication_hidden_by_compute_on_a_ddp_step():
    rows = tfprof.steps(tfprof.load(FIXTURES / "foreign" / "kineto_ddp_nccl_step5.pt.trace.json.gz"))
    r = rows.row(0, named=True)
    assert 0 < r["overlapped_ns"] < r["communication_total_ns"]
    assert r["communication_ns"] == r["communication_total_ns"] - r["overlapped_ns"]


def test_tfprofs_own_run_metadata():
    """A GPU RunMetadata: the step runs from its first execution's start to its last one's end
    (tfprof's executions, ``execs``, held against the real tool elsewhere); the GPU is busy while
    an accelerator execution runs (``stream:all`` and ``stream:7`` hold the same kernel: once)."""
    gpu = FIXTURES / "gpu_tiny"
    prof = tfprof.load(graph_path=str(gpu / "graph.pbtxt"), run_meta_path=str(gpu / "run_meta_0.pbtxt"))
    rows = tfprof.steps(prof)
    assert rows.height == 1 and rows["device"].to_list() == ["0"]
    r = rows.row(0, named=True)
    execs = prof.frame("execs").to_dicts()
    spans = [(e["start_micros"], e["start_micros"] + e["duration_micros"]) for e in execs]
    kernels = sorted((e["start_micros"], e["start_micros"] + e["duration_micros"]) for e in execs
                     if str(e["kind"]) == "accelerator")
    assert kernels and r["window_ns"] == (max(e for _, e in spans) - min(s for s, _ in spans)) * 1000
    assert r["compute_ns"] == sum(e - s for s, e in expect.merge(kernels)) * 1000
    assert r["idle_ns"] == r["window_ns"] - r["compute_ns"] > 0


def test_the_command_prints_the_parts_and_a_cpu_capture_its_step_times():
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tfprof", "steps", *args], capture_output=True, text=True,
                              timeout=120)

    proc = run(str(FIXTURES / "foreign" / "kineto_ddp_nccl_step5.pt.trace.json.gz"))
    assert proc.returncode == 0, proc.stderr
    head, line = proc.stdout.splitlines()
    assert head.split()[:4] == ["step", "device", "step", "time"] and "comm hidden by compute" in head
    assert line.startswith("5     gpu:0   219.73ms") and "1.76ms of 12.30ms (14.3%)" in line
    cpu = run(str(tfprof.sample_path("torch")))
    assert cpu.returncode == 0 and cpu.stdout.endswith("no accelerator work in this profile: step times only\n")
    csv = run(str(FIXTURES / "foreign" / "tf_gpu_bert_slice.xplane.pb"), "--format", "csv")
    assert csv.stdout.splitlines()[0].startswith("step,device,window_start_ns,window_ns,compute_ns")

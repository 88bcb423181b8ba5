"""Our own GPU captures (``tools/capture_foreign.py torch-gpu`` / ``jax-gpu`` on an H200;
tests/fixtures/foreign/README.md): a typical PyTorch loop (batches copied from pageable memory, the
loss read back with ``.item()``), eager and under ``torch.compile``, and a jitted JAX step whose
kernels XLA runs as one CUDA graph.

The advisor's GPU checks are held against ``advisor_gpu_expect`` (the raw JSON with ``json``), and
the JAX kernels' HLO instructions against ``foreign_expect_gpu.xspace_hlo_kernels`` (protobuf and a
wire walk of the HLO protos): neither shares code with the readers.
"""

from __future__ import annotations

from pathlib import Path

import advisor_gpu_expect as expect
import polars as pl
import pytest
from foreign_expect_gpu import kineto_gpu_expect, xspace_hlo_kernels
from test_foreign_ingest import cli

import tfprof
from tfprof.api import advise, run_view

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
TORCH = ["torch_cuda_cnn.pt.trace.json.gz", "torch_cuda_transformer.pt.trace.json.gz",
         "torch_cuda_compiled_transformer.pt.trace.json.gz"]
JAX = FOREIGN / "jax_cuda_mlp.xplane.pb"
JAX_THUNKS = FOREIGN / "jax_cuda_mlp_thunks.xplane.pb"  # command buffers off: each kernel's hlo_op is its own


@pytest.fixture(scope="module", params=TORCH)
def torch_capture(request):
    path = FOREIGN / request.param
    return advise(tfprof.load(path)), expect.load(path)


def test_a_typical_loops_copies_and_syncs_are_found(torch_capture):
    result, events = torch_capture
    pageable = result.evidence["PageableCopyChecker"]
    want = expect.pageable(events)
    assert {r["name"]: (r["count"], r["total_ns"], r["bytes"]) for r in pageable.iter_rows(named=True)} == want
    assert want["Memcpy HtoD (Pageable -> Device)"][0] == 4  # a batch and its targets, in each of the 2 steps
    syncs = result.evidence["HostSyncChecker"]
    got = {s: (sum(syncs.filter(syncs["step"] == s)["outer_count"]), sum(syncs.filter(syncs["step"] == s)["outer_ns"]))
           for s in set(syncs["step"])}
    assert got == expect.syncs(events) and set(got) == {2, 3}  # `.item()` in every step


def test_idle_short_kernels_and_launch_queue_are_the_raw_files(torch_capture):
    result, events = torch_capture
    idle = result.evidence["GpuIdleChecker"]
    assert {(r["step"], r["device"]): (r["window_ns"], r["idle_ns"]) for r in idle.iter_rows(named=True)} == \
        expect.idle(events)
    short = result.evidence["KernelLaunchChecker"]
    assert dict(zip(short["name"], zip(short["short_kernels"], short["launched"], strict=True), strict=True)) == \
        expect.short_kernels(events)
    queue = result.evidence["LaunchQueueChecker"]
    assert {(r["step"], r["device"]): (r["ops"], r["bound_ops"], r["bound_ns"]) for r in queue.iter_rows(named=True)} \
        == expect.launch_bound(events)


def test_a_compiled_regions_kernels_go_to_the_ops_that_launched_them():
    """Under torch.compile, Inductor's Triton kernels are launched through the driver (`cuLaunchKernel`)
    from inside `Torch-Compiled Region: 0/0`: every one links, and the region is one scope, not two."""
    path = FOREIGN / TORCH[2]
    want = kineto_gpu_expect(path)
    prof = tfprof.load(path)
    assert want["unlinked"] == 0 and prof.frame("kernels")["node_id"].null_count() == 0
    names = prof.frame("nodes")["name"]
    assert names.str.contains("Torch-Compiled Region: 0∕0", literal=True).any()
    assert not names.str.contains("Torch-Compiled Region: 0/", literal=True).any()
    assert any(op.startswith("triton_") for op in want["accelerator_ns_by_op"])


# ---------------------------------------------------------------- JAX


@pytest.fixture(scope="module")
def jax_prof():
    return tfprof.load(JAX)


@pytest.mark.parametrize("path", [JAX, JAX_THUNKS], ids=["command_buffer", "thunks"])
def test_each_jax_kernel_is_the_hlo_instruction_it_ran(path):
    """By default XLA runs the whole step as one CUDA graph: every kernel's `hlo_op` names the command
    buffer, and the kernel's own name the instruction (`gemm_fusion_dot_general_5` ran
    `gemm_fusion_dot_general.5`); without command buffers `hlo_op` names the instruction. Either way
    each kernel is an execution of that instruction's node, under its JAX name scope."""
    jax_prof = tfprof.load(path)
    want = xspace_hlo_kernels(path)
    assert want["gpu_events"] == 30 and want["unresolved"] == 0
    kernels = jax_prof.frame("kernels")
    assert kernels.height == want["gpu_events"] and kernels["node_id"].null_count() == 0
    got = jax_prof.sql("SELECT n.name::VARCHAR AS name, n.op::VARCHAR AS op, count(*) AS runs, "
                       "sum(e.duration_ns)::BIGINT AS ns FROM execs e JOIN nodes n USING (node_id) "
                       "WHERE e.kind = 'accelerator' GROUP BY ALL")
    assert {r["name"]: (r["runs"], r["ns"]) for r in got.iter_rows(named=True)} == want["by_path"]
    assert {r["name"]: r["op"] for r in got.iter_rows(named=True)} == want["opcode"]
    assert len(want["by_path"]) == 10  # the step's ten fusions
    assert jax_prof.frame("validation").filter(pl.col("code").cast(str) == "unlinked_gpu_event").height == 0


def test_jax_gpu_time_ranks_in_the_scope_and_op_views(jax_prof):
    want = xspace_hlo_kernels(JAX)["by_path"]
    total = sum(ns for _, ns in want.values())
    steps = jax_prof.frame("steps")["step"].to_list()
    assert steps == [1, 2, 3]
    root = 0
    for step in steps:
        frame = run_view(jax_prof, "scope", {"step": step, "max_depth": 1, "select": ["accelerator_micros"]}).frame
        root += round(frame.row(0, named=True)["total_accelerator_exec_micros"] * 1000)
    assert root == total
    scope = run_view(jax_prof, "scope", {"max_depth": 4, "select": ["accelerator_micros"],
                                         "order_by": "accelerator_micros"}).text
    assert "jit(train_step)/jvp(loss)/mlp " in scope and "jit(train_step)/sgd " in scope
    op = run_view(jax_prof, "op", {"select": ["accelerator_micros"], "order_by": "accelerator_micros"}).frame
    assert op.filter(pl.col("accelerator_exec_micros") > 0)["name"].to_list() == ["fusion"]


def test_a_jax_capture_is_not_taken_for_tensorflow(jax_prof):
    """JAX's own host events are named `<what>:<detail>` too (`ThenExecuteCallback:GetEventForComputeStreamSyncPoint`,
    display name the detail), as TensorFlow names its ops; the metadata plane's `jax_version` says which."""
    assert jax_prof.frame("info")["framework"].to_list() == ["jax"]
    assert not jax_prof.frame("nodes")["name"].str.contains("ThenExecuteCallback").any()
    proc = cli("advise", str(JAX), "--checkers", "OperationChecker")
    assert proc.returncode == 0, proc.stderr
    assert "OperationChecker:\nskipped: a check for TensorFlow profiles; this profile is from JAX" in proc.stdout


def test_jax_steps_are_its_step_annotations():
    rows = tfprof.steps(tfprof.load(JAX))
    assert rows["step"].to_list() == [1, 2, 3] and rows["device"].to_list() == ["0"] * 3
    want = expect.breakdown(expect.load(JAX))
    got = {(r["step"], r["device"]): r["compute_ns"] for r in rows.iter_rows(named=True)}
    assert got == {k: v[1] for k, v in want.items()}

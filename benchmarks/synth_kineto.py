"""A synthetic PyTorch (Kineto) GPU trace: one step of about ``--events`` slices, shaped like a
real one (``tests/fixtures/foreign/kineto_resnet50_step6.pt.trace.json.gz``).

Each CPU thread runs ops back to back under ``ProfilerStep#1``: an ``aten::linear`` holding an
``aten::addmm`` holding a ``cudaLaunchKernel``, whose kernel runs on one of the GPU streams (a
flow from the launch to the kernel, joined by its correlation id). Times are whole µs, as
Kineto writes them.

    python benchmarks/synth_kineto.py --events 1000000 --out /tmp/k.pt.trace.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

T0 = 1_700_000_000_000_000  # µs since the epoch


def write_kineto(path: str | Path, events: int, threads: int = 8, streams: int = 4, seed: int = 0) -> int:
    """Write the trace (module docstring) to ``path``; returns the number of slices."""
    rng = np.random.default_rng(seed)
    groups = max(1, (events - 1) // 4)  # four slices a group: op, child op, launch, kernel
    thread = np.arange(groups) % threads
    span = rng.integers(8, 40, groups)  # the op's µs
    # each thread's ops back to back, one µs apart
    start = np.zeros(groups, np.int64)
    for t in range(threads):
        mine = thread == t
        start[mine] = T0 + 10 + np.concatenate([[0], np.cumsum(span[mine] + 1)[:-1]])
    kernel_dur = rng.integers(2, 30, groups)
    stream = np.arange(groups) % streams
    # each stream's kernels after their launch and after the stream's previous kernel
    kernel_start = np.zeros(groups, np.int64)
    order = np.argsort(start + 3, kind="stable")
    free = np.zeros(streams, np.int64)
    for g in order:
        s = stream[g]
        kernel_start[g] = max(start[g] + 6, free[s])
        free[s] = kernel_start[g] + kernel_dur[g]
    end = int(max(kernel_start.max() + kernel_dur.max(), (start + span).max())) + 5
    out = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
           {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
           *({"ph": "M", "name": "thread_name", "pid": 1, "tid": t + 1, "args": {"name": f"thread {t + 1}"}}
             for t in range(threads)),
           *({"ph": "M", "name": "thread_name", "pid": 0, "tid": s + 7, "args": {"name": f"stream {s + 7}"}}
             for s in range(streams)),
           {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": T0, "dur": end - T0}]
    for g in range(groups):
        s, d, tid, corr = int(start[g]), int(span[g]), int(thread[g]) + 1, 100_000 + g
        out += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": tid, "ts": s, "dur": d,
             "args": {"External id": corr}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": tid, "ts": s + 1, "dur": d - 2,
             "args": {"External id": corr}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid, "ts": s + 2, "dur": 3,
             "args": {"correlation": corr, "external id": corr}},
            {"ph": "X", "cat": "kernel", "name": f"gemm_kernel_{g % 13}", "pid": 0, "tid": int(stream[g]) + 7,
             "ts": int(kernel_start[g]), "dur": int(kernel_dur[g]),
             "args": {"device": 0, "stream": int(stream[g]) + 7, "correlation": corr, "external id": corr}},
            {"ph": "s", "id": corr, "pid": 1, "tid": tid, "ts": s + 2, "cat": "ac2g", "name": "launch"},
            {"ph": "f", "id": corr, "pid": 0, "tid": int(stream[g]) + 7, "ts": int(kernel_start[g]), "cat": "ac2g",
             "name": "launch", "bp": "e"},
        ]
    trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85_000_000_000}],
             "traceEvents": out}
    Path(path).write_text(json.dumps(trace, separators=(",", ":")))
    return 1 + 4 * groups


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    n = write_kineto(args.out, args.events)
    print(f"wrote {args.out}: {n:,} slices in one step")


if __name__ == "__main__":
    main()


def write_job(folder: str | Path, ranks: int, *, steps: int = 4, straggler: int | None = None, late_us: int = 2000,
              step_us: int = 10_000) -> list[Path]:
    """A synthetic distributed CPU job: one trace per rank (``rank-N.pt.trace.json``, with
    ``distributedInfo``), ``steps`` steps of ``step_us`` each. In every step a rank computes
    (``aten::mm``), then waits in ``gloo:all_reduce`` (on a gloo thread) until every rank has
    joined: rank ``straggler`` computes ``late_us`` longer, so the others wait that much more.
    Rank r's compute also varies by r % 5 µs. Returns the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    compute = [4000 + r % 5 + (late_us if r == straggler else 0) for r in range(ranks)]
    done = max(compute)  # the collective ends when the last rank has joined (plus its own 100 µs)
    out = []
    for r in range(ranks):
        events = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thread 1 (python)"}},
                  {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "thread 2 (pt_gloo_runloop)"}}]
        for s in range(steps):
            t0 = T0 + s * step_us
            events += [
                {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t0,
                 "dur": step_us - 1},
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t0 + 1, "dur": compute[r]},
                {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": t0 + 1 + compute[r],
                 "dur": 1},
                {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 2,
                 "ts": t0 + 1 + compute[r], "dur": done - compute[r] + 100},
            ]
        trace = {"schemaVersion": 1, "distributedInfo": {"backend": "gloo", "rank": r, "world_size": ranks},
                 "traceEvents": events}
        path = folder / f"rank-{r}.pt.trace.json"
        path.write_text(json.dumps(trace, separators=(",", ":")))
        out.append(path)
    return out


def write_gpu_job(folder: str | Path, ranks: int, *, steps: int = 3, straggler: int | None = None,
                  late_us: int = 3000, step_us: int = 20_000) -> list[Path]:
    """A synthetic distributed GPU job: one Kineto trace per rank (``rank-N.pt.trace.json``, with
    ``distributedInfo``). Each step, ``aten::mm`` launches a compute kernel on stream 7 and
    ``nccl:all_reduce`` an ``ncclKernel_AllReduce`` right after it, which runs until every
    rank's compute is done (plus 200 µs): rank ``straggler`` computes ``late_us`` longer, so the
    others' all-reduce waits that much more. Rank r's compute also varies by r % 3 µs."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    compute = [6000 + r % 3 + (late_us if r == straggler else 0) for r in range(ranks)]
    done = max(compute)
    out = []
    for r in range(ranks):
        events = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}]
        for s in range(steps):
            t0, corr = T0 + s * step_us, 1000 * (s + 1)
            kernels = [("aten::mm", f"sm80_xmma_gemm_{r % 2}", 10, compute[r]),
                       ("nccl:all_reduce", "ncclKernel_AllReduce_RING_LL_Sum_float", 10 + compute[r],
                        done - compute[r] + 200)]
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1,
                           "ts": t0, "dur": step_us - 1})
            for k, (op, kernel, at, dur) in enumerate(kernels):
                c, launch = corr + k, t0 + 2 + 4 * k
                events += [
                    {"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": launch - 1, "dur": 3,
                     "args": {"External id": c}},
                    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": launch,
                     "dur": 1, "args": {"correlation": c, "external id": c}},
                    {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": t0 + at, "dur": dur,
                     "args": {"device": 0, "stream": 7, "correlation": c, "external id": c}},
                    {"ph": "s", "id": c, "pid": 1, "tid": 1, "ts": launch, "cat": "ac2g", "name": "launch"},
                    {"ph": "f", "id": c, "pid": 0, "tid": 7, "ts": t0 + at, "cat": "ac2g", "name": "launch", "bp": "e"},
                ]
        trace = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": r, "world_size": ranks},
                 "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85_000_000_000}],
                 "traceEvents": events}
        path = folder / f"rank-{r}.pt.trace.json"
        path.write_text(json.dumps(trace, separators=(",", ":")))
        out.append(path)
    return out

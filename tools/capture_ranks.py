"""Capture a real distributed PyTorch job on this machine's CPU: ``--ranks`` processes joined by
torch.distributed's gloo backend train a small model with DistributedDataParallel, each under
torch.profiler, and write one Kineto trace per rank (``rank-N.pt.trace.json.gz``). One rank
(``--slow-rank``) does extra matrix work before each step, so the others wait for it in the
gradient all-reduce: a straggler, as a slow GPU or a busy host makes one.

    pip install 'torch==2.13.0+cpu' --index-url https://download.pytorch.org/whl/cpu
    python tools/capture_ranks.py --ranks 4 --out tests/fixtures/ranks/gloo4

The traces record ``distributedInfo`` (rank, world size, backend), ``ProfilerStep#N`` markers and
the collectives (``gloo:all_reduce``, ``c10d::allreduce_``) as CPU ops.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
from pathlib import Path


def _worker(rank: int, world: int, out: str, slow_rank: int, steps: int, port: int) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data, extra = torch.randn(64, 256), torch.randn(512, 512)
    trace = Path(out) / f"rank-{rank}.pt.trace.json"

    def ready(p) -> None:
        p.export_chrome_trace(str(trace))

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=steps),
                 on_trace_ready=ready) as prof:
        for _ in range(steps + 2):
            if rank == slow_rank:
                with record_function("extra_work"):
                    for _ in range(10):
                        extra = torch.tanh(extra @ extra / 512)
            loss = model(data).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()
    with open(trace, "rb") as src, gzip.open(f"{trace}.gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    trace.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--slow-rank", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3, help="profiled steps (after one waited and one warm-up)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--port", type=int, default=29517)
    args = ap.parse_args()
    import torch.multiprocessing as mp

    Path(args.out).mkdir(parents=True, exist_ok=True)
    mp.spawn(_worker, args=(args.ranks, args.out, args.slow_rank, args.steps, args.port), nprocs=args.ranks)
    for path in sorted(Path(args.out).glob("rank-*.pt.trace.json.gz")):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()

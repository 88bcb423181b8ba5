"""Capture tests/fixtures/foreign/torch_ops.pt.trace.json.gz: a PyTorch training step that runs the
ops whose FLOPs tfprof estimates by TensorFlow's element-wise, reduction and pooling rules
(docs/FOREIGN.md, "FLOPs"): adaptive average and max pooling (one size that divides the input, one
that does not) and their backward ops, maximum/minimum, rsqrt, square, log, reciprocal, neg, pow,
comparisons and argmax.

    ~/.cache/tfprof-capture/torch/bin/python tools/capture_torch_ops.py [OUT_DIR]

The environment is tools/capture_foreign.py's (torch 2.13.0, the CPU wheel). Options: `record_shapes`
only (no stacks, modules or memory: the file stays small), the same schedule as
capture_foreign's (`wait=1, warmup=1, active=2`, 4 steps). Timings are real: a re-capture never
gives the same bytes, and tests compute what they expect from whatever file is committed.
"""

from __future__ import annotations

import gzip
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "foreign"
NAME = "torch_ops.pt.trace.json.gz"


def capture(out: Path) -> Path:
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)

    class OpsNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.head = nn.Linear(8 * 7 * 7 + 8 * 5 * 5, 10)

        def forward(self, x):
            y = self.conv(x)  # 14 x 14
            a, b = F.adaptive_avg_pool2d(y, 7), F.adaptive_max_pool2d(y, 7)  # windows of 2 x 2
            c = F.adaptive_avg_pool2d(y, 5)  # 14 is no multiple of 5: windows of 3 and 4
            z = torch.maximum(a, b) - torch.minimum(a, b) + torch.rsqrt(b.square() + 1) * torch.log(a.square() + 1)
            z = z + torch.reciprocal(a.abs() + 1) + torch.neg(b).pow(2) + (a > b) * (a <= 0.5)
            return self.head(torch.cat([z.flatten(1), c.flatten(1)], 1))

    model, x, target = OpsNet(), torch.randn(4, 3, 14, 14), torch.randint(0, 10, (4,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_step():
        opt.zero_grad()
        out = model(x)
        F.cross_entropy(out, target).backward()
        opt.step()
        with torch.no_grad():
            (out.argmax(1) == target).float().mean()  # accuracy

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(trace)), record_shapes=True) as prof:
            for _ in range(4):
                train_step()
                prof.step()
        dst = out / NAME
        # gzip without a file name or time stamp in the header
        with open(dst, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            gz.write(trace.read_bytes())
    return dst


if __name__ == "__main__":
    path = capture(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
    print(f"{path}  {path.stat().st_size} bytes")

"""Capture real foreign profiles into tests/fixtures/foreign/: Kineto JSON from torch.profiler,
XSpace (.xplane.pb) from jax.profiler and from TensorFlow 2's profiler.

Each framework lives in its own virtual environment outside the repository, never the project's:

    python -m venv ~/.cache/tfprof-capture/torch
    ~/.cache/tfprof-capture/torch/bin/pip install 'torch==2.13.0'      # the CPU wheel; never unpinned
    python -m venv ~/.cache/tfprof-capture/jax
    ~/.cache/tfprof-capture/jax/bin/pip install jax jaxlib
    /work/shared/tools/tfprof-reference setup                          # TensorFlow 2 (reference venv)

Then, from the repository root, either one capture with that environment's interpreter:

    ~/.cache/tfprof-capture/torch/bin/python tools/capture_foreign.py torch
    ~/.cache/tfprof-capture/jax/bin/python tools/capture_foreign.py jax
    /work/shared/tools/tfprof-reference python tools/capture_foreign.py tf2

or all three (the interpreters above are the defaults; --torch-python etc. override them):

    python tools/capture_foreign.py all

On a machine with a CUDA GPU (its own torch and jax installs), the GPU captures, one at a time:

    python3 tools/capture_foreign.py torch-gpu     # torch_cuda_{cnn,transformer,compiled_transformer}
    python3 tools/capture_foreign.py jax-gpu       # jax_cuda_mlp.xplane.pb
    python3 tools/capture_foreign.py jax-gpu-thunks   # jax_cuda_mlp_thunks.xplane.pb: no command buffers

Captures use fixed seeds, one thread where the framework allows it and small models, so each file
stays well under 2 MB. Timings are real, so a re-capture never reproduces the bytes; tests compare
readers with tests/foreign_expect.py computed from whatever file is committed.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "foreign"
CACHE = Path.home() / ".cache" / "tfprof-capture"
STEPS = 4  # torch: 1 wait + 1 warmup + 2 active; jax and tf2: 1 warm-up/compile step + 3 traced


def _write_gzip(src: Path, dst: Path) -> None:
    """Gzip without a file name or time stamp in the header, so the same JSON gives the same bytes."""
    with open(dst, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(src.read_bytes())


# ---------------------------------------------------------------- PyTorch (Kineto Chrome trace)


def _torch_models():
    import torch
    from torch import nn

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            )
            self.classifier = nn.Linear(16, 10)

        def forward(self, x):
            return self.classifier(torch.flatten(self.features(x), 1))

    class Block(nn.Module):
        """A pre-norm transformer block written out: attention then MLP, each with a residual."""

        def __init__(self, dim=32, heads=4):
            super().__init__()
            self.heads = heads
            self.norm1 = nn.LayerNorm(dim)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def attention(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            weights = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
            return self.proj((weights @ v).transpose(1, 2).reshape(b, t, d))

        def forward(self, x):
            x = x + self.attention(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class TinyTransformer(nn.Module):
        def __init__(self, vocab=50, dim=32):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.block = Block(dim)
            self.head = nn.Linear(dim, vocab)

        def forward(self, tokens):
            return self.head(self.block(self.embed(tokens)))

    return SmallCNN, TinyTransformer


def _torch_run(model, batch, target, trace: Path, device: str = "cpu") -> None:
    """Train ``model`` for STEPS steps under torch.profiler. On a GPU the loop is a typical one: each
    batch is copied from (pageable) host memory and the loss is read back with ``.item()``, so the
    trace holds host-to-device copies and a host-device sync beside the kernels."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    gpu = device != "cpu"

    def train_step():
        x, y = (batch.to(device), target.to(device)) if gpu else (batch, target)
        opt.zero_grad()
        out = model(x)
        loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        if gpu:
            loss.item()

    with profile(
        activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if gpu else [])],
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(trace)),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        with_modules=True,
    ) as prof:
        for _ in range(STEPS):
            train_step()
            prof.step()


def capture_torch(out: Path) -> list[Path]:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    cnn_cls, transformer_cls = _torch_models()
    with tempfile.TemporaryDirectory() as tmp:
        cnn_json = Path(tmp) / "torch_cnn.pt.trace.json"
        _torch_run(cnn_cls(), torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,)), cnn_json)
        tr_json = Path(tmp) / "torch_transformer.pt.trace.json"
        _torch_run(transformer_cls(), torch.randint(0, 50, (2, 8)), torch.randint(0, 50, (2, 8)), tr_json)
        written = [out / "torch_cnn.pt.trace.json", out / "torch_transformer.pt.trace.json.gz"]
        shutil.copyfile(cnn_json, written[0])
        _write_gzip(tr_json, written[1])
    return written


def capture_torch_gpu(out: Path) -> list[Path]:
    """The same two models on CUDA GPU 0 (CPU and CUDA activities), and the transformer once more
    under ``torch.compile`` (Inductor's Triton kernels, run inside ``Torch-Compiled Region``);
    compiled in the schedule's first steps, before the recorded ones."""
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("torch-gpu needs a CUDA GPU: torch.cuda.is_available() is False")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.backends.cudnn.benchmark = False
    cnn_cls, transformer_cls = _torch_models()
    models = [
        ("torch_cuda_cnn", lambda: cnn_cls(), lambda: (torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,)))),
        ("torch_cuda_transformer", lambda: transformer_cls(),
         lambda: (torch.randint(0, 50, (2, 8)), torch.randint(0, 50, (2, 8)))),
        ("torch_cuda_compiled_transformer", lambda: torch.compile(transformer_cls().cuda()),
         lambda: (torch.randint(0, 50, (2, 8)), torch.randint(0, 50, (2, 8)))),
    ]
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, data in models:
            trace = Path(tmp) / f"{name}.pt.trace.json"
            _torch_run(make().cuda(), *data(), trace, device="cuda")
            written.append(out / f"{name}.pt.trace.json.gz")
            _write_gzip(trace, written[-1])
    return written


# ---------------------------------------------------------------- JAX (XSpace)


def _only_xplane(logdir: Path, dst: Path) -> Path:
    """Profilers write <logdir>/plugins/profile/<run>/<host>.xplane.pb; copy the single one found."""
    found = sorted(logdir.rglob("*.xplane.pb"))
    if len(found) != 1:
        raise SystemExit(f"expected one .xplane.pb under {logdir}, found {[str(p) for p in found]}")
    shutil.copyfile(found[0], dst)
    return dst


def capture_jax(out: Path, platform: str = "cpu", name: str = "jax_mlp.xplane.pb") -> list[Path]:
    if platform == "cpu":
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    else:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # a small model: no 75% of the GPU
    os.environ.setdefault("JAX_PLATFORMS", platform)
    import jax
    import jax.numpy as jnp
    import numpy as np

    def dense(params, x, name):
        with jax.named_scope(name):
            return x @ params["w"] + params["b"]

    def mlp(params, x):
        with jax.named_scope("mlp"):
            h = jax.nn.relu(dense(params["hidden"], x, "hidden"))
            return dense(params["out"], h, "out")

    def loss_fn(params, x, y):
        with jax.named_scope("loss"):
            return jnp.mean((mlp(params, x) - y) ** 2)

    @jax.jit
    def train_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        with jax.named_scope("sgd"):
            params = jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
        return params, loss

    # Parameters and data come from numpy, so the only program compiled (and stored in the
    # /host:metadata plane with its HLO) is train_step, which keeps the file small.
    rng = np.random.default_rng(0)
    params = {
        "hidden": {"w": rng.normal(size=(16, 32)).astype("float32") * 0.1, "b": np.zeros(32, "float32")},
        "out": {"w": rng.normal(size=(32, 4)).astype("float32") * 0.1, "b": np.zeros(4, "float32")},
    }
    x, y = rng.normal(size=(8, 16)).astype("float32"), rng.normal(size=(8, 4)).astype("float32")
    params, x, y = jax.device_put((params, x, y))  # a transfer, not a compiled program
    params, loss = train_step(params, x, y)  # compile outside the trace
    loss.block_until_ready()
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp):
            for step in range(1, STEPS):
                with jax.profiler.StepTraceAnnotation("train", step_num=step):
                    params, loss = train_step(params, x, y)
                    loss.block_until_ready()
        return [_only_xplane(Path(tmp), out / name)]


def capture_jax_gpu(out: Path) -> list[Path]:
    """The JAX MLP on CUDA GPU 0: the XSpace holds the host plane and /device:GPU:0's kernels (XLA
    runs the step as one command buffer, a CUDA graph)."""
    return capture_jax(out, platform="cuda", name="jax_cuda_mlp.xplane.pb")


def capture_jax_gpu_thunks(out: Path) -> list[Path]:
    """The same with XLA's command buffers off: each kernel launched on its own, from its thunk."""
    os.environ["XLA_FLAGS"] = "--xla_gpu_enable_command_buffer="
    return capture_jax(out, platform="cuda", name="jax_cuda_mlp_thunks.xplane.pb")


# ---------------------------------------------------------------- TensorFlow 2 (XSpace)


def capture_tf2(out: Path) -> list[Path]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # stock op types (Conv2D, MatMul), as the TF1 fixtures
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential(
        [
            tf.keras.Input((8, 8, 1)),
            tf.keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
            tf.keras.layers.Flatten(name="flatten"),
            tf.keras.layers.Dense(16, activation="relu", name="hidden"),
            tf.keras.layers.Dense(3, name="logits"),
        ],
        name="small_keras",
    )
    model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 8, 8, 1)).astype("float32")
    y = rng.integers(0, 3, size=32)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)  # build and trace the train function first
    with tempfile.TemporaryDirectory() as tmp:
        tf.profiler.experimental.start(tmp)
        model.fit(x[: 8 * (STEPS - 1)], y[: 8 * (STEPS - 1)], batch_size=8, epochs=1, verbose=0)
        tf.profiler.experimental.stop()
        return [_only_xplane(Path(tmp), out / "tf2_keras.xplane.pb")]


# ---------------------------------------------------------------- driver

CAPTURES = {"torch": capture_torch, "jax": capture_jax, "tf2": capture_tf2}  # `all`: the CPU captures
GPU_CAPTURES = {"torch-gpu": capture_torch_gpu, "jax-gpu": capture_jax_gpu, "jax-gpu-thunks": capture_jax_gpu_thunks}  # one at a time, on a CUDA machine
DEFAULT_PYTHON = {
    "torch": [str(CACHE / "torch" / "bin" / "python")],
    "jax": [str(CACHE / "jax" / "bin" / "python")],
    "tf2": ["/work/shared/tools/tfprof-reference", "python"],
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", choices=[*CAPTURES, *GPU_CAPTURES, "all"])
    ap.add_argument("--out", type=Path, default=OUT, help="folder to write the captures into")
    for name in CAPTURES:
        ap.add_argument(f"--{name}-python", help=f"interpreter command for '{name}' under 'all'")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.which != "all":
        for path in {**CAPTURES, **GPU_CAPTURES}[args.which](args.out):
            print(f"{path}  {path.stat().st_size} bytes")
        return 0
    for name in CAPTURES:
        given = getattr(args, f"{name}_python")
        cmd = given.split() if given else DEFAULT_PYTHON[name]
        rc = subprocess.run([*cmd, str(Path(__file__).resolve()), name, "--out", str(args.out)], check=False).returncode
        if rc != 0:
            print(f"capture '{name}' failed with exit code {rc}", file=sys.stderr)
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())

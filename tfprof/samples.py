"""The sample profiles bundled with the package, by name (``tfprof demo``, doctests, notebooks)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tfprof.errors import OptionError

# Sample profiles bundled with the package: copies of test fixtures (tests/fixtures/README.md and
# tests/fixtures/foreign/README.md say how they were made). tfprof's own ProfileProtos, then
# real captures by other profilers (docs/FOREIGN.md).
SAMPLES = {
    "cnn": "cnn_profile.pb",  # a ResNet-like CNN, one training step
    "multistep": "multistep_profile.pb",  # an MLP, three training steps (step 1 also computes accuracy)
    "torch": "torch_transformer.pt.trace.json.gz",  # torch.profiler: a transformer block, two steps
    "jax": "jax_mlp.xplane.pb",  # jax.profiler: a jitted MLP train step with named scopes, three steps
    "tf2": "tf2_keras.xplane.pb",  # tf.profiler (TensorFlow 2): a small Keras model's fit
    "job": "gloo_job",  # torch.distributed (gloo, CPU): 4 ranks of a DDP job, one trace each, rank 2 slowed
}


def sample_path(name: str = "cnn") -> Path:
    """Path of a sample profile bundled with the package: ``cnn`` or ``multistep`` (ProfileProtos),
    ``torch`` (a Kineto trace), ``jax`` or ``tf2`` (XSpaces); ``job``: the directory of a
    distributed job's per-rank Kineto traces.

    >>> import tfprof
    >>> tfprof.load(tfprof.sample_path("multistep")).row_counts()["steps"]
    3
    """
    if name not in SAMPLES:
        raise OptionError(f"Unknown sample `{name}`; valid: {', '.join(SAMPLES)}")
    return Path(str(resources.files("tfprof") / "sample" / SAMPLES[name]))

"""Capture tests/fixtures/foreign/tf2_keras_memory.xplane.pb: tools/capture_foreign.py's Keras model
(`small_keras`), 2 traced steps, with TensorFlow's BFC allocator on the CPU so that the profiler
records its `MemoryAllocation`/`MemoryDeallocation` events (the default CPU allocator records none).

    TF_CPU_ALLOCATOR_USE_BFC=true /work/shared/tools/tfprof-reference python tools/capture_tf2_memory.py OUT

`TF_CPU_ALLOCATOR_USE_BFC` must be set before TensorFlow starts, so it is checked, not set, here;
`host_tracer_level=3` (verbose) as tf.profiler's options name it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path


def main(out: Path) -> int:
    if os.environ.get("TF_CPU_ALLOCATOR_USE_BFC") != "true":
        raise SystemExit("set TF_CPU_ALLOCATOR_USE_BFC=true in the environment (see the docstring)")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([
        tf.keras.Input((8, 8, 1)), tf.keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
        tf.keras.layers.Flatten(name="flatten"), tf.keras.layers.Dense(16, activation="relu", name="hidden"),
        tf.keras.layers.Dense(3, name="logits")], name="small_keras")
    model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 8, 8, 1)).astype("float32")
    y = rng.integers(0, 3, size=32)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)  # build and trace the train function first
    with tempfile.TemporaryDirectory() as tmp:
        tf.profiler.experimental.start(tmp, options=tf.profiler.experimental.ProfilerOptions(host_tracer_level=3))
        model.fit(x[:16], y[:16], batch_size=8, epochs=1, verbose=0)
        tf.profiler.experimental.stop()
        found = sorted(Path(tmp).rglob("*.xplane.pb"))
        if len(found) != 1:
            raise SystemExit(f"expected one .xplane.pb, found {found}")
        shutil.copyfile(found[0], out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/foreign/tf2_keras_memory.xplane.pb")))

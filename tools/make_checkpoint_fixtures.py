"""Write the checkpoint fixtures of tests/test_checkpoint.py with real TensorFlow.

Run with TensorFlow's own Python (never the project's):

    /work/shared/tools/tfprof-reference python tools/make_checkpoint_fixtures.py

Each fixture is a folder under tests/fixtures/checkpoints/ holding one checkpoint with prefix
``model.ckpt`` and its golden data, produced by TensorFlow reading the checkpoint back
(``tf.train.load_checkpoint``), never by hand:

* ``expected.json``: TensorFlow's version, the files, and per tensor its dtype (DataType name),
  shape, the npz keys of its value and, for DT_STRING, its elements as hex;
* ``expected.npz``: per numeric tensor ``<key>``, the array as TensorFlow returns it; for a dtype
  numpy lacks (bfloat16), ``<key>_raw`` holds its bytes as uint8 and ``<key>`` a float32 copy.

Fixtures: ``dtypes`` (every common dtype, scalars, zero-size, strings, a 20k-float tensor),
``sharded`` (TF1 Saver(sharded=True) over two logical CPUs: two data shards), ``partitioned``
(tf.compat.v1 fixed_size_partitioner variables saved by Saver), ``slices`` (SaveV2 slices with
full extents, multi-byte ordered-code starts and a partitioned string tensor), ``tf2_sharded`` (tf.train.Checkpoint with
MaxShardSizePolicy: tensors split into slices across three shards) and ``v1`` (a V1 checkpoint,
no golden data: the reader must reject it).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "checkpoints"
PREFIX = "model.ckpt"


def fresh(name: str) -> Path:
    """An empty fixture folder (only ever inside OUT)."""
    d = OUT / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


def restore_slices(prefix: str, name: str, specs: list[str]) -> np.ndarray:
    """A partitioned string tensor, which get_tensor refuses ("Dtype string not supported"): TF
    restores each stored slice on its own (RestoreV2), and the slices are joined along dim 0."""
    parts = [
        tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=[name], shape_and_slices=[s], dtypes=[tf.string])[0]
        for s in specs
    ]
    return np.concatenate([p.numpy() for p in parts])


def golden(d: Path, prefix: str = PREFIX, sliced_strings: dict[str, list[str]] | None = None) -> None:
    """Write expected.json / expected.npz from TensorFlow's own reading of checkpoint ``d/prefix``."""
    sliced_strings = sliced_strings or {}
    reader = tf.train.load_checkpoint(str(d / prefix))
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    tensors, arrays = {}, {}
    for i, name in enumerate(sorted(shapes)):
        key = f"t{i}"
        dtype = types_pb2.DataType.Name(dtypes[name].as_datatype_enum)
        if name in sliced_strings:
            value = restore_slices(str(d / prefix), name, sliced_strings[name])
        else:
            value = reader.get_tensor(name)
        info = {"dtype": dtype, "shape": [int(s) for s in shapes[name]], "key": key}
        if dtype == "DT_STRING":
            flat = np.asarray(value, dtype=object).reshape(-1)
            info["string_value_hex"] = [bytes(s).hex() for s in flat]
        else:
            value = np.array(value, order="C")  # (ascontiguousarray would make scalars 1-d)
            if value.dtype.kind in "biufc" and value.dtype.name != "bfloat16":
                arrays[key] = value
            else:  # no numpy dtype: keep the bytes, and a float32 copy for bfloat16
                arrays[f"{key}_raw"] = np.frombuffer(value.tobytes(), dtype=np.uint8)
                if dtype == "DT_BFLOAT16":
                    arrays[key] = value.astype(np.float32)
        tensors[name] = info
    files = sorted(p.name for p in d.iterdir() if not p.name.startswith("expected."))
    meta = {"tensorflow": tf.__version__, "prefix": prefix, "files": files, "tensors": tensors}
    (d / "expected.json").write_text(json.dumps(meta, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    np.savez_compressed(d / "expected.npz", **arrays)


def save_v2(d: Path, items: list[tuple[str, str, tf.Tensor]]) -> None:
    """Write a bundle with SaveV2: (name, shape_and_slice, tensor) per entry."""
    names, specs, values = zip(*items)
    tf.raw_ops.SaveV2(
        prefix=str(d / PREFIX), tensor_names=list(names), shape_and_slices=list(specs), tensors=list(values)
    )


def make_dtypes() -> None:
    d = fresh("dtypes")
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal((3, 4)).astype(np.float32)
    items = [
        ("float32", f32),
        ("float64", rng.standard_normal(5)),
        ("int32", np.array([[-2**31, -1, 0], [1, 7, 2**31 - 1]], dtype=np.int32)),
        ("int64", np.array([-2**63, -1, 0, 2**63 - 1], dtype=np.int64)),
        ("bool", np.array([True, False, True, True, False])),
        ("float16", np.array([0.5, -2.0, 65504.0, 1e-4, np.inf, -0.0], dtype=np.float16)),
        ("bfloat16", tf.cast(tf.constant([1.5, -3.25, 1e30, 0.0], dtype=tf.float32), tf.bfloat16)),
        ("uint8", np.arange(250, 258, dtype=np.int64).astype(np.uint8)),
        ("int8", np.array([-128, 0, 127], dtype=np.int8)),
        ("int16", np.array([-32768, 32767], dtype=np.int16)),
        ("uint16", np.array([0, 65535], dtype=np.uint16)),
        ("uint32", np.array([0, 2**32 - 1], dtype=np.uint32)),
        ("uint64", np.array([0, 2**64 - 1], dtype=np.uint64)),
        ("complex64", np.array([1 + 2j, -3.5j], dtype=np.complex64)),
        ("complex128", np.array([[1 - 1j]], dtype=np.complex128)),
        ("scalar", np.float32(3.25)),
        ("scalar_int64", np.int64(-42)),
        ("zero_size", np.zeros((0, 3), dtype=np.float32)),
        ("big", rng.standard_normal(20_000).astype(np.float32)),
        ("layer1/kernel", rng.standard_normal((4, 2)).astype(np.float32)),
        ("scope/ünïcode name", np.array([1, 2, 3], dtype=np.int32)),
        ("string", tf.constant([b"", b"hello", b"\x00\xff\xfe binary", b"x" * 300], dtype=tf.string)),
        ("string_2d", tf.constant([[b"a", b"bc"], [b"def", "ünï".encode()]], dtype=tf.string)),
        ("string_scalar", tf.constant(b"just one", dtype=tf.string)),
        ("string_empty", tf.constant([], dtype=tf.string)),
    ]
    save_v2(d, [(name, "", tf.constant(v) if not isinstance(v, tf.Tensor) else v) for name, v in items])
    golden(d)


def make_sharded() -> None:
    d = fresh("sharded")
    rng = np.random.default_rng(1)
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            tf.compat.v1.get_variable("dense/kernel", initializer=rng.standard_normal((3, 4)).astype(np.float32))
            tf.compat.v1.get_variable("dense/bias", initializer=np.arange(4, dtype=np.float32))
            tf.compat.v1.get_variable("vocab", initializer=tf.constant([b"the", b"quick", b"fox"]))
        with tf.device("/cpu:1"):
            tf.compat.v1.get_variable("out/kernel", initializer=rng.standard_normal((4, 2)))
            tf.compat.v1.get_variable("global_step", initializer=np.int64(1234))
        saver = tf.compat.v1.train.Saver(sharded=True)
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, str(d / PREFIX), write_meta_graph=False, write_state=False)
    shards = sorted(p.name for p in d.glob(f"{PREFIX}.data-*"))
    assert shards == [f"{PREFIX}.data-00000-of-00002", f"{PREFIX}.data-00001-of-00002"], shards
    golden(d)


def make_partitioned() -> None:
    d = fresh("partitioned")
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.set_random_seed(7)
        # 200 rows in 3 parts: starts 0, 67, 134 need two-byte ordered-code numbers.
        tf.compat.v1.get_variable(
            "embedding", shape=[200, 3], initializer=tf.compat.v1.random_normal_initializer(seed=1),
            partitioner=tf.compat.v1.fixed_size_partitioner(3),
        )
        tf.compat.v1.get_variable(
            "wide", shape=[4, 10], dtype=tf.int64,
            initializer=tf.compat.v1.random_uniform_initializer(0, 1000, seed=2, dtype=tf.int64),
            partitioner=tf.compat.v1.fixed_size_partitioner(3, axis=1),
        )
        tf.compat.v1.get_variable(
            "scope/dense/kernel", shape=[5, 2], dtype=tf.float64,
            initializer=tf.compat.v1.random_normal_initializer(seed=3, dtype=tf.float64),
            partitioner=tf.compat.v1.fixed_size_partitioner(2),
        )
        tf.compat.v1.get_variable("plain", initializer=np.array([0.5, -0.5]))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, str(d / PREFIX), write_meta_graph=False, write_state=False)
    golden(d)


def make_slices() -> None:
    d = fresh("slices")
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    y = np.arange(2 * 5 * 3, dtype=np.int32).reshape(2, 5, 3)
    z = np.linspace(-1, 1, 9000)
    b = np.arange(7) % 3 == 0
    words = np.array([b"a", b"bb", b"", b"d" * 200, b"\xff\x00"], dtype=object)
    save_v2(d, [
        ("rows", "4 6 0,2:-", tf.constant(x[:2])),  # full extent on dim 1 ("-": length unset)
        ("rows", "4 6 2,2:-", tf.constant(x[2:])),
        ("middle", "2 5 3 -:0,3:-", tf.constant(y[:, :3])),
        ("middle", "2 5 3 -:3,2:-", tf.constant(y[:, 3:])),
        ("long", "9000 0,8192", tf.constant(z[:8192])),  # start 8192: a three-byte number
        ("long", "9000 8192,808", tf.constant(z[8192:])),
        ("flags", "7 0,3", tf.constant(b[:3])),
        ("flags", "7 3,4", tf.constant(b[3:])),
        ("whole", "", tf.constant([1, 2], dtype=tf.int64)),
        ("words", "5 0,2", tf.constant(words[:2])),  # strings: TF's get_tensor cannot join these
        ("words", "5 2,3", tf.constant(words[2:])),
    ])  # fmt: skip
    golden(d, sliced_strings={"words": ["5 0,2", "5 2,3"]})


def make_tf2_sharded() -> None:
    d = fresh("tf2_sharded")
    ckpt = tf.train.Checkpoint(
        big=tf.Variable(tf.range(200, dtype=tf.float32)),
        small=tf.Variable(tf.ones([10], dtype=tf.float64)),
        step=tf.Variable(np.int64(5)),
    )
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=300)
    ckpt.write(str(d / PREFIX), options=tf.train.CheckpointOptions(experimental_sharding_callback=policy))
    assert len(list(d.glob(f"{PREFIX}.data-*"))) >= 2
    golden(d)


def make_v1() -> None:
    d = fresh("v1")
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.get_variable("a", initializer=np.array([1.0, 2.0, 3.0], dtype=np.float32))
        saver = tf.compat.v1.train.Saver(write_version=tf.compat.v1.train.SaverDef.V1)
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, str(d / PREFIX), write_meta_graph=False, write_state=False)
    assert sorted(p.name for p in d.iterdir()) == [PREFIX]


def main() -> None:
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    for make in (make_dtypes, make_sharded, make_partitioned, make_slices, make_tf2_sharded, make_v1):
        make()
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT} ({total} bytes)", file=sys.stderr)
    assert total < 1_000_000, total


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main()

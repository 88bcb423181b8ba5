"""The capture API against TensorFlow's own profiler: ``tfprof.ProfileContext`` around real
TF1-style training loops, ``write_op_log``/``Profiler``/``profile`` given a ``tf.Graph``, and the
seeds' snippets (ProfileContext quick start, explicit control, auto-profiling, Keras
``stats_graph`` and ``get_flops``) with ``tfprof`` in place of ``tf.profiler``.

The reference is TensorFlow 2.21's native profiler (``model_analyzer.Profiler``,
``_pywrap_tfprof``; TF 2.21 no longer ships ProfileContext) fed the very RunMetadata our
context traced, over a twin graph built by the same line of code (so that op tracebacks match).
Tests marked ``tensorflow`` need ``pip install -e '.[dev,tensorflow]'`` (and ``tf-keras`` for the
Keras recipes); without TensorFlow they are skipped. The two tests at the top run everywhere.
"""

from __future__ import annotations

import ctypes
import difflib
import gc
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import assert_tables_equal

import tfprof
from tfprof.tf_api.option_builder import ProfileOptionBuilder as B
from tfprof.views.units import fmt_time

# The seeds' Keras recipes use Keras 2 (``K.get_session()``): TF 2.21 gives it as tf.compat.v1.keras
# when tf-keras is installed and this is set before TensorFlow loads Keras.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

ROOT = Path(__file__).resolve().parent.parent
METHODS = {
    "scope": "profile_name_scope", "graph": "profile_graph", "op": "profile_operations", "code": "profile_python",
}  # fmt: skip

# The views compared with the real tool's: time and memory, parameters, FLOPs, code.
CASES = [
    ("scope", B.time_and_memory()),
    ("scope", B.trainable_variables_parameter()),
    ("op", B.float_operation()),
    ("op", B(B.time_and_memory()).order_by("micros").select(["micros", "bytes", "occurrence"]).build()),
    ("graph", B(B.time_and_memory()).with_max_depth(8).build()),
    ("code", B(B.time_and_memory()).with_max_depth(1000).with_accounted_types([".*"]).build()),
    ("code", B(B.float_operation()).with_max_depth(1000).with_node_names(show_name_regexes=[".*test_capture.*"])
     .build()),
]


# ------------------------------------------------------------------------- without TensorFlow


def _python(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, **(env or {})}, timeout=300,
    )  # fmt: skip


def test_tfprof_never_imports_tensorflow(tmp_path):
    """The whole non-TF API (views, Python API, write_op_log of a GraphDef) leaves TensorFlow unloaded."""
    proc = _python(
        f"""
        import sys, tfprof
        from tfprof.schema.proto.graph_pb2 import GraphDef
        prof = tfprof.load(tfprof.sample_path())
        tfprof.view(prof, "scope", max_depth=2)
        tfprof.Profiler(None).profile_operations(tfprof.ProfileOptionBuilder().with_empty_output().build())
        graph = GraphDef(); graph.node.add(name="w", op="VariableV2")
        tfprof.write_op_log(graph, {str(tmp_path)!r})
        tfprof.profile(graph, cmd="op", options=tfprof.ProfileOptionBuilder().with_empty_output().build())
        assert tfprof.ProfileContext(None, enabled=False).profiler is None
        assert "tensorflow" not in sys.modules, "tensorflow was imported"
        """
    )
    assert proc.returncode == 0, proc.stderr


def test_capture_without_tensorflow_says_how_to_install():
    """With TensorFlow not importable, the capture API raises one line naming the extra."""
    proc = _python(
        """
        import sys
        sys.modules["tensorflow"] = None  # import tensorflow now raises ImportError
        import tfprof
        try:
            tfprof.ProfileContext("/tmp/unused")
        except tfprof.MissingDependencyError as exc:
            assert isinstance(exc, ImportError)
            print(exc)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        "tfprof.ProfileContext needs TensorFlow, which is not installed: pip install 'tfprof[tensorflow]'\n"
    )


# ------------------------------------------------------------------------- TensorFlow helpers

needs_tf = pytest.mark.tensorflow


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow", reason="needs TensorFlow: pip install 'tfprof[tensorflow]'")


def _native():
    from tensorflow.python.profiler import model_analyzer
    from tensorflow.python.util import _pywrap_tfprof

    return model_analyzer, _pywrap_tfprof


def mlp(tf, batch=None):
    """A two-layer MLP trained by SGD; inputs are placeholders (batch None: shapes incomplete)."""
    v1 = tf.compat.v1
    x = v1.placeholder(tf.float32, [batch, 8], name="x")
    y = v1.placeholder(tf.float32, [batch, 1], name="y")
    with v1.variable_scope("layer1"):
        w = v1.get_variable("w", [8, 16])
        b = v1.get_variable("b", [16], initializer=v1.zeros_initializer())
        h = tf.nn.relu(tf.matmul(x, w) + b)
    with v1.variable_scope("layer2"):
        w2 = v1.get_variable("w", [16, 1])
        b2 = v1.get_variable("b", [1], initializer=v1.zeros_initializer())
        pred = tf.matmul(h, w2) + b2
    loss = tf.reduce_mean(tf.square(pred - y), name="loss")
    train = v1.train.GradientDescentOptimizer(0.05).minimize(loss)
    return {"x": x, "y": y, "loss": loss, "train": train, "init": v1.global_variables_initializer()}


def cnn(tf, batch=None):
    """Conv2D, bias, ReLU, max pooling and a dense layer, trained with momentum: the conv,
    pooling and matmul gradients have FLOPs rules too."""
    v1 = tf.compat.v1
    x = v1.placeholder(tf.float32, [batch, 12, 12, 3], name="x")
    y = v1.placeholder(tf.float32, [batch, 4], name="y")
    with v1.variable_scope("conv"):
        k = v1.get_variable("k", [3, 3, 3, 8])
        b = v1.get_variable("b", [8], initializer=v1.zeros_initializer())
        c = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, k, strides=[1, 1, 1, 1], padding="SAME"), b))
        p = tf.nn.max_pool2d(c, ksize=2, strides=2, padding="VALID")
    with v1.variable_scope("fc"):
        w = v1.get_variable("w", [6 * 6 * 8, 4])
        logits = tf.matmul(tf.reshape(p, [-1, 6 * 6 * 8]), w)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
    train = v1.train.MomentumOptimizer(0.01, 0.9).minimize(loss)
    return {"x": x, "y": y, "loss": loss, "train": train, "init": v1.global_variables_initializer()}


def twins(tf, build, batch=None):
    """Two identical graphs of ``build``, made by one line of code: the same names, shapes and
    op tracebacks, one for our capture and one for TensorFlow's profiler (both change the
    static shapes of the graph they are given)."""
    made = []
    for _ in range(2):
        g = tf.Graph()
        with g.as_default():
            tf.compat.v1.set_random_seed(0)
            made.append((g, build(tf, batch)))  # one line for both: identical tracebacks
    return made


def feed(t, step=0, batch=4):
    import numpy as np

    rng = np.random.default_rng(step)
    xs = rng.standard_normal((batch, *t["x"].shape.as_list()[1:])).astype("float32")
    ys = rng.standard_normal((batch, *t["y"].shape.as_list()[1:])).astype("float32")
    return {t["x"]: xs, t["y"]: ys}


@pytest.fixture
def recorded(monkeypatch):
    """Every (step, RunMetadata bytes) our Profilers are given, in order."""
    seen: list[tuple[int, bytes]] = []
    original = tfprof.Profiler.add_step

    def spy(self, step, run_meta):
        seen.append((step, run_meta.SerializeToString()))
        return original(self, step, run_meta)

    monkeypatch.setattr(tfprof.Profiler, "add_step", spy)
    return seen


def flush_c_stdio() -> None:
    """TensorFlow's tool prints with C stdio: flush it before reading captured fds."""
    sys.stdout.flush()
    ctypes.CDLL(None).fflush(None)


def reference_profiler(tf, graph, steps):
    """TensorFlow's own Profiler over ``graph`` fed ``steps`` [(step, RunMetadata bytes)]."""
    model_analyzer, _ = _native()
    ref = model_analyzer.Profiler(graph)
    for step, data in steps:
        ref.add_step(step, tf.compat.v1.RunMetadata.FromString(data))
    return ref


def views(run_view, out: Path, cases=CASES) -> dict[str, str]:
    """The report of every case, written through ``-output file`` by ``run_view(cmd, options)``."""
    texts = {}
    for i, (cmd, opts) in enumerate(cases):
        path = out / f"{i}_{cmd}.txt"
        run_view(cmd, dict(opts, output=f"file:outfile={path}"))
        flush_c_stdio()
        texts[f"{i}_{cmd}"] = path.read_text()
    return texts


def tf_profiler_views(ref, out: Path, cases=CASES) -> dict[str, str]:
    out.mkdir(exist_ok=True)
    return views(lambda cmd, o: getattr(ref, METHODS[cmd])(o), out, cases)


def ours_views(prof, out: Path, cases=CASES) -> dict[str, str]:
    out.mkdir(exist_ok=True)
    return views(lambda cmd, o: getattr(prof, METHODS[cmd])(o), out, cases)


def real_tool_views(profile_path: Path, out: Path, cases=CASES) -> dict[str, str]:
    """The real tool's reports of a ProfileProto file (as `tfprof-reference view` loads one)."""
    model_analyzer, pw = _native()
    gc.collect()  # a TF Profiler deleted later would delete the profiler loaded here
    out.mkdir(exist_ok=True)
    pw.ProfilerFromFile(str(profile_path).encode())
    try:
        def run_view(cmd, opts):
            pw.Profile(cmd.encode(), model_analyzer._build_options(opts).SerializeToString())

        return views(run_view, out, cases)
    finally:
        pw.DeleteProfiler()


def assert_same_texts(want: dict[str, str], got: dict[str, str]) -> None:
    assert want.keys() == got.keys()
    for key in want:
        if want[key] != got[key]:
            diff = difflib.unified_diff(
                want[key].splitlines(), got[key].splitlines(), "real tool", "tfprof", lineterm=""
            )
            raise AssertionError(f"{key} differs:\n" + "\n".join(list(diff)[:40]))
    assert any(len(t.splitlines()) > 5 for t in want.values())  # the cases show something


def assert_same_profile(ours_path: Path, ref_bytes: bytes, tmp_path: Path) -> None:
    """Our ProfileProto file and TensorFlow's bytes hold the same tables."""
    ref_path = tmp_path / "reference_profile"
    ref_path.write_bytes(ref_bytes)
    ours, theirs = tfprof.load(ours_path), tfprof.load(ref_path)
    for name in ours.tables():
        assert_tables_equal(theirs.table(name), ours.table(name), name)
    assert ours.row_counts()["code_frames"] > 0 and ours.row_counts()["execs"] > 0


# ------------------------------------------------------------------------- ProfileContext


@needs_tf
def test_explicit_control_seed(tf, tmp_path, recorded, capfd):
    """The seeds' explicit-control example: trace and dump the next step, then profile it."""
    (g, t), (g2, _) = twins(tf, mlp)
    builder = tfprof.ProfileOptionBuilder
    opts = builder(builder.time_and_memory()).order_by("micros").build()
    with g.as_default():
        with tfprof.ProfileContext(str(tmp_path / "train_dir"), trace_steps=[], dump_steps=[]) as pctx:
            with tf.compat.v1.Session() as sess:
                sess.run(t["init"])
                pctx.trace_next_step()
                pctx.dump_next_step()
                _ = sess.run(t["train"], feed_dict=feed(t))
                capfd.readouterr()
                pctx.profiler.profile_operations(options=opts)
                flush_c_stdio()
                printed = capfd.readouterr().out
                sess.run(t["train"], feed_dict=feed(t, 1))  # not traced
    assert [step for step, _ in recorded] == [1]
    assert sorted(p.name for p in (tmp_path / "train_dir").iterdir()) == ["profile_1"]

    ref = reference_profiler(tf, g2, recorded)
    capfd.readouterr()
    ref.profile_operations(options=opts)
    flush_c_stdio()
    assert printed == capfd.readouterr().out
    assert "MatMul" in printed
    assert_same_texts(tf_profiler_views(ref, tmp_path / "ref"), ours_views(pctx.profiler, tmp_path / "ours"))
    ref_bytes = ref.serialize_to_string()
    del ref
    assert_same_texts(
        real_tool_views(tmp_path / "train_dir" / "profile_1", tmp_path / "real"),
        ours_views(pctx.profiler, tmp_path / "ours2"),
    )
    assert_same_profile(tmp_path / "train_dir" / "profile_1", ref_bytes, tmp_path)


@needs_tf
def test_auto_profiling_seed(tf, tmp_path, recorded, capfd):
    """The seeds' advanced example: trace steps 10~20, dump at 20, run the op view at 15, 18
    and 20 and the scope view at 20 while training: the same reports as TensorFlow's profiler
    given the same steps, and a dump that the real tool reads."""
    (g, t), (g2, _) = twins(tf, cnn)
    builder = tfprof.ProfileOptionBuilder
    opts = builder(builder.time_and_memory()).order_by("micros").build()
    opts2 = tfprof.ProfileOptionBuilder.trainable_variables_parameter()
    train_dir = tmp_path / "train_dir"
    capfd.readouterr()
    with g.as_default(), tf.compat.v1.Session() as sess:
        with tfprof.ProfileContext(str(train_dir), trace_steps=range(10, 20), dump_steps=[20]) as pctx:
            pctx.add_auto_profiling("op", opts, [15, 18, 20])
            pctx.add_auto_profiling("scope", opts2, [20])
            sess.run(t["init"])  # step 0
            for step in range(1, 25):  # train_loop()
                sess.run(t["train"], feed_dict=feed(t, step))
            flush_c_stdio()
            printed = capfd.readouterr().out
    assert [step for step, _ in recorded] == [*range(10, 21)]
    assert sorted(p.name for p in train_dir.iterdir()) == ["profile_20"]
    assert sorted(pctx.get_profiles("op")) == [15, 18, 20] and sorted(pctx.get_profiles("scope")) == [20]

    # TensorFlow's profiler given the same steps, profiled at the same points.
    model_analyzer, _ = _native()
    ref = model_analyzer.Profiler(g2)
    want_protos = {}
    for step, data in recorded:
        ref.add_step(step, tf.compat.v1.RunMetadata.FromString(data))
        if step in (15, 18, 20):
            want_protos[("op", step)] = ref.profile_operations(opts)
        if step == 20:
            want_protos[("scope", step)] = ref.profile_name_scope(opts2)
    flush_c_stdio()
    assert printed == capfd.readouterr().out
    assert printed.count("Model Analysis Report") == 4
    for (cmd, step), proto in want_protos.items():
        ours = pctx.get_profiles(cmd)[step]
        assert ours == type(ours).FromString(proto.SerializeToString()), (cmd, step)
    ref_bytes = ref.serialize_to_string()
    del ref
    assert_same_texts(
        real_tool_views(train_dir / "profile_20", tmp_path / "real"), ours_views(pctx.profiler, tmp_path / "ours")
    )
    assert_same_profile(train_dir / "profile_20", ref_bytes, tmp_path)


@needs_tf
def test_quick_start_default_context(tf, tmp_path, recorded):
    """The seeds' quick start: the default context traces on its own after 10 warm-up steps
    (each new set of fetches, then at random while little of the graph is covered) and dumps
    ``profile_100``, which the real tool reads as TensorFlow's profiler given those steps."""
    (g, t), (g2, _) = twins(tf, mlp)
    train_dir = tmp_path / "train_dir"

    def train_loop(sess):
        for step in range(120):
            # every tenth run evaluates the loss: a second set of fetches
            sess.run(t["loss"] if step % 10 == 5 else t["train"], feed_dict=feed(t, step))

    with g.as_default(), tf.compat.v1.Session() as sess:
        sess.run(t["init"])
        with tfprof.ProfileContext(str(train_dir)) as pctx:
            train_loop(sess)
    steps = [step for step, _ in recorded]
    assert steps[:2] == [11, 15]  # the first two runs of each fetch set after the warm-up
    assert steps == sorted(set(steps)) and len(steps) <= 100 and max(steps) < 100
    assert sorted(p.name for p in train_dir.iterdir()) == ["profile_100"]
    assert tfprof.load(train_dir / "profile_100").table("steps")["step"].to_pylist() == steps

    # The random steps are TensorFlow's: seeded, they repeat run after run.
    first = list(recorded)
    recorded.clear()
    with g.as_default(), tf.compat.v1.Session() as sess:
        sess.run(t["init"])
        with tfprof.ProfileContext(str(tmp_path / "again")):
            train_loop(sess)
    assert [s for s, _ in recorded] == steps

    ref = reference_profiler(tf, g2, first)
    ref_bytes = ref.serialize_to_string()
    del ref
    cases = CASES[:5]
    assert_same_texts(
        real_tool_views(train_dir / "profile_100", tmp_path / "real", cases),
        ours_views(pctx.profiler, tmp_path / "ours", cases),
    )
    assert_same_profile(train_dir / "profile_100", ref_bytes, tmp_path)


@needs_tf
def test_debug_dumps_run_metadata_and_says_what_it_does(tf, tmp_path, recorded, capfd):
    (g, t), _ = twins(tf, mlp)
    with g.as_default(), tf.compat.v1.Session() as sess:
        with tfprof.ProfileContext(str(tmp_path / "d"), trace_steps=[1], dump_steps=[2], debug=True):
            for step in range(3):
                sess.run(t["init"] if step == 0 else t["train"], feed_dict=feed(t, step))
    err = capfd.readouterr().err
    assert "debug: tracing step: 1\n" in err and "debug: dumping file at step: 2\n" in err
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["profile_2", "run_meta_1"]
    from google.protobuf import text_format

    dumped = text_format.Parse((tmp_path / "d" / "run_meta_1").read_text(), tf.compat.v1.RunMetadata())
    assert dumped.SerializeToString() == recorded[0][1]


@needs_tf
def test_callers_options_and_run_metadata_are_kept(tf, tmp_path):
    """A traced run fills the caller's RunMetadata and gives back the caller's RunOptions as
    they were; Session.run is TensorFlow's own again after the context."""
    v1 = tf.compat.v1
    (g, t), _ = twins(tf, mlp)
    original_run = v1.Session.run
    options = v1.RunOptions(trace_level=v1.RunOptions.SOFTWARE_TRACE, timeout_in_ms=60000)
    run_meta = v1.RunMetadata()
    with g.as_default(), v1.Session() as sess:
        with tfprof.ProfileContext(str(tmp_path), trace_steps=[0, 1], dump_steps=[]) as pctx:
            assert v1.Session.run is not original_run
            sess.run(t["init"])
            sess.run(t["train"], feed_dict=feed(t), options=options, run_metadata=run_meta)
    assert v1.Session.run is original_run
    assert options.trace_level == v1.RunOptions.SOFTWARE_TRACE and options.timeout_in_ms == 60000
    assert len(run_meta.step_stats.dev_stats) > 0
    assert pctx.profiler.to_profile().table("steps")["step"].to_pylist() == [0, 1]
    assert not list(tmp_path.iterdir())


@needs_tf
def test_disabled_context_does_nothing(tf, tmp_path):
    v1 = tf.compat.v1
    original_run = v1.Session.run
    (g, t), _ = twins(tf, mlp)
    with tfprof.ProfileContext(str(tmp_path / "d"), trace_steps=[0], dump_steps=[0], enabled=False) as pctx:
        assert v1.Session.run is original_run
        pctx.trace_next_step()
        pctx.add_auto_profiling("op", {}, [0])
        with g.as_default(), v1.Session() as sess:
            sess.run(t["init"])
    assert pctx.profiler is None and not (tmp_path / "d").exists()


@needs_tf
def test_context_errors_are_one_line(tf, tmp_path):
    with pytest.raises(tfprof.OptionError, match="needs a directory"):
        tfprof.ProfileContext("")
    with pytest.raises(tfprof.OptionError, match="at most 100 steps; trace_steps has 101"):
        tfprof.ProfileContext(str(tmp_path), trace_steps=range(101))
    pctx = tfprof.ProfileContext(str(tmp_path))
    with pytest.raises(tfprof.OptionError, match="Unknown cmd `python`.*valid: graph, scope, op, code"):
        pctx.add_auto_profiling("python", {}, [1])
    with pytest.raises(tfprof.OptionError, match="no auto-profiling of `op`"):
        pctx.get_profiles("op")
    original_run = tf.compat.v1.Session.run
    with pctx:
        with pytest.raises(tfprof.TfprofError, match="already active"):
            with tfprof.ProfileContext(str(tmp_path)):
                pass
    assert tf.compat.v1.Session.run is original_run


# ------------------------------------------------------------------------- write_op_log


def _op_log(path: Path):
    from tfprof.schema.proto.tfprof_log_pb2 import OpLogProto

    return OpLogProto.FromString(path.read_bytes())


@needs_tf
@pytest.mark.parametrize("build", [mlp, cnn])
@pytest.mark.parametrize("with_run_meta", [False, True], ids=["static_shapes", "shapes_from_run_meta"])
@pytest.mark.parametrize("add_trace", [True, False], ids=["traces", "no_traces"])
def test_write_op_log_writes_what_tensorflow_writes(tf, tmp_path, capfd, build, with_run_meta, add_trace):
    """The same entries, types, float_ops, traces and string table as TensorFlow's
    write_op_log, with FLOPs from our rules; RunMetadata shapes complete the batch dimension."""
    v1 = tf.compat.v1
    run_meta = None
    (g, t), (g2, _) = twins(tf, build)
    if with_run_meta:
        run_meta = v1.RunMetadata()
        with g.as_default(), v1.Session() as sess:
            sess.run(t["init"])
            opts = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
            sess.run(t["train"], feed_dict=feed(t), options=opts, run_metadata=run_meta)
    (tmp_path / "ours").mkdir()
    (tmp_path / "tf").mkdir()
    capfd.readouterr()
    tfprof.write_op_log(g, str(tmp_path / "ours"), run_meta=run_meta, add_trace=add_trace)
    ours_err = capfd.readouterr().err
    v1.profiler.write_op_log(g2, str(tmp_path / "tf"), run_meta=run_meta, add_trace=add_trace)
    assert ours_err == capfd.readouterr().err  # "N ops no flops stats due to incomplete shapes."
    ours, theirs = _op_log(tmp_path / "ours" / "tfprof_log"), _op_log(tmp_path / "tf" / "tfprof_log")
    assert ours == theirs
    flops = {e.name: e.float_ops for e in ours.log_entries if e.float_ops}
    # The batch dimension is unknown until a run gives it: only then do MatMuls have FLOPs.
    assert any("MatMul" in n for n in flops) == with_run_meta
    assert any("_trainable_variables" in e.types for e in ours.log_entries)
    assert all(bool(e.code_def.traces) == add_trace for e in ours.log_entries if not e.types)


@needs_tf
def test_write_op_log_merges_the_callers_log(tf, tmp_path):
    # ours before TensorFlow's, as this test was written and has passed in the TensorFlow tier
    from tfprof.schema.proto.tfprof_log_pb2 import OpLogProto as Ours  # noqa: I001
    from tensorflow.core.profiler.tfprof_log_pb2 import OpLogProto as Theirs

    (g, _), (g2, _) = twins(tf, mlp, batch=4)
    logs = []
    sides = ((g, Ours, tfprof.write_op_log, "ours"), (g2, Theirs, tf.compat.v1.profiler.write_op_log, "tf"))
    for graph, cls, write, out in sides:
        caller = cls()
        caller.log_entries.add(name="layer1/w", types=["mine"])
        caller.log_entries.add(name="layer1/MatMul", float_ops=7)
        (tmp_path / out).mkdir()
        write(graph, str(tmp_path / out), op_log=caller, add_trace=False)
        logs.append(_op_log(tmp_path / out / "tfprof_log"))
    assert logs[0] == logs[1]
    assert logs[0].log_entries[0].types == ["mine", "_trainable_variables"]
    assert logs[0].log_entries[1].float_ops == 7



# ------------------------------------------------------------------------- Profiler and profile on a tf.Graph


def _traced_steps(tf, g, t, steps=2):
    """RunMetadata of ``steps`` full-trace training runs of ``t`` (bytes)."""
    v1 = tf.compat.v1
    out = []
    with g.as_default(), v1.Session() as sess:
        sess.run(t["init"])
        for step in range(steps):
            rm = v1.RunMetadata()
            opts = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
            sess.run(t["train"], feed_dict=feed(t, step), options=opts, run_metadata=rm)
            out.append((step, rm.SerializeToString()))
    return out


@needs_tf
@pytest.mark.parametrize("build", [mlp, cnn])
def test_profiler_on_a_tf_graph_matches_tensorflows(tf, tmp_path, build):
    """Profiler(graph=sess.graph) + add_step(step, run_metadata), as in the seeds' Python API:
    the same reports and the same ProfileProto as TensorFlow's Profiler."""
    (g, t), (g2, _) = twins(tf, build)
    steps = _traced_steps(tf, g, t)
    prof = tfprof.Profiler(graph=g)
    for step, data in steps:
        prof.add_step(step, tf.compat.v1.RunMetadata.FromString(data))
    ref = reference_profiler(tf, g2, steps)
    assert_same_texts(tf_profiler_views(ref, tmp_path / "ref"), ours_views(prof, tmp_path / "ours"))
    assert prof._coverage == pytest.approx(ref._coverage)
    ref_bytes = ref.serialize_to_string()
    del ref
    prof._write_profile(str(tmp_path / "profile_1"))
    assert_same_profile(tmp_path / "profile_1", ref_bytes, tmp_path)


@needs_tf
@pytest.mark.parametrize("cmd", ["scope", "graph", "op", "code"])
def test_profile_on_a_tf_graph_prints_and_returns_what_tensorflow_does(tf, cmd, capfd):
    """tf.profiler.profile(graph, run_meta, cmd, options) with a tf.Graph: the op log is built
    from the graph as TensorFlow builds it (traces for the code view only)."""
    (g, t), (g2, _) = twins(tf, cnn)
    run_meta = tf.compat.v1.RunMetadata.FromString(_traced_steps(tf, g, t, 1)[0][1])
    base = CASES[4][1] if cmd == "graph" else B.time_and_memory()
    opts = dict(base, select=["micros", "bytes", "params", "float_ops"])
    if cmd == "code":
        opts["max_depth"] = 1000
    capfd.readouterr()
    ours = tfprof.profile(g, run_meta=run_meta, cmd=cmd, options=opts)
    flush_c_stdio()
    printed = capfd.readouterr()
    theirs = tf.compat.v1.profiler.profile(g2, run_meta=run_meta, cmd=cmd, options=opts)
    flush_c_stdio()
    want = capfd.readouterr()
    assert printed.out == want.out and printed.err == want.err
    assert ours == type(ours).FromString(theirs.SerializeToString())
    assert ours.total_float_ops > 0 and ours.total_exec_micros > 0


@needs_tf
def test_advise_on_a_tf_graph(tf, capfd):
    (g, t), (g2, _) = twins(tf, cnn)
    run_meta = tf.compat.v1.RunMetadata.FromString(_traced_steps(tf, g, t, 1)[0][1])
    ours = tfprof.advise(g, run_meta=run_meta)
    theirs = type(ours).FromString(tf.compat.v1.profiler.advise(g2, run_meta=run_meta).SerializeToString())
    assert len(ours.checkers) >= 3
    # COMPATIBILITY row 20: a top graph node is reported with its subtree's time, where the real
    # tool prints its own (0us for a name scope). Everything else is the real tool's.
    opts = {**B.time_and_memory(), "max_depth": 100, "min_micros": 100, "min_bytes": 0,
            "account_displayed_op_only": False, "order_by": "micros"}  # the checker's scope view
    scope = tfprof.profile(g, run_meta=run_meta, cmd="scope", options=opts)
    subtree = {c.name: (c.total_cpu_exec_micros, c.total_accelerator_exec_micros) for c in scope.children}
    own = {c.name: (c.cpu_exec_micros, c.accelerator_exec_micros) for c in scope.children}
    graph_nodes = 0
    for name in ours.checkers:
        mine, real = ours.checkers[name].reports, theirs.checkers[name].reports
        assert len(mine) == len(real), name
        for a, b in zip(mine, real):
            a_lines, b_lines = a.splitlines(), b.splitlines()
            assert len(a_lines) == len(b_lines)
            for x, y in zip(a_lines, b_lines):
                m, n = GRAPH_NODE_LINE.match(x), GRAPH_NODE_LINE.match(y)
                if not (m and n):
                    assert x == y
                    continue
                graph_nodes += 1
                assert m[1] == n[1] and m[2] == n[2]
                # The real tool prints the node's own time: 0 for a name scope, the op's own time for
                # a top node that is itself an op (softmax_cross_entropy_with_logits has children).
                assert n[3] == times(*own[m[2]])
                assert m[3] == times(*subtree[m[2]])
    assert graph_nodes >= 1


def times(cpu, acc):
    return f", cpu: {fmt_time(cpu)}, accelerator: {fmt_time(acc)}, total: {fmt_time(cpu + acc)}"


GRAPH_NODE_LINE = re.compile(r"^(top \d+ graph node: )([^,]+)(, cpu: .*)$")


# ------------------------------------------------------------------------- the seeds' Keras recipes

# Verbatim from the seeds but for `tf.RunMetadata()` (tf.compat.v1's in TF 2.21) and `tf.profiler`,
# which is PROFILER: `tfprof` or TensorFlow's `tf.compat.v1.profiler`.
STATS_GRAPH = """
def stats_graph(graph):
    flops = PROFILER.profile(graph, options=PROFILER.ProfileOptionBuilder.float_operation())
    params = PROFILER.profile(graph, options=PROFILER.ProfileOptionBuilder.trainable_variables_parameter())
    print('FLOPs: {};    Trainable params: {}'.format(flops.total_float_ops, params.total_parameters))

model = Sequential()
model.add(Dense(32, input_dim=4, bias_initializer=Constant(value=0), kernel_initializer=Constant(value=1)))
sess = K.get_session()
graph = sess.graph
stats_graph(graph)
"""

GET_FLOPS = """
def get_flops(model):
    run_meta = tf.compat.v1.RunMetadata()
    opts = PROFILER.ProfileOptionBuilder.float_operation()

    # We use the Keras session graph in the call to the profiler.
    flop = PROFILER.profile(graph=K.get_session().graph,
                                    run_meta=run_meta, cmd='op', options=opts)

    return flop.total_float_ops
    # Prints the "flop" of the model.

model = Sequential([
    Conv2D(8, 3, activation="relu", batch_input_shape=(1, 28, 28, 1)), MaxPooling2D(), Flatten(), Dense(10),
])
print(get_flops(model))
"""


def _keras(tf):
    pytest.importorskip("tf_keras", reason="the seeds' Keras recipes need Keras 2: pip install tf-keras==2.21.0")
    keras = tf.compat.v1.keras
    if not hasattr(keras.backend, "get_session"):
        pytest.skip("tf.compat.v1.keras is Keras 3 here (TF_USE_LEGACY_KERAS was set after Keras loaded)")
    layers = keras.layers
    return {
        "tf": tf, "K": keras.backend, "Sequential": keras.models.Sequential, "Dense": layers.Dense,
        "Constant": keras.initializers.Constant, "Conv2D": layers.Conv2D, "MaxPooling2D": layers.MaxPooling2D,
        "Flatten": layers.Flatten,
    }  # fmt: skip


def _run_recipe(tf, source, profiler, capfd):
    names = _keras(tf)
    with tf.Graph().as_default():
        capfd.readouterr()
        exec(source, {**names, "PROFILER": profiler})
        flush_c_stdio()
        return capfd.readouterr()


@needs_tf
@pytest.mark.parametrize("recipe", [STATS_GRAPH, GET_FLOPS], ids=["stats_graph", "get_flops"])
def test_keras_recipes_print_what_tensorflow_prints(tf, capfd, recipe):
    """The seeds' `stats_graph` and `get_flops` on Keras-built graphs print the same reports,
    FLOPs and parameter counts with `tfprof` as with `tf.profiler`."""
    ours = _run_recipe(tf, recipe, tfprof, capfd)
    theirs = _run_recipe(tf, recipe, tf.compat.v1.profiler, capfd)
    assert ours.out == theirs.out
    def notes(err: str) -> list[str]:  # "N ops no flops stats due to incomplete shapes."
        return [line for line in err.splitlines() if "flops stats" in line]

    assert notes(ours.err) == notes(theirs.err)
    last = ours.out.strip().splitlines()[-1]
    if recipe is STATS_GRAPH:
        assert last == "FLOPs: 0;    Trainable params: 160"  # the batch size is unknown: no MatMul FLOPs
    else:
        assert int(last) > 100_000

"""tf.profiler's Python API (``tfprof.Profiler``, ``profile``, ``advise``, ``ProfileOptionBuilder``,
``write_op_log``) against the real tool: every golden case through ``Profiler.profile_*`` built
from the fixtures' raw files, TensorFlow's option dicts, run coverage and stdout banners
(tests/golden/roundtrip/python_api, made by tools/make_roundtrip_golden.py).
"""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, assert_tables_equal
from google.protobuf import text_format
from test_roundtrip import raw_inputs

import tfprof
from tfprof.api import advise as core_advise
from tfprof.errors import InputError, InputNotFoundError, OptionError, OutputError, TfprofError
from tfprof.schema import TABLES
from tfprof.schema.proto import graph_pb2, run_metadata_pb2, tfprof_log_pb2
from tfprof.schema.proto.tfprof_output_pb2 import GraphNodeProto, MultiGraphNodeProto
from tfprof.tf_api.option_builder import ProfileOptionBuilder as B

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from make_roundtrip_golden import option_builder_answers  # noqa: E402  (the calls option_builder.json answers)

GOLDEN = Path(__file__).parent / "golden"
API = GOLDEN / "roundtrip" / "python_api"
METHODS = {"scope": "profile_name_scope", "graph": "profile_graph", "op": "profile_operations", "code": "profile_python"}

_PROFILERS: dict[str, tfprof.Profiler] = {}


def profiler(name: str) -> tfprof.Profiler:
    """A Profiler fed fixture ``name``'s raw files as TensorFlow's user code feeds it."""
    if name not in _PROFILERS:
        inputs = raw_inputs(name)
        prof = tfprof.Profiler(inputs["graph_path"], op_log=inputs.get("op_log_path"))
        for step, run_meta in enumerate(inputs["run_meta_path"]):
            prof.add_step(step, run_meta)
        _PROFILERS[name] = prof
    return _PROFILERS[name]


def _body(text: str) -> list[str]:
    start = text.find("node name |")
    return text[start:].splitlines(keepends=True) if start >= 0 else []


def _cases():
    from test_golden import DIVERGENT

    # The view goldens of the fixtures made from a graph, RunMetadata and an op log (the Python
    # API takes no checkpoint, so the tensor_value goldens are the command line's).
    for name in ("cnn", "rnn", "multistep", "gpu_tiny"):
        case_file = GOLDEN / name / "cases.json"
        for case in json.loads(case_file.read_text()):
            marks = [pytest.mark.xfail(strict=True, reason=DIVERGENT[case["id"]])] if case["id"] in DIVERGENT else []
            yield pytest.param(case_file.parent.name, case, id=f"{case_file.parent.name}-{case['id']}", marks=marks)


@pytest.mark.parametrize("fixture,case", list(_cases()))
def test_profiler_matches_golden(fixture, case, tmp_path):
    """Every golden case through the Profiler method of its view, with a file output."""
    from test_golden import _rejected

    expected = (GOLDEN / fixture / f"{case['id']}.txt").read_text()
    outfile = tmp_path / "report.txt"
    options = dict(case["options"], output=f"file:outfile={outfile}")
    method = getattr(profiler(fixture), METHODS[case["cmd"]])
    if not expected or _rejected(options):
        with pytest.raises(OptionError):
            method(options)
        return
    proto = method(options)
    if _body(outfile.read_text()) != _body(expected):
        diff = difflib.unified_diff(_body(expected), _body(outfile.read_text()), "tfprof", "ours", n=1)
        pytest.fail(f"{fixture} {case['id']}:\n{''.join(list(diff)[:40])}")
    cls = GraphNodeProto if case["cmd"] in ("scope", "graph") else MultiGraphNodeProto
    assert isinstance(proto, cls)
    assert text_format.Parse((GOLDEN / fixture / f"{case['id']}.pbtxt").read_text(), cls()) == proto


@pytest.mark.parametrize("fixture", ["cnn", "gpu_tiny"])
def test_one_shot_profile_matches_golden(fixture):
    """tfprof.profile(graph, run_meta, op_log, cmd, options) on one-step fixtures."""
    inputs = raw_inputs(fixture)
    cases = [c for c in json.loads((GOLDEN / fixture / "cases.json").read_text()) if c["id"].endswith(("_cli", "fields"))]
    assert cases
    for case in cases:
        if not (GOLDEN / fixture / f"{case['id']}.txt").read_text():
            continue
        proto = tfprof.profile(
            inputs["graph_path"], inputs["run_meta_path"][0], inputs.get("op_log_path"), case["cmd"],
            dict(case["options"], output="none"),
        )  # fmt: skip
        cls = GraphNodeProto if case["cmd"] in ("scope", "graph") else MultiGraphNodeProto
        assert text_format.Parse((GOLDEN / fixture / f"{case['id']}.pbtxt").read_text(), cls()) == proto, case["id"]


def test_profile_default_options_are_trainable_parameters(capsys):
    """Without options, profile() shows the trainable variables' parameters (TensorFlow's default)."""
    inputs = raw_inputs("cnn")
    proto = tfprof.profile(inputs["graph_path"], inputs["run_meta_path"][0], inputs["op_log_path"])
    want = text_format.Parse((GOLDEN / "cnn" / "scope_preset_params.pbtxt").read_text(), GraphNodeProto())
    assert proto == want
    assert "# parameters" in capsys.readouterr().out


# ------------------------------------------------------------------------------ TensorFlow's answers


@pytest.mark.parametrize("case", json.loads((API / "stdout_cases.json").read_text()), ids=lambda c: c["id"])
def test_stdout_is_tensorflows(case, capsys):
    """output stdout: the banners, Options.ToString and the report, as TensorFlow prints them."""
    opts = dict(case["options"])
    full = {**getattr(B, opts.pop("preset"))(), **opts}
    getattr(profiler("multistep"), METHODS[case["cmd"]])(full)
    out, err = capsys.readouterr()
    assert out == (API / f"stdout_{case['id']}.txt").read_text()
    stderr = API / f"stdout_{case['id']}.stderr"
    assert err == (stderr.read_text() if stderr.exists() else "")


def test_option_builder_is_tensorflows():
    """Defaults, presets and setters give TensorFlow's dicts, key order included."""
    tf = json.loads((API / "option_builder.json").read_text())
    ours = option_builder_answers(B)
    assert ours == tf
    for key in ours:
        if isinstance(ours[key], dict):
            assert list(ours[key]) == list(tf[key]), key


def test_builder_copies():
    regexes = ["a"]
    builder = B().with_accounted_types(regexes)
    regexes.append("b")
    built = builder.build()
    built["account_type_regexes"].append("c")
    assert builder.build()["account_type_regexes"] == ["a"]


@pytest.mark.parametrize("name", ["cnn", "rnn", "multistep", "gpu_tiny"])
def test_add_step_coverage_is_tensorflows(name):
    inputs = raw_inputs(name)
    prof = tfprof.Profiler(inputs["graph_path"])
    got = []
    for step, run_meta in enumerate(inputs["run_meta_path"]):
        prof.add_step(step, run_meta)
        got.append(prof._coverage)
    assert got == pytest.approx(json.loads((API / "coverage.json").read_text())[name], abs=1e-12)


def test_missing_keys_take_the_builders_defaults():
    """A partial dict is completed from ProfileOptionBuilder() (TensorFlow shows only the root,
    which hides the mistake; docs/COMPATIBILITY.md row 12)."""
    prof = profiler("multistep")
    partial = prof.profile_operations({"select": ["params"], "output": "none"})
    full = prof.profile_operations(B().select(["params"]).with_empty_output().build())
    assert partial == full and len(partial.children) == 1


# ------------------------------------------------------------------------------ inputs


def test_inputs_in_memory_equal_paths():
    """Bytes, our messages and text-format bytes give the tables the files give."""
    inputs = raw_inputs("multistep")
    graph = graph_pb2.GraphDef.FromString(Path(inputs["graph_path"]).read_bytes())
    metas = [run_metadata_pb2.RunMetadata.FromString(Path(p).read_bytes()) for p in inputs["run_meta_path"]]
    op_log = tfprof_log_pb2.OpLogProto.FromString(Path(inputs["op_log_path"]).read_bytes())
    want = tfprof.load(**inputs).tables()
    variants = [
        {"graph_path": graph, "run_meta_path": metas, "op_log_path": op_log},
        {"graph_path": graph.SerializeToString(), "run_meta_path": [m.SerializeToString() for m in metas],
         "op_log_path": op_log.SerializeToString()},
        {"graph_path": text_format.MessageToString(graph).encode(), "run_meta_path": metas,
         "op_log_path": Path(inputs["op_log_path"]).read_bytes()},
    ]  # fmt: skip
    for variant in variants:
        got = tfprof.load(**variant).tables()
        for name in TABLES:
            assert_tables_equal(want[name], got[name], name)
    profile = (FIXTURES / "multistep" / "profile.pb").read_bytes()
    from_bytes = tfprof.load(profile_path=profile).tables()
    from_message = tfprof.load(profile_path=tfprof_log_pb2.ProfileProto.FromString(profile)).tables()
    from_file = tfprof.load(profile_path=FIXTURES / "multistep" / "profile.pb").tables()
    for name in TABLES:
        assert_tables_equal(from_file[name], from_bytes[name], name)
        assert_tables_equal(from_file[name], from_message[name], name)


def test_tensorflows_messages_are_accepted():
    """Any message with TensorFlow's type name is read through its bytes (here stand-ins shaped
    like tensorflow.GraphDef / tensorflow.RunMetadata, TensorFlow not being installed)."""
    from types import SimpleNamespace

    class Message:
        def __init__(self, name, path):
            self.DESCRIPTOR = SimpleNamespace(name=name, full_name=f"tensorflow.{name}")
            self.data = Path(path).read_bytes()

        def SerializeToString(self):
            return self.data

    inputs = raw_inputs("cnn")
    prof = tfprof.Profiler(Message("GraphDef", inputs["graph_path"]), op_log=inputs["op_log_path"])
    prof.add_step(0, Message("RunMetadata", inputs["run_meta_path"][0]))
    want = tfprof.load(**inputs)
    for name in TABLES:
        assert_tables_equal(want.table(name), prof.to_profile().table(name), name)
    with pytest.raises(InputError, match="tensorflow.GraphDef"):
        prof.add_step(1, Message("GraphDef", inputs["graph_path"]))


def test_profiler_equals_the_command_lines_profile():
    prof = profiler("rnn").to_profile()
    cli = tfprof.load(**raw_inputs("rnn"))
    for name in TABLES:
        assert_tables_equal(cli.table(name), prof.table(name), name)


def test_serialize_to_string_round_trip(tmp_path):
    prof = profiler("rnn")
    data = prof.serialize_to_string()
    assert isinstance(data, bytes)
    back = tfprof.load(data)
    mine = prof.to_profile()
    for name in TABLES:
        if name not in ("allocator_memory", "checkpoint_tensors"):
            assert_tables_equal(mine.table(name), back.table(name), name)
    prof._write_profile(str(tmp_path / "profile_1"))
    assert (tmp_path / "profile_1").read_bytes() == data


def test_a_tf_graph_names_its_trainable_variables():
    """A tf.Graph (here a stand-in with its two methods) is sent as as_graph_def(add_shapes=True)
    and its TRAINABLE_VARIABLES collection types the variables `_trainable_variables`."""
    log = tfprof_log_pb2.OpLogProto.FromString((FIXTURES / "cnn" / "op_log.pb").read_bytes())
    trainable = [e.name for e in log.log_entries if "_trainable_variables" in e.types]
    graph_def = graph_pb2.GraphDef.FromString((FIXTURES / "cnn" / "graph.pb").read_bytes())
    assert trainable

    class Op:
        def __init__(self, name):
            self.name = name

    class Variable:
        def __init__(self, name):
            self.op = Op(name)

    class Graph:
        def as_graph_def(self, add_shapes=False):
            assert add_shapes
            return graph_def

        def get_collection(self, key):
            assert key == "trainable_variables"
            return [Variable(n) for n in trainable]

    opts = dict(B.trainable_variables_parameter(), output="none")
    want = text_format.Parse((GOLDEN / "cnn" / "scope_preset_params.pbtxt").read_text(), GraphNodeProto())
    run_meta = FIXTURES / "cnn" / "run_meta_0.pb"
    assert tfprof.profile(Graph(), run_meta, options=opts) == want
    prof = tfprof.Profiler(Graph())
    prof.add_step(0, run_meta)
    assert prof.profile_name_scope(opts) == want
    # A GraphDef alone does not say which variables are trainable.
    assert tfprof.profile(graph_def, run_meta, options=opts).total_parameters == 0


def test_timeline_output_is_written(tmp_path, capsys):
    """-output timeline goes through the command line's writer (tfprof.api.write_output)."""
    out = tmp_path / "trace.json"
    opts = B().with_timeline_output(str(out)).with_step(1).with_max_depth(3).build()
    profiler("multistep").profile_name_scope(opts)
    assert json.loads((tmp_path / "trace.json_1").read_text())["traceEvents"]
    assert str(tmp_path / "trace.json_1") in capsys.readouterr().out


# ------------------------------------------------------------------------------ write_op_log


def test_write_op_log_writes_the_merged_log(tmp_path):
    caller = tfprof_log_pb2.OpLogProto()
    caller.log_entries.add(name="w", types=["mine"], float_ops=3)
    caller.id_to_string[4] = "x.py"
    tfprof.write_op_log(FIXTURES / "cnn" / "graph.pb", tmp_path, op_log=caller)
    written = tfprof_log_pb2.OpLogProto.FromString((tmp_path / "tfprof_log").read_bytes())
    assert [(e.name, list(e.types), e.float_ops) for e in written.log_entries] == [("w", ["mine"], 3)]
    assert dict(written.id_to_string) == {0: "none", 4: "x.py"}


def test_write_op_log_fixture_log_reads_as_the_original(tmp_path):
    """Written through write_op_log (GraphDef given: nothing added), the fixture's op log gives
    the same profile."""
    inputs = raw_inputs("rnn")
    tfprof.write_op_log(str(inputs["graph_path"]), str(tmp_path), op_log=inputs["op_log_path"])
    want = tfprof.load(**inputs).tables()
    got = tfprof.load(**{**inputs, "op_log_path": tmp_path / "tfprof_log"}).tables()
    for name in TABLES:
        assert_tables_equal(want[name], got[name], name)


def test_merge_follows_tensorflows_rules():
    from tfprof.ingest.op_log import default_op_log, merge_op_logs

    default = default_op_log(["a", "b"])
    default.log_entries[0].float_ops = 5
    default.log_entries[0].code_def.traces.add(file="d.py")
    caller = tfprof_log_pb2.OpLogProto()
    caller.log_entries.add(name="b", types=["t"], float_ops=7)
    caller.log_entries[0].code_def.traces.add(file="c.py")
    caller.log_entries.add(name="a", types=["u"])
    merged = merge_op_logs(default, caller)
    by_name = {e.name: e for e in merged.log_entries}
    assert [e.name for e in merged.log_entries] == ["b", "a"]  # the caller's entries first
    assert list(by_name["a"].types) == ["u", "_trainable_variables"]
    assert by_name["a"].float_ops == 5 and by_name["b"].float_ops == 7  # the caller's wins unless 0
    assert by_name["a"].code_def.traces[0].file == "d.py" and by_name["b"].code_def.traces[0].file == "c.py"
    assert len(caller.log_entries[1].types) == 1  # the caller's message is not changed


# ------------------------------------------------------------------------------ advise


def test_advise_wrappers(capsys):
    prof = profiler("multistep")
    want = core_advise(prof.to_profile())
    assert prof.advise() == want.proto
    assert capsys.readouterr().out == want.text
    chosen = prof.advise({"ExpensiveOperationChecker": {}})
    assert list(chosen.checkers) == ["ExpensiveOperationChecker"]
    inputs = raw_inputs("cnn")
    proto = tfprof.advise(inputs["graph_path"], inputs["run_meta_path"][0])
    assert "ExpensiveOperationChecker" in proto.checkers


# ------------------------------------------------------------------------------ bad input


def _one_line(exc: TfprofError) -> str:
    text = str(exc)
    assert text and "\n" not in text
    return text


@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda: tfprof.Profiler("/no/such/graph.pb"), InputNotFoundError, "/no/such/graph.pb"),
        (lambda: tfprof.Profiler(42), InputError, "int"),
        (lambda: tfprof.Profiler(graph_pb2.GraphDef()), InputError, "no nodes"),
        (lambda: profiler("cnn").add_step(0, graph_pb2.GraphDef()), InputError, "RunMetadata"),
        (lambda: profiler("cnn").add_step("0", FIXTURES / "cnn" / "run_meta_0.pb"), OptionError, "step"),
        (lambda: tfprof.Profiler(FIXTURES / "cnn" / "graph.pb", op_log=b"\xff\xff"), InputError, "OpLogProto"),
        (lambda: profiler("cnn").profile_operations(["micros"]), OptionError, "dict"),
        (lambda: profiler("cnn").profile_operations({"order_by": "microsecs"}), OptionError, "microsecs"),
        (lambda: profiler("cnn").profile_name_scope({"output": "file:outfile=/no/dir/x.txt"}), OutputError, "/no/dir"),
        (lambda: profiler("cnn").profile_name_scope({"output": "screen"}), OptionError, "screen"),
        (lambda: profiler("cnn").profile_name_scope({"step": 5}), OptionError, "5"),
        (lambda: tfprof.profile(FIXTURES / "cnn" / "graph.pb", cmd="advise"), OptionError, "advise"),
        (lambda: tfprof.profile(), OptionError, "graph"),
        (lambda: tfprof.load((FIXTURES / "cnn" / "profile.pb").read_bytes()[:999]), InputError, "in memory"),
        (lambda: tfprof.write_op_log(FIXTURES / "cnn" / "graph.pb", "/no/such/dir"), OutputError, "/no/such/dir"),
    ],
)
def test_bad_input_is_one_clear_error(call, error, words, capsys):
    with pytest.raises(error) as info:
        call()
    assert words in _one_line(info.value)
    assert capsys.readouterr().out == ""

"""Our ProfileProto writer (``tfprof.views.profile_proto``): the real tool reads its bytes and
prints what it prints for its own profiles, and our ingest reads them back into the same tables.

``tests/golden/roundtrip/<F>.profile.pb`` are our writer's bytes for each fixture, and
``tests/golden/roundtrip/<F>/`` the real tool's reports (and protos) on them, all made by
``tools/make_roundtrip_golden.py``. A protobuf-built oracle checks the encoding field by field.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import FIXTURES, assert_tables_equal, proto_comparable
from google.protobuf import text_format

import tfprof
from tfprof import Profile
from tfprof.api import run_view
from tfprof.errors import OptionError, ProfileFormatError
from tfprof.schema import TABLES
from tfprof.schema.proto import graph_pb2, tfprof_log_pb2
from tfprof.schema.proto.tfprof_output_pb2 import GraphNodeProto, MultiGraphNodeProto
from tfprof.views import wire_encode as W
from tfprof.views.profile_proto import TABLES_WRITTEN, profile_proto_bytes

ROUND = Path(__file__).parent / "golden" / "roundtrip"
NAMES = ("cnn", "rnn", "multistep", "gpu_tiny")
REGENERATE = "regenerate with: python tools/make_roundtrip_golden.py"
# Not in a ProfileProto: the raw per-allocator entries and checkpoint tensors (docs/TFPROF_BEHAVIOUR.md, 'ProfileProto').
NOT_WRITTEN = {"allocator_memory", "checkpoint_tensors"}

_TABLES: dict[str, dict[str, pa.Table]] = {}


def fixture_tables(name: str) -> dict[str, pa.Table]:
    """The tables of the real tool's own profile of fixture ``name``."""
    if name not in _TABLES:
        _TABLES[name] = tfprof.load(profile_path=FIXTURES / name / "profile.pb").tables()
    return _TABLES[name]


def raw_inputs(name: str) -> dict:
    """Fixture ``name``'s raw inputs, whatever their format (gpu_tiny: text, no op log)."""
    d = FIXTURES / name
    metas = sorted(d.glob("run_meta_*"), key=lambda p: int(p.name.split("_")[2].split(".")[0]))
    out = {"graph_path": d / "graph.pb" if (d / "graph.pb").exists() else d / "graph.pbtxt",
           "run_meta_path": [str(p) for p in metas]}  # fmt: skip
    if (d / "op_log.pb").exists():
        out["op_log_path"] = d / "op_log.pb"
    return out


def read_back(data: bytes) -> dict[str, pa.Table]:
    return tfprof.load(profile_path=data).tables()


def assert_same_tables(a: dict[str, pa.Table], b: dict[str, pa.Table]) -> None:
    for name in TABLES:
        if name in NOT_WRITTEN:
            assert b[name].num_rows == 0, name
        else:
            assert_tables_equal(proto_comparable(a[name], name), proto_comparable(b[name], name), name)


# ------------------------------------------------------------------------------ golden bytes


@pytest.mark.parametrize("name", NAMES)
def test_writer_reproduces_committed_bytes(name):
    committed = (ROUND / f"{name}.profile.pb").read_bytes()
    assert profile_proto_bytes(fixture_tables(name)) == committed, f"writer output changed; {REGENERATE}"


def _cases():
    for name in NAMES:
        for case in json.loads((ROUND / name / "cases.json").read_text()):
            yield pytest.param(name, case, id=f"{name}-{case['id']}")


_OURS: dict[str, Profile] = {}


@pytest.mark.parametrize("name,case", list(_cases()))
def test_views_of_our_bytes_equal_the_real_tools(name, case):
    """The real tool's report on our bytes, line for line, is our report on them."""
    if name not in _OURS:
        _OURS[name] = tfprof.load(profile_path=ROUND / f"{name}.profile.pb")
    expected = (ROUND / name / f"{case['id']}.txt").read_text()
    options = {k: v for k, v in case["options"].items() if k != "output"}
    if not expected:  # the real tool wrote nothing (a step that does not exist): we refuse
        with pytest.raises(OptionError):
            run_view(_OURS[name], case["cmd"], options)
        return
    result = run_view(_OURS[name], case["cmd"], options)
    if result.text != expected:
        diff = difflib.unified_diff(expected.splitlines(True), result.text.splitlines(True), "tfprof", "ours", n=1)
        pytest.fail(f"{name} {case['id']} differs from the real tool on our bytes:\n{''.join(list(diff)[:40])}")
    pbtxt = ROUND / name / f"{case['id']}.pbtxt"
    if pbtxt.exists():
        cls = GraphNodeProto if case["cmd"] in ("scope", "graph") else MultiGraphNodeProto
        assert text_format.Parse(pbtxt.read_text(), cls()) == result.proto


def test_real_tool_saw_its_own_reports():
    """make_roundtrip_golden.py compared the real tool's reports on our bytes with its reports on
    its own profile: every one was identical."""
    for name in NAMES:
        meta = json.loads((ROUND / name / "meta.json").read_text())
        differ = [cid for cid, c in meta["cases"].items() if not c["same_as_original_profile"]]
        assert not differ, f"{name}: the real tool reads our bytes differently for {differ}"
        assert len(meta["cases"]) >= 10


# ------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_of_a_profile_proto(name):
    tables = fixture_tables(name)
    assert_same_tables(tables, read_back(profile_proto_bytes(tables)))


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_of_raw_inputs(name):
    tables = tfprof.load(**raw_inputs(name)).tables()
    back = read_back(profile_proto_bytes(tables))
    assert_same_tables(tables, back)
    # And what the real tool built from the same files.
    assert_same_tables(fixture_tables(name), back)


@pytest.mark.parametrize("name", NAMES)
def test_encoding_equals_protobufs(name):
    """Field by field, our bytes are the message protobuf builds from the same tables."""
    tables = fixture_tables(name)
    ours = tfprof_log_pb2.ProfileProto.FromString(profile_proto_bytes(tables))
    assert ours == reference_message(tables)


def test_map_entries_in_key_order():
    """Maps are written in key order (what protobuf's deterministic C++ serializer writes)."""
    data = (ROUND / "multistep.profile.pb").read_bytes()
    keys, pos = [], 0
    while data[pos] == 0x0A:  # nodes entries come first
        length, start = _varint(data, pos + 1)
        keys.append(_varint(data, start + 1)[0])  # entry: 08 <key>
        pos = start + length
    assert keys == sorted(keys) and len(keys) == fixture_tables("multistep")["nodes"].num_rows


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        value |= (b & 0x7F) << shift
        pos += 1
        shift += 7
        if b < 0x80:
            return value, pos


EDGES = r"""
nodes { key: 0 value { name: "w" op: "VariableV2" id: 0 shape: 3 shape: 2 op_types: "VariableV2"
  op_types: "_trainable_variables" canonical_device: "/job:x/device:cpu:0" host_device: "/job:x/device:cpu:0"
  attrs { key: "dtype" value { type: DT_FLOAT } }
  output_shapes { key: 0 value { int64_values: 3 int64_values: 2 } }
  execs { key: 3 value { run_count: 2 all_start_micros: 10 latest_end_micros: 30
    cpu_execs { key: "/job:x/device:cpu:0" value { times { int64_values: 10 int64_values: 5 }
                                                   times { int64_values: 20 int64_values: 10 } } }
    devices: "/job:x/device:cpu:0"
    memory_execs { memory_micros: 15 requested_bytes: 24 output_memory { key: 0 value { bytes: 24 ptr: 18446744073709551615 } } }
    memory_execs { memory_micros: 30 peak_bytes: 48 }
    allocations { alloc_micros: 11 alloc_bytes: -24 } } }
  trace { traces { file: "m.py" lineno: -1 function: "f\u00e9" line: "" func_start_line: -1 } } } }
nodes { key: 5 value { name: "r/\u00fcber" op: "Identity" id: 5 shape: 1
  inputs { key: 0 value: 0 } inputs { key: 1 value: 9 } src_output_index { key: 0 value: 2 } src_output_index { key: 9 value: 0 }
  output_shapes { key: 1 value { } }
  execs { key: 7 value { run_count: 1 all_start_micros: 40 latest_end_micros: 41
    accelerator_execs { key: "/job:x/device:gpu:0/stream:all" value { times { int64_values: 40 int64_values: 1 } } }
    accelerator_execs { key: "/job:x/device:gpu:0/stream:1" value { times { int64_values: 40 int64_values: 1 } } }
    devices: "/job:x/device:gpu:0/stream:1" devices: "/job:x/device:gpu:0/stream:all" } } } }
nodes { key: 9 value { name: "c" op: "Const" id: 9 float_ops: 7 } }
has_trace: true steps: 3 steps: 7 miss_accelerator_stream: true
"""


def test_edge_values_round_trip():
    """Negative numbers, a full uint64, non-ASCII names, sparse ids and steps, a non-zero
    output slot, empty shapes: read, written, read again, nothing changes."""
    msg = text_format.Parse(EDGES, tfprof_log_pb2.ProfileProto())
    tables = read_back(msg.SerializeToString())
    assert tables["output_memory"].column("ptr").to_pylist() == [2**64 - 1]
    data = profile_proto_bytes(tables)
    assert_same_tables(tables, read_back(data))
    assert tfprof_log_pb2.ProfileProto.FromString(data) == reference_message(tables)


def test_dangling_input_is_left_out():
    """An input naming no node has no id to write (tfprof aborts there): the edge is left out."""
    graph = graph_pb2.GraphDef()
    graph.node.add(name="a", op="Const")
    graph.node.add(name="b", op="Identity", input=["a", "ghost:1", "^a"])
    tables = tfprof.load(graph_path=graph).tables()
    assert tables["node_inputs"].column("input_id").null_count == 1
    back = read_back(profile_proto_bytes(tables))
    assert back["node_inputs"].column("input_name").to_pylist() == ["a", "a"]
    assert back["node_inputs"].column("input_idx").to_pylist() == [0, 2]


def test_inconsistent_tables_are_refused():
    execs = fixture_tables("gpu_tiny")["execs"]
    bad = execs.set_column(1, "step", pa.array([99] * execs.num_rows, pa.int64()))
    with pytest.raises(ProfileFormatError, match="step"):
        profile_proto_bytes({**fixture_tables("gpu_tiny"), "execs": bad})


def test_only_the_written_tables_are_read():
    tables = {name: fixture_tables("cnn")[name] for name in TABLES_WRITTEN}
    assert profile_proto_bytes(tables) == (ROUND / "cnn.profile.pb").read_bytes()


# ------------------------------------------------------------------------------ encoder units


def test_varints_as_protobuf_writes_them():
    values = [0, 1, 127, 128, 300, 2**31, -1, -(2**63), 2**63 - 1]
    col = W.scalars(1, np.array(values, np.int64), keep_zero=True)
    out = W.encode(col)
    for i, v in enumerate(values):
        want = tfprof_log_pb2.ExecMemory(memory_micros=v).SerializeToString() or b"\x08\x00"
        assert out[col.off[i] : col.off[i + 1]].tobytes() == want, v


def test_group_needs_every_row():
    with pytest.raises(ValueError):
        W.group(W.varints(np.arange(3)), np.array([0, 2]))


# ------------------------------------------------------------------------------ oracle


def reference_message(tables: dict[str, pa.Table]) -> tfprof_log_pb2.ProfileProto:
    """The ProfileProto built from the tables with protobuf, row by row (slow, obviously right)."""
    p = tfprof_log_pb2.ProfileProto()
    rows = {k: tables[k].to_pylist() for k in TABLES_WRITTEN}
    strings = sorted({f[k] for f in rows["code_frames"] for k in ("file", "function", "line")})
    ids = {s: i for i, s in enumerate(strings)}
    for i, s in enumerate(strings):
        p.id_to_string[i] = s
    for r in rows["nodes"]:
        n = p.nodes[r["node_id"]]
        n.id, n.name, n.op, n.float_ops = r["node_id"], r["name"], r["op"], r["float_ops"]
        n.shape.extend(r["shape"])
        n.canonical_device, n.host_device = r["canonical_device"] or "", r["host_device"] or ""
    for r in rows["node_inputs"]:
        if r["input_id"] is not None:
            n = p.nodes[r["node_id"]]
            n.inputs[r["input_idx"]] = r["input_id"]
            n.src_output_index[r["input_id"]] = r["output_slot"]
    for r in rows["node_types"]:
        p.nodes[r["node_id"]].op_types.append(r["op_type"])
    for r in rows["output_shapes"]:
        p.nodes[r["node_id"]].output_shapes[r["slot"]].int64_values.extend(r["dims"])
    for r in rows["node_attrs"]:
        p.nodes[r["node_id"]].attrs[r["attr"]].ParseFromString(r["value"])
    for r in rows["code_frames"]:
        t = p.nodes[r["node_id"]].trace.traces.add()
        t.lineno, t.func_start_line = r["lineno"], r["func_start_line"]
        t.file_id, t.function_id, t.line_id = ids[r["file"]], ids[r["function"]], ids[r["line"]]
    for r in rows["node_steps"]:
        e = p.nodes[r["node_id"]].execs[r["step"]]
        e.run_count, e.all_start_micros, e.latest_end_micros = r["run_count"], r["all_start_micros"], r["latest_end_micros"]
    for r in rows["exec_devices"]:
        p.nodes[r["node_id"]].execs[r["step"]].devices.append(r["device"])
    for r in rows["execs"]:
        e = p.nodes[r["node_id"]].execs[r["step"]]
        times = e.accelerator_execs if r["kind"] == "accelerator" else e.cpu_execs
        times[r["device"]].times.add().int64_values.extend([r["start_micros"], r["duration_micros"]])
    memory_fields = [c for c in TABLES["memory"].schema.names if c not in ("node_id", "step", "seq")]
    for r in rows["memory"]:
        m = p.nodes[r["node_id"]].execs[r["step"]].memory_execs.add()
        for c in memory_fields:
            setattr(m, c, r[c])
    for r in rows["output_memory"]:
        out = p.nodes[r["node_id"]].execs[r["step"]].memory_execs[r["seq"]].output_memory[r["slot"]]
        out.bytes, out.ptr = r["bytes"], r["ptr"]
    for r in rows["allocations"]:
        a = p.nodes[r["node_id"]].execs[r["step"]].allocations.add()
        a.alloc_micros, a.alloc_bytes = r["alloc_micros"], r["alloc_bytes"]
    p.steps.extend(r["step"] for r in rows["steps"])
    info = rows["info"][0]
    p.has_trace, p.miss_accelerator_stream = info["has_trace"], info["miss_accelerator_stream"]
    return p

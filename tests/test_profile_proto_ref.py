"""The columnar ProfileProto encoder (``tfprof.views.profile_proto``) against protobuf's runtime
(``tfprof.views.profile_proto_ref``), on every profile our tests write as a ProfileProto: the
four round-trip goldens, synthetic profiles, and hand-written edge cases.

Two checks. The encoder's bytes parse to the message the runtime builds from the same tables
(in this process: protobuf's default upb runtime). And they are the bytes that the runtime's
``SerializeToString(deterministic=True)`` writes: checked in a child process running protobuf's
pure-Python runtime, which writes map entries in key order as the encoder does (upb writes them
in another order). Attr values are written as the ``node_attrs`` table holds them and the runtime
re-encodes them: equal because ingest stores them re-encoded too (``synth_odd_attrs`` has attrs
that its file holds in a non-canonical encoding).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES
from google.protobuf import text_format

import tfprof
from tfprof.schema.proto import graph_pb2, tfprof_log_pb2
from tfprof.views.profile_proto import TABLES_WRITTEN, profile_proto_bytes
from tfprof.views.profile_proto_ref import reference_message

ROOT = Path(__file__).resolve().parent.parent
ROUND = Path(__file__).parent / "golden" / "roundtrip"
GOLDEN = ("cnn", "rnn", "multistep", "gpu_tiny")
SYNTHETIC = {  # synthlib.generate keywords
    "synth_300x2": {"nodes": 300, "steps": 2},
    "synth_cpu_no_trace": {"nodes": 300, "steps": 2, "gpu": False, "trace": False, "empty_steps": 1},
    "synth_odd_attrs": {"nodes": 300, "steps": 2, "odd_attrs": True},
}

# Negative numbers, a full uint64, non-ASCII names, sparse ids and steps, several devices and
# memory records, allocations, repeated producers: what the fixtures may lack.
EDGES = r"""
nodes { key: 0 value { name: "w" op: "VariableV2" id: 0 shape: 3 shape: 2 op_types: "VariableV2"
  op_types: "_trainable_variables" canonical_device: "/job:x/device:cpu:0" host_device: "/job:x/device:cpu:0"
  attrs { key: "dtype" value { type: DT_FLOAT } }
  output_shapes { key: 0 value { int64_values: 3 int64_values: 2 } }
  execs { key: 3 value { run_count: 2 all_start_micros: 10 latest_end_micros: 30
    cpu_execs { key: "/job:x/device:cpu:0" value { times { int64_values: 10 int64_values: 5 }
                                                   times { int64_values: 20 int64_values: 10 } } }
    devices: "/job:x/device:cpu:0"
    memory_execs { memory_micros: 15 requested_bytes: 24
                   output_memory { key: 0 value { bytes: 24 ptr: 18446744073709551615 } }
                   output_memory { key: 3 value { bytes: 8 } } }
    memory_execs { memory_micros: 30 peak_bytes: 48 }
    allocations { alloc_micros: 11 alloc_bytes: -24 } allocations { alloc_micros: 12 alloc_bytes: 24 } } }
  trace { traces { file: "m.py" lineno: -1 function: "f\u00e9" line: "" func_start_line: -1 }
          traces { file: "n.py" lineno: 7 function: "g" line: "x = w" } } } }
nodes { key: 5 value { name: "r/\u00fcber" op: "Identity" id: 5 shape: 1
  inputs { key: 0 value: 0 } inputs { key: 1 value: 9 } inputs { key: 2 value: 0 }
  src_output_index { key: 0 value: 2 } src_output_index { key: 9 value: 0 }
  output_shapes { key: 1 value { } }
  execs { key: 7 value { run_count: 1 all_start_micros: 40 latest_end_micros: 41
    accelerator_execs { key: "/job:x/device:gpu:0/stream:all" value { times { int64_values: 40 int64_values: 1 } } }
    accelerator_execs { key: "/job:x/device:gpu:0/stream:1" value { times { int64_values: 40 int64_values: 1 } } }
    cpu_execs { key: "/job:x/device:cpu:0" value { times { int64_values: 39 int64_values: 1 } } }
    devices: "/job:x/device:gpu:0/stream:1" devices: "/job:x/device:gpu:0/stream:all" } } } }
nodes { key: 9 value { name: "c" op: "Const" id: 9 float_ops: 7 } }
has_trace: true steps: 3 steps: 7 miss_accelerator_stream: true
"""


def _dangling_graph() -> bytes:
    """A graph whose node names an input no node has (the writer leaves that edge out)."""
    graph = graph_pb2.GraphDef()
    graph.node.add(name="a", op="Const")
    graph.node.add(name="b", op="Identity", input=["a", "ghost:1", "^a"])
    return graph.SerializeToString()


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, dict]:
    """Case name -> ``tfprof.load`` keywords (paths, so a child process can load them too)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))  # synthlib, under the name its numba cache has
    synthlib = importlib.import_module("synthlib")
    tmp = tmp_path_factory.mktemp("profile_proto_ref")
    out = {name: {"profile_path": str(FIXTURES / name / "profile.pb")} for name in GOLDEN}
    for name, kw in SYNTHETIC.items():
        (tmp / f"{name}.pb").write_bytes(synthlib.generate(**kw))
        out[name] = {"profile_path": str(tmp / f"{name}.pb")}
    (tmp / "edges.pb").write_bytes(text_format.Parse(EDGES, tfprof_log_pb2.ProfileProto()).SerializeToString())
    out["edges"] = {"profile_path": str(tmp / "edges.pb")}
    (tmp / "dangling.pb").write_bytes(_dangling_graph())
    out["dangling_input"] = {"graph_path": str(tmp / "dangling.pb")}
    return out


def _tables(kw: dict) -> dict:
    prof = tfprof.load(**kw)
    return {name: prof.table(name) for name in TABLES_WRITTEN}


def test_encoder_bytes_parse_to_the_runtimes_message(cases):
    for name, kw in cases.items():
        tables = _tables(kw)
        ours = tfprof_log_pb2.ProfileProto.FromString(profile_proto_bytes(tables))
        assert ours == reference_message(tables), name


def test_goldens_are_the_encoders_bytes():
    for name in GOLDEN:
        data = profile_proto_bytes(_tables({"profile_path": FIXTURES / name / "profile.pb"}))
        assert data == (ROUND / f"{name}.profile.pb").read_bytes(), name


# A child process with protobuf's pure-Python runtime: per case, whether the runtime's
# deterministic bytes are the encoder's (and their sizes, for the message on failure).
_CHILD = """
import json, sys
import tfprof
from tfprof.views.profile_proto import TABLES_WRITTEN, profile_proto_bytes
from tfprof.views.profile_proto_ref import reference_bytes
from google.protobuf.internal import api_implementation
assert api_implementation.Type() == "python", api_implementation.Type()
out = {}
for name, kw in json.loads(sys.argv[1]).items():
    prof = tfprof.load(**kw)
    tables = {t: prof.table(t) for t in TABLES_WRITTEN}
    ours, theirs = profile_proto_bytes(tables), reference_bytes(tables)
    out[name] = [ours == theirs, len(ours), len(theirs)]
print(json.dumps(out))
"""


def test_encoder_bytes_are_the_runtimes_bytes(cases):
    env = {**os.environ, "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python", "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(cases)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=600, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(result) == set(cases)
    for name, (same, ours, theirs) in result.items():
        assert same, f"{name}: the encoder wrote {ours} bytes, the runtime {theirs}, not the same"

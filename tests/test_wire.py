"""The numba wire decoder (tfprof.ingest.wire) gives exactly the reference decoder's tables.

The reference is ``tables_from_message(parse_profile(path))``: every table must be equal with
``pa.Table.equals`` (dictionaries included), on synthetic profiles of several shapes, on the
real tool's fixtures, in any batch size; damaged files must raise ``ProfileFormatError``.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import tfprof
from tfprof.errors import InputNotFoundError, ProfileFormatError
from tfprof.ingest import wire
from tfprof.ingest.profile_proto import parse_profile, tables_from_message
from tfprof.schema import TABLES
from tfprof.schema.proto import attr_value_pb2, tensor_pb2, tfprof_log_pb2

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_PROFILES = sorted((ROOT / "tests" / "fixtures").glob("*/profile.pb"))


def _load_synth():
    # always the module name `synthlib`, as benchmarks/synth.py imports it: numba's cache of its
    # kernels is keyed by module and must be loadable by both
    sys.path.insert(0, str(ROOT / "benchmarks"))
    return importlib.import_module("synthlib")


synth = _load_synth()

SHAPES = {
    "default": dict(nodes=400, steps=3),
    "one_step": dict(nodes=300, steps=1),
    "no_trace": dict(nodes=300, steps=2, trace=False),
    "cpu_only": dict(nodes=300, steps=2, gpu=False, loops=False),
    "key_order": dict(nodes=300, steps=2, key_order=True),
    "empty_steps": dict(nodes=300, steps=2, empty_steps=3),
    "odd_attrs": dict(nodes=300, steps=2, odd_attrs=True),
    "deep_scopes": dict(nodes=300, steps=2, scope_depth=9, seed=7),
    "dense_deep_traces": dict(nodes=600, steps=2, dense_fraction=0.5, trace_depth=(3, 25)),
}


@pytest.fixture(scope="module")
def synth_files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("synth")
    out = {}
    for name, kw in SHAPES.items():
        kw = dict(kw)
        path = d / f"{name}.pb"
        synth.write_profile(path, kw.pop("nodes"), kw.pop("steps"), **kw)
        out[name] = path
    return out


def reference(path: Path) -> dict[str, pa.Table]:
    return tables_from_message(parse_profile(path))


def assert_same_tables(ours: dict[str, pa.Table], ref: dict[str, pa.Table]) -> None:
    assert list(ours) == list(ref)
    for name in ref:
        a, b = ours[name].combine_chunks(), ref[name].combine_chunks()
        assert a.schema.equals(TABLES[name].schema), name
        if a.equals(b):
            continue
        assert a.num_rows == b.num_rows, f"{name}: {a.num_rows} rows vs {b.num_rows}"
        for col in b.column_names:
            ca, cb = a.column(col), b.column(col)
            if ca.equals(cb):
                continue
            la, lb = ca.to_pylist(), cb.to_pylist()
            diff = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), None)
            if diff is None:  # same values: the dictionary order differs
                raise AssertionError(f"{name}.{col}: dictionaries differ: {ca.chunk(0).dictionary} vs "
                                     f"{cb.chunk(0).dictionary}")
            raise AssertionError(f"{name}.{col} row {diff}: {la[diff]!r} vs {lb[diff]!r}")
        raise AssertionError(f"{name}: tables differ")


# ------------------------------------------------------------------------------------ equality


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_synthetic_profiles_match_reference(synth_files, shape):
    assert_same_tables(wire.decode_profile(synth_files[shape]), reference(synth_files[shape]))


@pytest.mark.parametrize("path", FIXTURE_PROFILES, ids=[p.parent.name for p in FIXTURE_PROFILES])
def test_fixture_profiles_match_reference(path):
    assert_same_tables(wire.decode_profile(path), reference(path))


@pytest.mark.parametrize("batch_nodes, prefetch", [(1, True), (7, True), (10_000, True), (7, False)])
def test_batches_concatenate_to_the_whole_tables(synth_files, batch_nodes, prefetch):
    path = synth_files["default"]
    reader = wire.ProfileReader(path, batch_nodes=batch_nodes, prefetch=prefetch)
    batches = list(reader.batches())
    assert len(batches) == -(-400 // batch_nodes)
    last = -1
    for batch in batches:
        assert list(batch) == list(wire.BATCH_TABLES)
        ids = batch["nodes"].column("node_id").to_numpy()
        assert ids[0] == last + 1 and (np.diff(ids) == 1).all()  # contiguous, ascending
        for name, table in batch.items():
            assert table.schema.equals(TABLES[name].schema), name
            node_ids = table.column("node_id").to_numpy()
            assert ((node_ids >= ids[0]) & (node_ids <= ids[-1])).all(), name
        last = ids[-1]
    whole = {name: wire.concat_batches([b[name] for b in batches]) for name in wire.BATCH_TABLES}
    whole.update(reader.profile_tables())
    ref = reference(path)
    assert_same_tables({name: whole[name] for name in ref}, ref)


def test_index_and_reader_agree(synth_files):
    path = synth_files["empty_steps"]
    index = wire.scan_profile(path)
    assert index.num_nodes == 300
    assert index.steps.tolist() == [0, 1, 2, 3, 4]
    assert index.has_trace and not index.miss_accelerator_stream
    assert index.names[0].as_py() == "input/images"
    a = list(wire.iter_profile_batches(path, index=index, batch_nodes=100))
    b = list(wire.iter_profile_batches(path, batch_nodes=100))
    for x, y in zip(a, b, strict=True):
        for name in wire.BATCH_TABLES:
            assert x[name].equals(y[name])


def test_concatenated_profiles_merge_like_protobuf(synth_files, tmp_path):
    """Two serialized profiles back to back are one merged message: later nodes replace earlier
    ones with the same id, steps add up, id_to_string merges."""
    path = tmp_path / "merged.pb"
    path.write_bytes(synth_files["one_step"].read_bytes() + synth_files["key_order"].read_bytes())
    assert_same_tables(wire.decode_profile(path), reference(path))


# ------------------------------------------------------------------------------------ crafted


def _node(nid: int, name: str, **kw) -> tfprof_log_pb2.ProfileNode:
    return tfprof_log_pb2.ProfileNode(id=nid, name=name, op=kw.pop("op", "Op"), **kw)


def _profile(*nodes: tfprof_log_pb2.ProfileNode, steps=(0,)) -> tfprof_log_pb2.ProfileProto:
    prof = tfprof_log_pb2.ProfileProto(steps=list(steps))
    for n in nodes:
        prof.nodes[n.id].CopyFrom(n)
    return prof


def _write(tmp_path: Path, data: bytes | tfprof_log_pb2.ProfileProto, name: str = "p.pb") -> Path:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.SerializeToString())
    return path


def _entry(field: int, key: bytes, value: bytes) -> bytes:
    return _ld(field, key + value)


def _ld(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _attr_values() -> list[attr_value_pb2.AttrValue]:
    """AttrValues of many kinds, including ones whose raw bytes need re-serializing."""
    av = attr_value_pb2.AttrValue
    shape = av(shape={"dim": [{"size": 3}, {"size": -1, "name": "batch"}]})
    tensor = tensor_pb2.TensorProto(dtype=1, tensor_shape={"dim": [{"size": 2}]}, float_val=[1.5, -0.0],
                                    half_val=[1, 2], int64_val=[-5], string_val=[b"a", b""])
    func = av(func={"name": "f", "attr": {"b": av(i=2), "a": av(s=b"x"), "c": av(b=False)}})
    return [
        av(i=0), av(i=-7), av(f=-0.0), av(f=2.5), av(b=False), av(b=True), av(type=3), av(s=b""), av(s=b"\xff\x00"),
        av(placeholder="T"), shape, av(shape={"unknown_rank": True}), av(tensor=tensor),
        av(list={"i": [1, -1, 1 << 40], "f": [0.5], "b": [True, False], "type": [1, 9], "s": [b"x", b""]}),
        av(list={"shape": [shape.shape, {}], "tensor": [tensor]}), av(list={}), func, av(list={"func": [func.func]}),
    ]


def test_attr_values_match_protobuf_serialization(tmp_path):
    """Raw attr slices are used only when they equal protobuf's deterministic serialization."""
    values = _attr_values()
    node = _node(0, "n", attrs={f"a{i:02d}": v for i, v in enumerate(values)})
    # Non-canonical but valid encodings of the same values: unpacked repeated ints, a map in
    # reverse key order, an explicit zero in a proto3 field, a padded varint.
    odd = [
        _ld(1, b"\x18\x01\x18\x02"),  # list.i unpacked
        _ld(10, _ld(1, b"f") + _entry(2, _ld(1, b"b"), _ld(2, b"\x18\x02")) + _entry(2, _ld(1, b"a"), _ld(2, b"\x18\x01"))),
        _ld(7, _ld(2, b"\x08\x00")),  # Dim.size written as 0
        b"\x18\x85\x00",  # i = 5 in a 2-byte varint
        _ld(8, b"\x08\x01" + _ld(5, b"")),  # an empty packed field
    ]
    extra = b"".join(_entry(11, _ld(1, f"z{i}".encode()), _ld(2, v)) for i, v in enumerate(odd))
    node_bytes = node.SerializeToString(deterministic=True) + extra
    path = _write(tmp_path, _ld(1, b"\x08\x00" + _ld(2, node_bytes)) + _ld(3, b"\x00"))
    ours = wire.decode_profile(path)
    assert_same_tables(ours, reference(path))
    assert ours["node_attrs"].num_rows == len(values) + len(odd)


def _canonical(raw: bytes) -> bool:
    buf = np.frombuffer(raw, np.uint8)
    return wire.is_canonical(buf, 0, len(buf), wire.SPEC_KIND, wire.SPEC_SUB, np.empty((16, 4), np.int64))


def test_canonical_check_accepts_exactly_protobufs_own_bytes():
    """Whatever the check accepts, protobuf re-serializes to the same bytes (mutation test)."""
    accepted = 0
    rng = random.Random(5)
    for v in _attr_values():
        raw = v.SerializeToString(deterministic=True)
        assert _canonical(raw) == (not v.HasField("func") and not v.list.func), v
        for _ in range(40):
            bad = bytearray(raw)
            if bad:
                bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
            if _canonical(bytes(bad)):
                accepted += 1
                assert attr_value_pb2.AttrValue.FromString(bytes(bad)).SerializeToString(deterministic=True) == bad
    assert accepted > 50


def test_maps_in_any_order_with_repeated_keys(tmp_path):
    """C++ writes maps in hash order; a repeated key keeps its last entry, as protobuf does."""
    a = _node(3, "a", inputs={0: 5, 1: 7}, src_output_index={5: 1, 7: 2}, output_shapes={1: {"int64_values": [2]}})
    b = _node(5, "b", op_types=["z", "B", "/device:cpu:0", "B"])
    c = _node(7, "c")
    e = a.execs[1]
    e.cpu_execs["/dev:b"].times.add(int64_values=[10, 2])
    e.cpu_execs["/dev:a"].times.add(int64_values=[5])
    e.accelerator_execs["/dev:a/stream:all"].times.add(int64_values=[6, 1, 9])
    e.devices.extend(["/dev:b", "/dev:a/stream:all", "/dev:a"])
    m = e.memory_execs.add(requested_bytes=4)
    m.output_memory[1].bytes = 8
    m.output_memory[0].ptr = (1 << 64) - 1
    a.execs[0].run_count = 2
    parts = [_entry(1, b"\x08" + _varint(n.id), _ld(2, n.SerializeToString())) for n in (c, a, b)]
    # Node 7 again (the last entry wins), an extra input entry for index 0, a repeated exec step.
    c2 = _node(7, "c2", op="Other")
    parts.append(_entry(1, b"\x08\x07", _ld(2, c2.SerializeToString())))
    a_more = _entry(2, b"\x08\x00", b"\x10\x07") + _entry(12, b"\x08\x00", _ld(2, b"\x08\x09"))
    parts[1] = _entry(1, b"\x08\x03", _ld(2, a.SerializeToString() + a_more))
    steps = _ld(3, b"\x00\x01") + b"\x18\x01"  # packed and unpacked, a repeated step
    path = _write(tmp_path, b"".join(parts) + steps)
    assert_same_tables(wire.decode_profile(path), reference(path))


def test_code_traces_inline_and_by_id(tmp_path):
    t = tfprof_log_pb2.CodeDef.Trace
    node = _node(0, "n", trace={"traces": [t(file="inline.py", lineno=3, function_id=2, line_id=99),
                                           t(file_id=1, function="f", lineno=-4, func_start_line=-1),
                                           t(file_id=12345)]})
    prof = _profile(node, _node(1, "m", trace={"traces": [t(file_id=2, function_id=1)]}))
    prof.has_trace = True
    prof.id_to_string.update({1: "a.py", 2: "main", 3: ""})
    path = _write(tmp_path, prof)
    assert_same_tables(wire.decode_profile(path), reference(path))


def test_value_given_twice_falls_back_to_protobuf(tmp_path):
    """A map entry whose value field appears twice is merged by protobuf; the kernels leave it
    to the reference decoder."""
    n = _node(0, "n")
    e = tfprof_log_pb2.ExecProfile(run_count=1)
    entry = _entry(12, b"\x08\x00", _ld(2, e.SerializeToString()) + _ld(2, b"\x10\x05"))
    path = _write(tmp_path, _entry(1, b"\x08\x00", _ld(2, n.SerializeToString() + entry)) + b"\x18\x00")
    assert_same_tables(wire.decode_profile(path), reference(path))
    batches = list(wire.iter_profile_batches(path))
    assert batches[0]["node_steps"].column("all_start_micros").to_pylist() == [5]


def test_python_reader_fallback(synth_files, monkeypatch):
    """Without libc's pread the nodes are read with seek + readinto: same tables."""
    monkeypatch.setattr(wire, "PREAD", None)
    path = synth_files["default"]
    assert_same_tables(wire.decode_profile(path), reference(path))


def test_groups_fall_back_to_protobuf(tmp_path):
    n = _node(0, "n").SerializeToString() + b"\x8b\x01\x08\x01\x8c\x01"  # group 17 { 1: 1 }
    path = _write(tmp_path, _entry(1, b"\x08\x00", _ld(2, n)))
    assert_same_tables(wire.decode_profile(path), reference(path))


# ------------------------------------------------------------------------------------ errors


CHECKS = {
    "no_nodes": (lambda: _profile().SerializeToString(), "it has no nodes"),
    # the map key (0) differs from the node's id (2)
    "wrong_id": (lambda: _entry(1, b"\x08\x00", _ld(2, _node(2, "x").SerializeToString())), "wrong id"),
    "no_name": (lambda: _profile(_node(0, "")).SerializeToString(), "no name"),
    "unknown_input": (lambda: _profile(_node(0, "a", inputs={0: 9})).SerializeToString(),
                      "node `a` has an input with unknown id 9"),
    "unlisted_step": (lambda: _profile(_node(0, "a", execs={4: {}, 2: {}}), steps=[0, 1]).SerializeToString(),
                      "node `a` has stats for unlisted step 2"),
}


@pytest.mark.parametrize("case", sorted(CHECKS))
def test_profile_checks(tmp_path, case):
    make, message = CHECKS[case]
    path = _write(tmp_path, make())
    with pytest.raises(ProfileFormatError, match=message):
        reference(path)
    with pytest.raises(ProfileFormatError, match=message) as err:
        wire.decode_profile(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_missing_empty_and_directory_inputs(tmp_path):
    with pytest.raises(InputNotFoundError):
        wire.decode_profile(tmp_path / "nope.pb")
    with pytest.raises(ProfileFormatError, match="is empty"):
        wire.decode_profile(_write(tmp_path, b""))
    with pytest.raises(ProfileFormatError, match="directory"):
        wire.decode_profile(tmp_path)


def test_wire_type_mismatch_and_bad_utf8_are_errors(tmp_path):
    name_as_varint = _entry(1, b"\x08\x00", _ld(2, b"\x08\x05" + _ld(9, b"op")))
    with pytest.raises(ProfileFormatError, match="wrong wire type"):
        wire.decode_profile(_write(tmp_path, name_as_varint, "a.pb"))
    bad_utf8 = _entry(1, b"\x08\x00", _ld(2, _ld(1, b"\xff\xfe")))
    with pytest.raises(ProfileFormatError):
        wire.decode_profile(_write(tmp_path, bad_utf8, "b.pb"))
    with pytest.raises(ProfileFormatError):
        reference(tmp_path / "b.pb")


def test_graphdef_is_not_a_profile():
    with pytest.raises(ProfileFormatError, match="not a valid ProfileProto"):
        wire.decode_profile(ROOT / "tests" / "fixtures" / "cnn" / "graph.pb")


def _same_or_error(path: Path) -> str:
    """Decode a damaged file: it must raise ProfileFormatError, or give the reference's tables."""
    try:
        ours = wire.decode_profile(path)
    except ProfileFormatError as exc:
        assert "\n" not in str(exc)
        return "error"
    ref = reference(path)  # we accepted the file: protobuf must accept it too, with the same rows
    assert_same_tables(ours, ref)
    return "ok"


def test_truncated_files(synth_files, tmp_path):
    data = synth_files["default"].read_bytes()
    for cut in (1, 2, 7, 100, len(data) // 3, len(data) // 2, len(data) - 1):
        path = _write(tmp_path, data[:cut], f"cut{cut}.pb")
        assert _same_or_error(path) == "error", cut


def test_bit_flips(synth_files, tmp_path):
    data = bytearray(synth_files["no_trace"].read_bytes())
    rng = random.Random(1)
    outcomes = []
    for k in range(60):
        bad = bytearray(data)
        pos = rng.randrange(len(bad))
        bad[pos] ^= 1 << rng.randrange(8)
        outcomes.append(_same_or_error(_write(tmp_path, bytes(bad), f"flip{k}.pb")))
    # Tags and lengths sit at the start of every field: flips near them must be caught.
    for k, pos in enumerate((0, 1, 2, 3, 4, 5)):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        outcomes.append(_same_or_error(_write(tmp_path, bytes(bad), f"head{k}.pb")))
    assert "error" in outcomes


def test_garbage(tmp_path):
    rng = np.random.default_rng(3)
    for k, size in enumerate((1, 5, 64, 1000, 50_000)):
        path = _write(tmp_path, rng.integers(0, 256, size, dtype=np.uint8).tobytes(), f"g{k}.pb")
        assert _same_or_error(path) == "error"
    # Garbage that starts like a nodes map entry, with a length running past the end.
    assert _same_or_error(_write(tmp_path, b"\x0a\xff\xff\x03" + bytes(100), "long.pb")) == "error"
    assert _same_or_error(_write(tmp_path, b"\x0a\x05\x08" + b"\xff" * 11, "varint.pb")) == "error"


@pytest.mark.parametrize("keys", [[3, 5, 7, 5, 0], [9, -2, 1 << 40, -2, 9, 4]], ids=["small ids", "any ids"])
def test_last_of_each_key(keys):
    """Map keys ascending with the position of each one's last entry: small non-negative ids are
    placed, others sorted; both as a dict keeps them."""
    from tfprof.ingest.wire.scan import _last_of_each_key

    last = {k: i for i, k in enumerate(keys)}
    unique, pos = _last_of_each_key(np.array(keys, np.int64))
    assert unique.tolist() == sorted(last) and pos.tolist() == [last[k] for k in sorted(last)]


def test_devices_met_in_batches_decoded_at_once(tmp_path):
    """Batches decoded on several threads at once intern the devices each one meets first (most
    nodes here have devices of their own); codes, dictionaries and the devices table come out
    as the reference decoder's."""
    nodes = []
    for i in range(300):
        node = _node(i, f"n{i}", canonical_device=f"/job:w/device:GPU:{i % 97}", host_device="/job:w/device:CPU:0")
        step = node.execs[0]
        step.run_count = 1
        step.cpu_execs[f"/job:w/device:CPU:{i}"].times.add(int64_values=[i, 1])
        step.accelerator_execs[f"/job:w/device:GPU:{i % 97}/stream:{i % 5}"].times.add(int64_values=[i, 2])
        step.devices.extend([f"/job:w/device:CPU:{i}"])
        nodes.append(node)
    path = _write(tmp_path, _profile(*nodes))
    for prefetch in (True, False):
        reader = wire.ProfileReader(path, batch_nodes=7, prefetch=prefetch)
        batches = list(reader.batches())
        whole = {name: wire.concat_batches([b[name] for b in batches]) for name in wire.BATCH_TABLES}
        whole.update(reader.profile_tables())
        ref = reference(path)
        assert_same_tables({name: whole[name] for name in ref}, ref)


def test_ingest_falls_back_for_a_group_at_the_top_level(tmp_path):
    """A deprecated group among the ProfileProto's own fields is valid protobuf: the scan leaves
    it to the reference decoder, and an ingest (not only ``decode_profile``) follows it there."""

    path = _write(tmp_path, _profile(_node(0, "n"), _node(1, "m")).SerializeToString() + b"\x8b\x01\x08\x01\x8c\x01")
    ingested = tfprof.load(profile_path=path).tables()
    ref = reference(path)
    assert_same_tables({name: ingested[name] for name in ref}, ref)

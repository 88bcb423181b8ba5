"""The XSpace reader's wire path (``xwalk`` outline, protobuf skeleton, ``xargs`` kernels) gives the
reference walk's frame on the awkward cases: repeated stat names, every kind of value, metadata
stats, non-ASCII and control characters, lines without events, ``num_occurrences``, sparse and
duplicate metadata keys, fields in an unusual order, unknown fields, the reruns when a buffer runs
out; and what it cannot read (a group, text that is not UTF-8) goes to protobuf as before. Every
case is read in one walk and in two halves walked at once, as a large capture is.
"""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tfprof import kernels
from tfprof.errors import ProfileFormatError
from tfprof.ingest.foreign import xevents, xspace, xwalk
from tfprof.schema.proto import xplane_pb2

START = 1_700_000_000_000_000_000


@pytest.fixture(autouse=True, params=["one walk", "two halves"])
def _halves(request, monkeypatch):
    if request.param == "two halves":
        monkeypatch.setattr(xevents, "SPLIT_EVENTS", 2)
        monkeypatch.setattr(xevents, "_THREADS", 2)


def _fast(data: bytes) -> pl.DataFrame | None:
    buf = np.frombuffer(data, np.uint8)
    outline = xwalk.walk(buf)
    skeleton = xspace._skeleton(outline)
    return None if skeleton is None else xevents.columns(buf, outline, skeleton, START)


def _same(data: bytes) -> pl.DataFrame:
    fast = _fast(data)
    assert fast is not None
    assert_frame_equal(fast, xspace._raw_reference(xplane_pb2.XSpace.FromString(data), START))
    return fast


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    return bytes(out + bytes([v]))


def _field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _plane(names: dict[int, str], metas: dict[int, str] | None = None) -> xplane_pb2.XSpace:
    space = xplane_pb2.XSpace()
    plane = space.planes.add(name="/host:CPU")
    for k, name in names.items():
        plane.stat_metadata[k].name = name
    for k, name in (metas or {1: "op:Op"}).items():
        plane.event_metadata[k].name = name
        plane.event_metadata[k].display_name = name.split(":")[-1]
    return space


def test_every_kind_of_value_and_repeated_names():
    space = _plane({1: "a", 2: "b", 3: "a", 4: "hlo_op", 5: "tf_op", 6: "_c", 7: "_ct", 8: "step_num", 9: "x"})
    meta = space.planes[0].event_metadata[1]
    meta.stats.add(metadata_id=2, str_value="meta")
    meta.stats.add(metadata_id=4, str_value="from_meta")  # a special stat of the metadata
    line = space.planes[0].lines.add(id=3, name="t", timestamp_ns=5)
    values = [dict(double_value=v) for v in (-0.0, 0.0, 0.1, 1e16, 1e-5, math.nan, -math.inf, 2.5e-308)]
    values += [dict(uint64_value=2**64 - 1), dict(int64_value=-2**63), dict(int64_value=0), dict(bytes_value=b""),
               dict(bytes_value=b"\x00\xff"), dict(ref_value=9), dict(ref_value=2**64 - 1), dict(ref_value=77), {},
               dict(str_value=""), dict(str_value='q"\\/\x7f\x00\x1f\n\r\t\b\fé€😀\u2028')]
    for k, v in enumerate(values):
        e = line.events.add(metadata_id=1, offset_ps=k * 1_499, duration_ps=k * 501)
        e.stats.add(metadata_id=1, **v)
        e.stats.add(metadata_id=3, int64_value=k)  # the same name by another id: first place, last value
        e.stats.add(metadata_id=2, **v)  # overrides the metadata's b
        e.stats.add(metadata_id=[6, 7, 9][k % 3], **v)  # flows take any value
    fast = _same(space.SerializeToString())
    first = json.loads(fast["args"][0])
    assert list(first) == ["b", "hlo_op", "a", "_c"] and first["a"] == 0 and first["b"] == -0.0


def test_lines_without_events_num_occurrences_and_missing_metadata():
    space = _plane({1: "n"})
    plane = space.planes[0]
    plane.lines.add(id=1, name="empty")
    line = plane.lines.add(id=2, timestamp_ns=-7)
    line.events.add(metadata_id=1, num_occurrences=3, duration_ps=999)
    line.events.add(metadata_id=404, offset_ps=1)  # no such metadata: name "", no display
    line.events.add(metadata_id=1, offset_ps=2**62, duration_ps=2**62).stats.add(metadata_id=1, int64_value=1)
    space.planes.add(name="/host:other").lines.add(id=9)
    fast = _same(space.SerializeToString())
    assert fast["thread"].to_list() == ["2", "2", "2"] and fast["name"][1] == ""


@pytest.mark.parametrize("ids", [range(1, 3000), [-5, 10**15, 2**40, 7]], ids=["dense", "sparse"])
def test_large_and_sparse_metadata_maps(ids):
    ids = list(ids)
    space = _plane({k: f"s{k}" for k in ids}, {k: f"e{k}:T{k % 7}" for k in ids})
    line = space.planes[0].lines.add(id=1)
    for k in ids[::7]:
        e = line.events.add(metadata_id=k, offset_ps=k)
        e.stats.add(metadata_id=k, ref_value=ids[-1])
        e.stats.add(metadata_id=ids[0], int64_value=k)
    _same(space.SerializeToString())


def test_duplicate_keys_unusual_order_and_unknown_fields():
    space = _plane({1: "x", 2: "_p", 3: "_pt"}, {1: "first:A", 2: "other:B"})
    plane = bytearray(space.planes[0].SerializeToString())
    # a second entry of key 1 (protobuf keeps the last), with a stat of its own
    meta = _field(1, 1) + _field(2, b"second:B") + _field(4, b"B") + _field(5, _field(1, 1) + _field(4, 9))
    plane += _field(4, _field(1, 1) + _field(2, meta))
    stat = _field(1, 2) + _field(4, 1) + _field(5, b"last wins") + _field(99, 5)  # value oneof: the last field
    event = _field(4, stat) + _field(4, _field(1, 3) + _field(5, b"kind")) + _field(1, 1) + _field(2, 10) + _field(
        2, 20) + _field(50, b"unknown") + _field(4, b"")
    plane += _field(3, _field(4, event) + _field(1, 4) + _field(2, b"th") + _field(9, 5) + _field(77, 1) + _field(4, b""))
    data = _field(1, bytes(plane)) + _field(4, b"host") + _field(1, _field(2, b"/host:second"))
    fast = _same(data)
    assert fast["name"][0] == "second:B" and fast["producer"][0] == "kind:last wins"


def test_specials_of_every_kind():
    space = _plane({1: "hlo_op", 2: "hlo_module", 3: "program_id", 4: "_p", 5: "_pt", 6: "_c", 7: "_ct",
                    8: "correlation_id", 9: "tf_op", 10: "requested_bytes", 11: "tf_function_call", 12: "step_num"})
    line = space.planes[0].lines.add(id=1)
    text = [dict(str_value="s"), dict(ref_value=2), dict(ref_value=99), {}]
    number = [dict(int64_value=-3), dict(uint64_value=2**63 - 5), {}]
    anything = [*text, *number, dict(double_value=1.5), dict(double_value=math.inf), dict(bytes_value=b"\x01")]
    # (the reference holds a special's value as it is: a text column takes text, a number column numbers)
    kinds = {1: text, 2: text, 9: text, 3: number, 8: number, 10: number, 12: number}
    for k in range(60):
        e = line.events.add(metadata_id=1, offset_ps=k)
        for sid in range(1, 13):
            if (k + sid) % 3:
                values = kinds.get(sid, anything)
                e.stats.add(metadata_id=sid, **values[(k * sid) % len(values)])
    _same(space.SerializeToString())


def test_buffers_that_run_out_are_grown(monkeypatch):
    monkeypatch.setattr(xevents, "_room", lambda n_bytes, n_events: 64)
    monkeypatch.setattr(xevents, "_DOUBLES", 2)
    space = _plane({1: "tf_op", 2: "d"})
    line = space.planes[0].lines.add(id=1)
    for k in range(50):
        e = line.events.add(metadata_id=1, offset_ps=k)
        e.stats.add(metadata_id=1, str_value=f"op{k}" * 5)
        e.stats.add(metadata_id=2, double_value=k / 7)
    _same(space.SerializeToString())


def test_text_that_runs_out_without_doubles_is_written_on_the_next_run(monkeypatch):
    # (once the room was the text's size alone, so the last event's bound ran out again: forever)
    monkeypatch.setattr(xevents, "_room", lambda n_bytes, n_events: 64)
    walk, runs = xevents.xargs.events, []

    def counted(*args):
        runs.append(1)
        assert len(runs) <= 6, "the per-event kernel keeps running out of room"
        return walk(*args)

    monkeypatch.setattr(xevents.xargs, "events", counted)
    space = _plane({1: "tf_op"})
    line = space.planes[0].lines.add(id=1)
    for k in range(50):
        line.events.add(metadata_id=1, offset_ps=k).stats.add(metadata_id=1, str_value=f"op{k}" * 5)
    assert _same(space.SerializeToString())["tf_op"][49] == "op49" * 5


def test_halves_split_inside_a_line_doubles_met_in_one_only(monkeypatch):
    monkeypatch.setattr(xevents, "SPLIT_EVENTS", 2)
    monkeypatch.setattr(xevents, "_THREADS", 2)
    space = _plane({1: "d", 2: "tf_op", 3: "step_num"})
    plane = space.planes[0]
    plane.lines.add(id=1, name="short").events.add(metadata_id=1).stats.add(metadata_id=2, str_value="first")
    line = plane.lines.add(id=2, name="long", timestamp_ns=3)
    for k in range(9):
        e = line.events.add(metadata_id=1, offset_ps=k * 1000, duration_ps=k)
        e.stats.add(metadata_id=2, str_value=f"op{k}")
        e.stats.add(metadata_id=3, int64_value=k)
        if k >= 6:
            e.stats.add(metadata_id=1, double_value=k / 3)
    plane.lines.add(id=3, name="after").events.add(metadata_id=1, offset_ps=5).stats.add(metadata_id=1, double_value=0.5)
    data = space.SerializeToString()
    buf = np.frombuffer(data, np.uint8)
    outline = xwalk.walk(buf)
    first, second = xevents._parts(buf, outline.lines, outline.events)
    # 11 events: the first half ends after the long line's fourth, inside it
    assert first.events == (0, 5) and second.events == (5, 11) and second.first_line == 1
    assert outline.lines[1, xwalk.L_S] < second.lines[0, xwalk.L_S] == first.lines[1, xwalk.L_E] < outline.lines[1, xwalk.L_E]
    fast = _same(data)
    assert fast["thread"].to_list() == ["short"] + ["long"] * 9 + ["after"]
    assert fast["tf_op"].to_list()[1:10] == [f"op{k}" for k in range(9)] and fast["step_num"][9] == 8
    assert json.loads(fast["args"][9])["d"] == 8 / 3


def _read(tmp_path, data: bytes, engine: bool):
    path = tmp_path / "x.xplane.pb"
    path.write_bytes(data)
    with kernels.using(engine):
        return xspace.read(path, data)


def _ops_space() -> xplane_pb2.XSpace:
    space = _plane({1: "note"}, {1: "dense/MatMul:MatMul"})
    line = space.planes[0].lines.add(id=1, name="main")
    for k in range(3):
        line.events.add(metadata_id=1, offset_ps=k * 10_000, duration_ps=5_000).stats.add(metadata_id=1, str_value="ok")
    return space


def test_str_value_not_utf8_is_one_line_naming_the_file(tmp_path):
    data = _ops_space().SerializeToString().replace(b"ok", b"o\xff")
    assert xwalk.walk(np.frombuffer(data, np.uint8)) is not None and _fast(data) is None
    for engine in (True, False):
        with pytest.raises(ProfileFormatError) as err:
            _read(tmp_path, data, engine)
        assert "x.xplane.pb" in str(err.value) and "\n" not in str(err.value)


def test_line_name_not_utf8_is_caught_by_the_walk(tmp_path):
    data = _ops_space().SerializeToString().replace(b"main", b"ma\xc3(")
    assert xwalk.walk(np.frombuffer(data, np.uint8)) is None
    with pytest.raises(ProfileFormatError, match="x.xplane.pb"):
        _read(tmp_path, data, True)


def test_a_group_goes_to_protobuf_and_reads_the_same(tmp_path):
    space = _ops_space()
    data = bytearray(space.SerializeToString())
    plane = space.planes[0].SerializeToString() + _varint(60 << 3 | 3) + _field(1, 1) + _varint(60 << 3 | 4)
    data = _field(1, plane)
    assert xwalk.walk(np.frombuffer(data, np.uint8)) is None
    fast, ref = _read(tmp_path, data, True), _read(tmp_path, data, False)
    assert all(fast[t].equals(ref[t]) for t in fast)


def test_whole_tables_equal_on_the_wire_path(tmp_path):
    data = _ops_space().SerializeToString()
    fast, ref = _read(tmp_path, data, True), _read(tmp_path, data, False)
    assert all(fast[t].equals(ref[t]) for t in fast)

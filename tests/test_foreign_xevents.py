"""The XSpace event decoder on whole columns (``tfprof.ingest.foreign.xevents``) gives exactly the frame
of the reference walk over protobuf's messages, on an XSpace built here with every kind of stat value
and the awkward cases: repeated stat names, non-ASCII and control characters, doubles, bytes, refs,
unset values, events whose metadata is missing, metadata stats, ``num_occurrences``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tfprof.ingest.foreign import xevents, xspace, xwalk
from tfprof.schema.proto import xplane_pb2


def _space() -> xplane_pb2.XSpace:
    space = xplane_pb2.XSpace()
    env = space.planes.add(name="Task Environment")
    env.stat_metadata[1].name = "profile_start_time"
    env.stats.add(metadata_id=1, uint64_value=1_700_000_000_123_456_789)
    plane = space.planes.add(name="/host:CPU")
    for k, name in enumerate(["step_num", "hlo_op", "note", "ratio", "blob", "_p", "_pt", "program_id", "big"], 1):
        plane.stat_metadata[k].name = name
    plane.stat_metadata[20].name = 'dot.1 "quoted" \\ é'
    plane.event_metadata[1].name = "train"
    plane.event_metadata[1].display_name = ""
    plane.event_metadata[2].name = "dot:MatMul"
    plane.event_metadata[2].display_name = "MatMul"
    plane.event_metadata[2].stats.add(metadata_id=3, str_value="from metadata")
    plane.event_metadata[2].stats.add(metadata_id=4, double_value=0.5)
    line = plane.lines.add(id=7, name="", timestamp_ns=1234)
    e = line.events.add(metadata_id=1, offset_ps=1_499, duration_ps=10_500_000)
    e.stats.add(metadata_id=1, int64_value=3)
    e.stats.add(metadata_id=8, int64_value=-5)
    e = line.events.add(metadata_id=2, offset_ps=2_500, duration_ps=999)
    e.stats.add(metadata_id=2, ref_value=20)
    e.stats.add(metadata_id=3, str_value="tab\there ünï \x01")  # overrides the metadata's note, keeps its place
    e.stats.add(metadata_id=4, double_value=1e-05)
    e.stats.add(metadata_id=5, bytes_value=b"\x00\xffab")
    e.stats.add(metadata_id=6, uint64_value=42)
    e.stats.add(metadata_id=7, str_value="fl")
    e.stats.add(metadata_id=9, uint64_value=2**64 - 1)
    e.stats.add(metadata_id=99)  # unknown name, no value
    e.stats.add(metadata_id=4, double_value=math.inf)
    line.events.add(metadata_id=55, num_occurrences=4, duration_ps=1)  # metadata missing
    e = plane.lines.add(id=8, name="worker", timestamp_ns=0).events.add(metadata_id=2, offset_ps=10)
    e.stats.add(metadata_id=6, int64_value=1)
    e.stats.add(metadata_id=2, ref_value=12345)  # a ref to no metadata
    return space


def _reference(space) -> pl.DataFrame:
    return xspace._raw_reference(space, 1_700_000_000_123_456_789)


def _fast(data: bytes) -> pl.DataFrame | None:
    buf = np.frombuffer(data, np.uint8)
    outline = xwalk.walk(buf)
    skeleton = xspace._skeleton(outline)
    return None if skeleton is None else xevents.columns(buf, outline, skeleton, 1_700_000_000_123_456_789)


def test_columns_equal_the_reference_walk():
    data = _space().SerializeToString()
    fast = _fast(data)
    ref = _reference(xplane_pb2.XSpace.FromString(data))
    assert_frame_equal(fast, ref)
    assert fast.height == 4
    # the frame holds what the message says, not only what the reference says
    args = json.loads(fast["args"][1])
    assert list(args) == ["note", "ratio", "hlo_op", "blob", "_p", "_pt", "big", ""]
    assert args["note"].startswith("tab\there") and args["ratio"] == math.inf and args["blob"] == "00ff6162"
    assert fast["producer"][1] == "fl:42" and fast["hlo_op"][1] == 'dot.1 "quoted" \\ é'
    assert fast["start_ns"].to_list()[:2] == [1_700_000_000_123_456_789 + 1234 + 1, 1_700_000_000_123_456_789 + 1234 + 3]
    assert fast["name"][2] == "" and fast["step_num"][0] == 3 and fast["program_id"][0] == -5


def test_an_unreadable_walk_falls_back():
    assert xwalk.walk(np.frombuffer(b"\x0a\xff", np.uint8)) is None
    outline = xwalk.walk(np.zeros(0, np.uint8))
    assert outline is not None and outline.events == 0 and outline.skeleton == b""


@pytest.mark.parametrize("cut", [3, 40, 100, -1])
def test_walk_never_reads_past_a_cut(cut):
    data = _space().SerializeToString()
    outline = xwalk.walk(np.frombuffer(data[:cut], np.uint8))
    assert outline is None


def test_hlo_programs_read_by_protobuf_equal_a_walk_of_the_wire():
    """Every program of the JAX capture: protobuf over our cut hlo.proto gives the instructions
    that a plain walk of the wire finds (foreign_expect, field numbers only); bytes that are not
    an HloProto give none."""
    from foreign_expect import load_xspace, xspace_expect

    from tfprof.ingest.foreign import hlo

    path = Path(__file__).parent / "fixtures" / "foreign" / "jax_mlp.xplane.pb"
    want = xspace_expect(path)["programs"]
    assert want
    space = load_xspace(path)
    seen = 0
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for meta in plane.event_metadata.values():
            for s in meta.stats:
                if names.get(s.metadata_id) == "Hlo Proto":
                    flat = {k: v for per in want[meta.name].values() for k, v in per.items()}
                    assert hlo.instructions(s.bytes_value) == flat and flat
                    seen += 1
    assert seen == len(want)
    assert hlo.instructions(b"\x0a\xff\xff") == {}  # a length running past the end
    assert hlo.instructions(b"\x0a\x03\x1a\x01\xff") == {}  # a computation cut short

"""XSpace allocator events fill the memory tables, and GPU events carry their correlation ids.

Expected numbers come from tests/foreign_expect.py (the protobuf runtime and plain Python), never from
tfprof's readers. Fixtures (tests/fixtures/foreign/README.md): a TensorFlow 2 CPU capture with the BFC
allocator's events, and a slice of a real multi-GPU TensorFlow capture (host plane + one GPU plane).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from foreign_expect import xspace_correlations, xspace_memory_expect

import tfprof
from tfprof.api import run_view
from tfprof.ingest.foreign import build, xspace
from tfprof.ingest.foreign.memory import OUTSIDE_OPS
from tfprof.schema.proto import xplane_pb2

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
MEMORY = ["tf2_keras_memory.xplane.pb", "tf_gpu_bert_slice.xplane.pb"]
GPU = "tf_gpu_bert_slice.xplane.pb"


def _handed_to_build(monkeypatch, path: Path) -> pl.DataFrame:
    """The events the XSpace reader gives ``build.build`` for ``path``."""
    seen = {}
    real = build.build

    def spy(ev, **kw):
        seen["ev"] = ev[0] if isinstance(ev, list) else ev  # the reader hands its frame over in a list
        return real(ev, **kw)

    monkeypatch.setattr(xspace.build, "build", spy)
    xspace.read(path, path.read_bytes())
    return seen["ev"]


@pytest.mark.parametrize("name", MEMORY)
def test_allocator_events_are_charged_to_the_op_they_name(name):
    want = xspace_memory_expect(FOREIGN / name)
    assert want["charged"] > 0
    prof = tfprof.load(FOREIGN / name)
    nodes = prof.frame("nodes").select("node_id", pl.col("name").cast(pl.String))
    got = prof.frame("allocations").join(nodes, on="node_id").group_by("name").agg(
        pl.len().alias("events"), pl.col("alloc_bytes").filter(pl.col("alloc_bytes") > 0).sum().alias("alloc_bytes"),
        (-pl.col("alloc_bytes").filter(pl.col("alloc_bytes") < 0).sum()).alias("free_bytes"))
    got = {r["name"]: {k: r[k] for k in ("events", "alloc_bytes", "free_bytes")} for r in got.iter_rows(named=True)}
    outside = got.pop(OUTSIDE_OPS, {"events": 0})  # instants no op owns: one pseudo-node, per step (build's rule)
    assert got == {k: {c: v[c] for c in ("events", "alloc_bytes", "free_bytes")} for k, v in want["nodes"].items()}
    assert outside["events"] == want["instants"] - want["charged"]


@pytest.mark.parametrize("name", MEMORY)
def test_peak_bytes_per_op_match_a_running_sum(name):
    want = xspace_memory_expect(FOREIGN / name)["nodes"]
    prof = tfprof.load(FOREIGN / name)
    nodes = prof.frame("nodes").select("node_id", pl.col("name").cast(pl.String))
    nodes = nodes.filter(pl.col("name") != OUTSIDE_OPS)
    peaks = prof.frame("memory").join(nodes, on="node_id").group_by("name").agg(pl.col("peak_bytes").max())
    assert dict(peaks.iter_rows()) == {k: v["peak_bytes"] for k, v in want.items()}
    requested = prof.frame("memory").join(nodes, on="node_id").group_by("name").agg(pl.col("requested_bytes").sum())
    assert dict(requested.iter_rows()) == {k: v["alloc_bytes"] for k, v in want.items()}


@pytest.mark.parametrize("name", MEMORY)
def test_memory_per_allocator(name):
    """Each execution's bytes per allocator (``allocator_memory``), and what a GPU allocator held after it."""
    want = xspace_memory_expect(FOREIGN / name)
    prof = tfprof.load(FOREIGN / name)
    nodes = prof.frame("nodes").select("node_id", pl.col("name").cast(pl.String)).filter(pl.col("name") != OUTSIDE_OPS)
    charged = prof.frame("allocations").join(nodes, on="node_id").height
    per_allocator = prof.frame("allocator_memory").join(nodes, on="node_id")
    assert set(per_allocator["allocator"]) == set(want["allocators"]) and sum(want["allocators"].values()) == charged
    in_use = prof.frame("memory").join(nodes, on="node_id").group_by("name").agg(
        pl.col("allocator_bytes_in_use").max())
    assert dict(in_use.iter_rows()) == {k: v["in_use"] for k, v in want["nodes"].items()}
    assert any(v["in_use"] > 0 for v in want["nodes"].values()) == (name == GPU)  # GPU_4_bfc's, not the host's


@pytest.mark.parametrize("name", MEMORY)
def test_the_header_no_longer_says_there_is_no_memory(name):
    result = run_view(tfprof.load(FOREIGN / name), "scope", {"max_depth": 1, "select": ["bytes", "peak_bytes"]})
    assert "no allocation events" not in result.text
    assert "No source in this profile: params and float_ops (no graph), output bytes" in result.text


def test_a_capture_without_allocator_events_still_says_so():
    for name in ("tf2_keras.xplane.pb", "jax_mlp.xplane.pb"):
        assert xspace_memory_expect(FOREIGN / name)["instants"] == 0
        result = run_view(tfprof.load(FOREIGN / name), "scope", {"max_depth": 1})
        assert "every memory field (no allocation events)" in result.text


def test_correlation_ids_of_gpu_events_and_launches_are_handed_to_build(monkeypatch):
    want = xspace_correlations(FOREIGN / GPU)
    assert "/host:CPU" in want and any(p.startswith("/device:GPU") for p in want)
    ev = _handed_to_build(monkeypatch, FOREIGN / GPU)
    got = {p: Counter(g["correlation"].to_list())
           for (p,), g in ev.filter(pl.col("correlation").is_not_null()).group_by("process")}
    assert got == want
    device_ops = ev.filter(pl.col("accelerator") & (pl.col("role") == "op"))
    assert device_ops.height == sum(want[p].total() for p in want if p.startswith("/device:GPU"))
    assert ev.filter(pl.col("correlation").is_null() & pl.col("accelerator") & (pl.col("role") == "op")).height == 0


def test_a_gpu_event_without_a_launch_lands_on_the_op_its_stats_name(monkeypatch, tmp_path):
    """Drop the host launch calls and give each kernel a `tf_op` stat (`<path>:<type>`, from the `level 0`
    annotation TensorFlow wrote): the kernel is then named by that op's path."""
    space = xplane_pb2.XSpace()
    space.ParseFromString((FOREIGN / GPU).read_bytes())
    host, gpu = space.planes[0], next(p for p in space.planes if p.name.startswith("/device:GPU"))
    ids = {m.name: k for k, m in host.stat_metadata.items()}
    for line in host.lines:
        keep = [e for e in line.events if not any(s.metadata_id == ids["correlation_id"] for s in e.stats)]
        del line.events[:]
        line.events.extend(keep)
    gids = {m.name: k for k, m in gpu.stat_metadata.items()}
    tf_op = max(gpu.stat_metadata) + 1
    gpu.stat_metadata[tf_op].id, gpu.stat_metadata[tf_op].name = tf_op, "tf_op"
    expected = Counter()
    for line in gpu.lines:
        for e in line.events:
            level0 = next((s for s in e.stats if s.metadata_id == gids["level 0"]), None)
            if level0 is not None and any(s.metadata_id == gids["correlation_id"] for s in e.stats):
                text = gpu.stat_metadata[level0.ref_value].name
                e.stats.add(metadata_id=tf_op, str_value=text)
                expected[text.rsplit(":", 1)[0]] += 1
    path = tmp_path / "no_launch.xplane.pb"
    path.write_bytes(space.SerializeToString())
    assert expected
    ev = _handed_to_build(monkeypatch, path)
    labels = Counter(ev.filter(pl.col("accelerator") & (pl.col("role") == "op"))["label"].to_list())
    assert labels == expected


"""tfprof's RunMetadata rules (docs/TFPROF_BEHAVIOUR.md, 'Ingesting RunMetadata') on small hand-written step stats laid out as a GPU trace."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from conftest import assert_tables_equal, proto_comparable
from google.protobuf import text_format

import tfprof
from tfprof import Profile
from tfprof.ingest.raw import RawProfile
from tfprof.schema.proto import graph_pb2, run_metadata_pb2

FIXTURE = Path(__file__).parent / "fixtures" / "gpu_tiny"
GRAPH = (FIXTURE / "graph.pbtxt").read_text()
RUN_META = (FIXTURE / "run_meta_0.pbtxt").read_text()
JOB = "/job:localhost/replica:0/task:0"


def _tables(run_meta: str = RUN_META) -> dict:
    prof = RawProfile()
    prof.add_graph(text_format.Parse(GRAPH, graph_pb2.GraphDef()))
    prof.add_run_meta(0, text_format.Parse(run_meta, run_metadata_pb2.RunMetadata()))
    return prof.tables()


def _profile(run_meta: str = RUN_META) -> dict[str, pl.DataFrame]:
    return {k: pl.from_arrow(v) for k, v in _tables(run_meta).items()}


def _by_name(t: dict[str, pl.DataFrame], table: str) -> pl.DataFrame:
    return t[table].join(t["nodes"].select("node_id", "name"), on="node_id")


def test_device_roles():
    t = _profile()
    execs = _by_name(t, "execs").with_columns(pl.col("device", "kind").cast(pl.String))
    b = execs.filter(pl.col("name") == "b").sort("kind")
    # stream:all counts as accelerator time; the canonical gpu device as cpu time.
    assert b.select("kind", "device", "start_micros", "duration_micros").rows() == [
        ("accelerator", f"{JOB}/device:gpu:0/stream:all".lower(), 102, 20),
        ("cpu", f"{JOB}/device:gpu:0".lower(), 100, 5),
    ]
    # the second canonical device (cpu:0) is ignored entirely for b, stream:7 and memcpy only listed.
    devs = _by_name(t, "exec_devices").filter(pl.col("name") == "b")["device"].cast(pl.String).to_list()
    assert sorted(devs) == sorted(d.lower() for d in (f"{JOB}/device:GPU:0", f"{JOB}/device:GPU:0/stream:all", f"{JOB}/device:GPU:0/stream:7"))
    nodes = t["nodes"].with_columns(pl.col("canonical_device", "host_device").cast(pl.String))
    b_node = nodes.filter(pl.col("name") == "b").row(0, named=True)
    assert b_node["canonical_device"] == f"{JOB}/device:gpu:0".lower()
    assert b_node["host_device"] == f"{JOB}/device:cpu:0".lower()


def test_zero_duration_counts_one_micro_and_run_count():
    t = _profile()
    steps = _by_name(t, "node_steps")
    c = steps.filter(pl.col("name") == "c").row(0, named=True)
    assert c["run_count"] == 1
    # the memcpy record at 95 moves all_start but adds no time.
    assert c["all_start_micros"] == 95 and c["latest_end_micros"] == 111
    c_exec = _by_name(t, "execs").filter(pl.col("name") == "c")
    assert c_exec["duration_micros"].to_list() == [1]


def test_memory_rules():
    t = _profile()
    mem = _by_name(t, "memory").filter(pl.col("name") == "b").row(0, named=True)
    # accelerator device: memory_stats go to the accelerator columns.
    assert mem["accelerator_temp_bytes"] == 16 and mem["accelerator_persistent_bytes"] == 4
    assert mem["requested_bytes"] == 64 + 8 + 4 + 16
    assert mem["peak_bytes"] == 64 + 8 + 4 + 16
    assert mem["residual_bytes"] == 32 + 8 + 4
    assert mem["output_bytes"] == 64
    assert mem["allocator_bytes_in_use"] == 1000  # only GPU allocators
    assert mem["memory_micros"] == 105
    allocs = _by_name(t, "allocations").filter(pl.col("name") == "b")
    assert allocs.select("alloc_micros", "alloc_bytes").rows() == [(101, 64)]
    outs = _by_name(t, "output_memory").filter(pl.col("name") == "b")
    assert outs.select("slot", "bytes", "ptr").rows() == [(0, 64, 7)]
    assert len(_by_name(t, "allocator_memory").filter(pl.col("name") == "b")) == 2


def test_runtime_only_nodes():
    t = _profile()
    names = t["nodes"]["name"].to_list()
    assert "_retval_c_0_0" in names  # created from RunMetadata, op = name (docs/TFPROF_BEHAVIOUR.md, Known quirk 10)
    assert not any("MEMCPY" in n for n in names)
    retval = t["nodes"].filter(pl.col("name") == "_retval_c_0_0").row(0, named=True)
    assert retval["op"] == "_retval_c_0_0" and retval["node_id"] == 3


def test_missing_stream_all_sets_flag():
    assert not _profile()["info"]["miss_accelerator_stream"][0]
    no_stream = RUN_META.replace("/stream:all", "/stream:3")
    assert _profile(no_stream)["info"]["miss_accelerator_stream"][0]


def test_inputs_control_and_slots():
    t = _profile()
    b = _by_name(t, "node_inputs").filter(pl.col("name") == "b")
    assert b.select("input_idx", "input_name", "output_slot").rows() == [(0, "a", 0), (1, "a", 0)]
    assert t["node_types"].filter(pl.col("node_id") == 1)["op_type"].cast(pl.String).to_list() == sorted(
        ["MatMul", f"{JOB}/device:gpu:0".lower()]
    )


def test_devices_table():
    devs = _profile()["devices"].with_columns(pl.col("device").cast(pl.String))
    roles = {r["device"].rsplit("/", 1)[-1]: r for r in devs.to_dicts()}
    assert roles["stream:all"]["is_accelerator_stream"] and not roles["stream:all"]["is_canonical"]
    assert roles["device:gpu:0"]["is_canonical"] and roles["device:gpu:0"]["on_accelerator"]
    assert roles["device:cpu:0"]["is_canonical"] and roles["device:cpu:0"]["on_cpu"]
    assert not roles["memcpy"]["is_canonical"] and not roles["memcpy"]["is_accelerator_stream"]


def test_same_tables_as_the_real_tools_profile():
    """The real tool built profile.pb from these text files (tools/make_gpu_tiny.py)."""
    ours = _tables()
    real = tfprof.load(profile_path=FIXTURE / "profile.pb")
    for name, table in ours.items():
        if name != "allocator_memory":
            assert_tables_equal(proto_comparable(table, name), proto_comparable(real.table(name), name), name)


def test_missing_stream_warning_follows_the_real_tool(tmp_path):
    """The warning prints for profiles built from RunMetadata; tfprof does not restore the flag
    when it loads a ProfileProto (docs/TFPROF_BEHAVIOUR.md, 'ProfileProto'), so a profile file never warns, flag or not."""
    from tfprof.api import run_view
    from tfprof.schema.proto import tfprof_log_pb2

    graph, rm = tmp_path / "g.pbtxt", tmp_path / "rm.pbtxt"
    graph.write_text(GRAPH)
    rm.write_text(RUN_META.replace("/stream:all", "/stream:3"))
    raw = tfprof.load(graph_path=graph, run_meta_path=str(rm))
    warning = "Found accelerator operation but misses accelerator stream stats!"
    assert warning in run_view(raw, "scope", {}).text
    tfprof.save(raw, tmp_path / "store")
    assert warning in run_view(Profile.open(tmp_path / "store"), "scope", {}).text

    prof = tfprof_log_pb2.ProfileProto.FromString((FIXTURE / "profile.pb").read_bytes())
    prof.miss_accelerator_stream = True
    flagged = tmp_path / "flagged.pb"
    flagged.write_bytes(prof.SerializeToString())
    from_file = tfprof.load(profile_path=flagged)
    assert from_file.frame("info")["miss_accelerator_stream"][0]  # the data keeps the flag
    assert warning not in run_view(from_file, "scope", {}).text

"""The validation table every load fills, the clamp rule, `tfprof check` and the warning line.

Each test builds its own GraphDef / RunMetadata / ProfileProto with the bad values it checks,
and computes the expected codes, nodes, steps and counts from that data.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import FIXTURES, raw_inputs

import tfprof
from tfprof import Profile, sample_path
from tfprof.api import run_view
from tfprof.cli.main import main
from tfprof.ingest.validate import MAX_DURATION_MICROS, ROWS_PER_CODE, Validator
from tfprof.schema.checks import CHECKS
from tfprof.schema.proto import graph_pb2, run_metadata_pb2, tfprof_log_pb2

JOB = "/job:localhost/replica:0/task:0"
CPU, GPU = f"{JOB}/device:CPU:0", f"{JOB}/device:GPU:0"
T0 = 1_700_000_000_000_000  # 2023, in µs
INT64_MAX = 2**63 - 1
VIEW_OPTIONS = {"select": ["micros", "bytes", "params", "float_ops", "occurrence"], "max_depth": 100}


# ----------------------------------------------------------------------------- building inputs


def graph(*nodes: tuple) -> graph_pb2.GraphDef:
    """Nodes as (name, op) or (name, op, [inputs])."""
    g = graph_pb2.GraphDef()
    for name, op, *inputs in nodes:
        g.node.add(name=name, op=op, input=inputs[0] if inputs else [])
    return g


def run_meta(records: list[dict]) -> run_metadata_pb2.RunMetadata:
    """Records as dicts: name, device (CPU), start (T0), dur, and optional allocator bytes."""
    rm = run_metadata_pb2.RunMetadata()
    rm.step_stats.SetInParent()
    devices: dict[str, object] = {}
    for r in records:
        dev = r.get("device", CPU)
        if dev not in devices:
            devices[dev] = rm.step_stats.dev_stats.add(device=dev)
        ns = devices[dev].node_stats.add(node_name=r["name"], all_start_micros=r.get("start", T0),
                                         op_end_rel_micros=r.get("dur", 1))
        for total in r.get("allocations", ()):
            ns.memory.add(allocator_name="cpu", total_bytes=total, peak_bytes=total, live_bytes=0)
    return rm


def load(tmp_path: Path, g: graph_pb2.GraphDef | None, steps: list[run_metadata_pb2.RunMetadata]) -> Profile:
    return tfprof.load(**write_inputs(tmp_path, g, steps))


def write_inputs(tmp_path: Path, g, steps) -> dict:
    inputs = {}
    if g is not None:
        (tmp_path / "graph.pb").write_bytes(g.SerializeToString())
        inputs["graph_path"] = str(tmp_path / "graph.pb")
    paths = []
    for i, rm in enumerate(steps):
        paths.append(tmp_path / f"rm_{i}.pb")
        paths[-1].write_bytes(rm.SerializeToString())
    inputs["run_meta_path"] = ",".join(str(p) for p in paths)
    return inputs


def rows(prof: Profile, code: str | None = None) -> list[dict]:
    got = prof.table("validation").to_pylist()
    return [r for r in got if code is None or r["code"] == code]


def total(prof: Profile, code: str) -> int:
    return sum(r["count"] for r in rows(prof, code))


def assert_no_negative_numbers(prof: Profile) -> None:
    """No view prints a negative or wrapped number (names here hold no `-`)."""
    for cmd in ("scope", "graph", "op"):
        text = run_view(prof, cmd, VIEW_OPTIONS).text
        body = text[text.index("node name |"):]
        assert not re.search(r"-\d", body), f"{cmd} view:\n{body}"


# ----------------------------------------------------------------------------- times


def test_negative_durations_are_reported_and_count_as_zero(tmp_path):
    names = [f"n{i}" for i in range(12)]
    durations = {n: -(i + 1) for i, n in enumerate(names)}  # every one negative
    good = {"ok0": 7, "ok1": 11}
    g = graph(*[(n, "MatMul") for n in [*names, *good]])
    prof = load(tmp_path, g, [run_meta([{"name": n, "dur": d} for n, d in {**durations, **good}.items()])])

    found = rows(prof, "negative_duration")
    named = [r for r in found if r["node"] is not None]
    assert [(r["node"], r["step"], r["count"]) for r in named] == [(n, 0, 1) for n in names[:ROWS_PER_CODE]]
    assert all(f"duration {durations[r['node']]} us" in r["detail"] for r in named)
    rest = [r for r in found if r["node"] is None]
    assert len(rest) == 1 and rest[0]["count"] == len(names) - ROWS_PER_CODE and rest[0]["step"] is None
    assert total(prof, "negative_duration") == len(names)
    assert {r["severity"] for r in found} == {"error"}
    # clamped where the values enter the tables: 0 us, the runs still counted
    execs = prof.sql("select n.name, e.duration_micros d from execs e join nodes n using (node_id)")
    assert dict(zip(execs["name"], execs["d"])) == {**dict.fromkeys(names, 0), **good}
    runs = prof.sql("select sum(run_count) r from node_steps")["r"][0]
    assert runs == len(names) + len(good)
    # the step's end before its start is reported and moved to the start
    assert total(prof, "end_before_start") == len(names)
    ends = prof.sql("select count(*) n from node_steps where latest_end_micros < all_start_micros")["n"][0]
    assert ends == 0
    text = run_view(prof, "scope", {"select": ["micros"]}).text
    assert f"_TFProfRoot (--/{sum(good.values())}us," in text
    assert_no_negative_numbers(prof)


def test_durations_that_would_wrap_are_left_out(tmp_path):
    """The real tool prints the root total of these as int64's minimum plus a little."""
    huge = {"b": 2**62, "c": 2**62, "e": INT64_MAX}  # e: start + duration beyond int64
    g = graph(("a", "MatMul"), ("b", "MatMul"), ("c", "MatMul"), ("d", "MatMul"), ("e", "MatMul"))
    prof = load(tmp_path, g, [run_meta([{"name": "a", "dur": 3}, {"name": "d", "dur": 7},
                                        *({"name": n, "dur": d} for n, d in huge.items())])])
    found = rows(prof, "absurd_duration")
    assert sorted(r["node"] for r in found) == sorted(huge) and {r["severity"] for r in found} == {"warning"}
    assert all(f"duration {huge[r['node']]:,} us" in r["detail"] for r in found)
    assert "_TFProfRoot (--/10us," in run_view(prof, "scope", {"select": ["micros"]}).text
    # a duration of exactly a day is still believed
    day = load(tmp_path, g, [run_meta([{"name": "a", "dur": MAX_DURATION_MICROS}])])
    assert not rows(day, "absurd_duration")
    assert_no_negative_numbers(prof)


def test_timestamps_before_1970_and_after_2100(tmp_path):
    late = 7_258_118_400_000_000  # 2200-01-01
    g = graph(("a", "MatMul"), ("b", "MatMul"), ("c", "MatMul"))
    prof = load(tmp_path, g, [run_meta([{"name": "a", "start": -100, "dur": 5}, {"name": "b", "start": late, "dur": 5},
                                        {"name": "c", "dur": 5}])])
    neg = rows(prof, "negative_timestamp")
    assert [(r["node"], r["step"], r["severity"]) for r in neg] == [("a", 0, "error")]
    assert "-100" in neg[0]["detail"]
    # tfprof ignores a record without a (positive) start: a has no exec record
    assert prof.sql("select count(*) n from execs join nodes using (node_id) where name = 'a'")["n"][0] == 0
    absurd = rows(prof, "absurd_timestamp")
    assert {(r["node"], r["step"]) for r in absurd} == {("b", 0)} and {r["severity"] for r in absurd} == {"warning"}
    assert any(f"{late:,}" in r["detail"] for r in absurd)
    # kept as read: no total uses a timestamp
    assert prof.sql("select start_micros s from execs join nodes using (node_id) where name = 'b'")["s"][0] == late


# ----------------------------------------------------------------------------- memory, counts, params


def test_memory_values_below_zero_or_absurd(tmp_path):
    g = graph(("a", "MatMul"), ("b", "MatMul"), ("c", "MatMul"))
    prof = load(tmp_path, g, [run_meta([
        {"name": "a", "allocations": [-64]},
        {"name": "b", "allocations": [2**62, 2**62]},  # adds up past int64: saturated, then left out
        {"name": "c", "allocations": [100]},
    ])])
    neg = rows(prof, "negative_bytes")
    assert {r["node"] for r in neg} == {"a"} and all(r["step"] == 0 for r in neg)
    # requested and peak are both the allocator's -64 (no temp or persistent bytes)
    assert {r["detail"].split()[0] for r in neg} == {"requested_bytes", "peak_bytes"}
    assert {r["node"] for r in rows(prof, "absurd_bytes")} == {"b"}
    mem = prof.sql("select name, requested_bytes r, peak_bytes p from memory join nodes using (node_id) order by name")
    assert mem.rows() == [("a", 0, 0), ("b", 0, 0), ("c", 100, 100)]
    assert "_TFProfRoot (--/100B)" in run_view(prof, "scope", {"select": ["bytes"]}).text
    assert_no_negative_numbers(prof)


def profile_proto(nodes: list[dict], steps=(0,)) -> bytes:
    """A ProfileProto: nodes as dicts (name, op, shape, float_ops, run_count, execs: [(start,
    dur)] on CPU, requested: bytes of one memory record)."""
    p = tfprof_log_pb2.ProfileProto()
    p.steps.extend(steps)
    for i, spec in enumerate(nodes):
        n = p.nodes[i]
        n.id, n.name, n.op = i, spec["name"], spec.get("op", "MatMul")
        n.shape.extend(spec.get("shape", []))
        n.float_ops = spec.get("float_ops", 0)
        if "execs" in spec or "run_count" in spec or "requested" in spec:
            e = n.execs[steps[0]]
            e.run_count = spec.get("run_count", 1)
            e.devices.append(CPU.lower())
            for start, dur in spec.get("execs", []):
                e.cpu_execs[CPU.lower()].times.add(int64_values=[start, dur])
            if "requested" in spec:
                e.memory_execs.add(memory_micros=T0, requested_bytes=spec["requested"])
    return p.SerializeToString()


def test_profile_proto_values(tmp_path):
    nodes = [
        {"name": "a", "execs": [(T0, -3)], "run_count": -2},
        {"name": "b", "execs": [(T0, 4)], "requested": -10},
        {"name": "v", "op": "VariableV2", "shape": [2**40, 2**30]},  # 2^70 elements
        {"name": "w", "op": "VariableV2", "shape": [3, 4]},
        {"name": "a", "op": "Add"},  # the name again
        {"name": "f", "float_ops": -1},  # as TensorFlow's op log writes for an empty L2Loss
    ]
    (tmp_path / "profile.pb").write_bytes(profile_proto(nodes))
    prof = tfprof.load(profile_path=tmp_path / "profile.pb")
    assert [(r["node"], r["step"]) for r in rows(prof, "negative_duration")] == [("a", 0)]
    assert [(r["node"], r["step"]) for r in rows(prof, "negative_count")] == [("a", 0)]
    assert [(r["node"], r["step"]) for r in rows(prof, "negative_bytes")] == [("b", 0)]
    over = rows(prof, "params_overflow")
    assert [(r["node"], r["step"], r["severity"]) for r in over] == [("v", None, "error")]
    assert [r["node"] for r in rows(prof, "duplicate_name")] == ["a"]
    assert [(r["node"], r["severity"]) for r in rows(prof, "negative_float_ops")] == [("f", "info")]
    params = dict(zip(prof.frame("nodes")["name"], prof.frame("nodes")["params"]))
    assert params["v"] == 0 and params["w"] == 12
    # float_ops keeps TensorFlow's number; the views count 0
    assert dict(zip(prof.frame("nodes")["name"], prof.frame("nodes")["float_ops"]))["f"] == -1
    assert prof.frame("node_steps")["run_count"].to_list() == [0, 1]
    assert "_TFProfRoot (--/12 params)" in run_view(prof, "scope", {"select": ["params"]}).text
    assert_no_negative_numbers(prof)


def test_sums_beyond_int64_are_reported(tmp_path):
    # each shape fits int64 (2^62 elements); three of them do not
    nodes = [{"name": f"v{i}", "op": "VariableV2", "shape": [2**31, 2**31]} for i in range(3)]
    (tmp_path / "profile.pb").write_bytes(profile_proto(nodes))
    prof = tfprof.load(profile_path=tmp_path / "profile.pb")
    assert not rows(prof, "params_overflow")
    found = rows(prof, "sum_overflow")
    assert len(found) == 1 and found[0]["severity"] == "error" and "nodes.params" in found[0]["detail"]
    assert f"{3 * 2**62:.3g}" in found[0]["detail"]


# ----------------------------------------------------------------------------- graph and devices


def test_runtime_nodes_are_info_and_a_wrong_graph_a_warning(tmp_path):
    g = graph(("a", "MatMul"), ("b", "MatMul"))
    ok = load(tmp_path, g, [run_meta([{"name": "a"}, {"name": "b"}, {"name": "_retval_b_0_0"}])])
    assert [(r["node"], r["severity"]) for r in rows(ok, "runtime_node")] == [("_retval_b_0_0", "info")]
    assert not rows(ok, "graph_mismatch")
    others = ["x", "y", "z"]
    wrong = load(tmp_path, graph(("a", "MatMul")), [run_meta([{"name": n} for n in ["a", *others]])])
    assert total(wrong, "runtime_node") == len(others)
    mismatch = rows(wrong, "graph_mismatch")
    assert len(mismatch) == 1 and mismatch[0]["severity"] == "warning"
    assert f"{len(others)} of the {len(others) + 1} nodes that ran" in mismatch[0]["detail"]
    # without a graph every node comes from the RunMetadata: nothing to say
    eager = load(tmp_path, None, [run_meta([{"name": n} for n in others])])
    assert not rows(eager, "runtime_node") and not rows(eager, "graph_mismatch")


def test_duplicate_and_dangling_names_in_the_graph(tmp_path):
    g = graph(("a", "Const"), ("a", "MatMul"), ("b", "MatMul", ["a", "^gone", "lost:1"]))
    prof = load(tmp_path, g, [run_meta([{"name": "b"}])])
    dup = rows(prof, "duplicate_name")
    assert [(r["node"], r["severity"]) for r in dup] == [("a", "error")] and "op Const, then op MatMul" in dup[0]["detail"]
    dangling = rows(prof, "dangling_input")
    assert [(r["node"], r["severity"]) for r in dangling] == [("b", "warning"), ("b", "warning")]
    assert ["`gone`" in dangling[0]["detail"], "`lost`" in dangling[1]["detail"]] == [True, True]


def test_empty_steps_missing_streams_and_overlapping_kernels(tmp_path):
    g = graph(("a", "MatMul"), ("b", "MatMul"), ("c", "MatMul"), ("d", "MatMul"))
    stream = f"{GPU}/stream:7"
    kernels = [  # (name, start offset, duration) on one stream
        ("a", 0, 10), ("b", 5, 10),  # b starts 5 us before a ends
        ("c", 15, 5),  # touches b's end: not an overlap
        ("d", 19, 4),  # 1 us into c: within the whole-µs slack
    ]
    step0 = run_meta([{"name": n, "device": GPU} for n in "abcd"]
                     + [{"name": f"{n}:MatMul", "device": stream, "start": T0 + s, "dur": d} for n, s, d in kernels])
    prof = load(tmp_path, g, [step0, run_meta([])])
    assert [(r["step"], r["severity"]) for r in rows(prof, "empty_step")] == [(1, "warning")]
    missing = rows(prof, "device_without_stream")
    assert len(missing) == 1 and GPU.lower() in missing[0]["detail"] and missing[0]["severity"] == "warning"
    over = rows(prof, "stream_overlap")
    assert [(r["node"], r["step"]) for r in over] == [("b", 0)] and "5 us before" in over[0]["detail"]
    # with the stream:all device the GPU's kernels are counted: no warning
    with_all = load(tmp_path, g, [run_meta([{"name": "a", "device": GPU}, {"name": "a", "device": f"{GPU}/stream:all"}])])
    assert not rows(with_all, "device_without_stream")


# ----------------------------------------------------------------------------- the real profiles


@pytest.mark.parametrize("name", ["cnn", "rnn", "multistep"])
def test_fixtures_have_nothing_above_info(name):
    for prof in (tfprof.load(**raw_inputs(name)), tfprof.load(profile_path=FIXTURES / name / "profile.pb")):
        found = rows(prof)
        assert {r["severity"] for r in found} <= {"info"}, found
        # their RunMetadata-only nodes (_arg_*, _retval_*, ...) are noted
        assert {r["code"] for r in found} == {"runtime_node"}


def test_gpu_fixture_and_sample_have_nothing_above_info():
    d = FIXTURES / "gpu_tiny"
    for prof in (tfprof.load(graph_path=d / "graph.pbtxt", run_meta_path=str(d / "run_meta_0.pbtxt")),
                 tfprof.load(profile_path=d / "profile.pb"), tfprof.load(profile_path=sample_path())):
        assert {r["severity"] for r in rows(prof)} <= {"info"}


def test_large_profile_gives_a_small_table(tmp_path):
    n = 70_000
    bad_every = 7  # every 7th node repeats its predecessor's name
    nodes = [{"name": f"n{i - 1 if i % bad_every == 0 and i else i}", "execs": [(T0 + i, -1)], "requested": -i - 1}
             for i in range(n)]
    (tmp_path / "big.pb").write_bytes(profile_proto(nodes))
    prof = tfprof.load(profile_path=tmp_path / "big.pb")
    table = prof.table("validation")
    assert table.num_rows <= len(CHECKS) * (ROWS_PER_CODE + 1)
    assert total(prof, "negative_duration") == n
    assert total(prof, "negative_bytes") == n  # requested (peak is 0 in these records)
    assert total(prof, "duplicate_name") == len(range(bad_every, n, bad_every))


# ----------------------------------------------------------------------------- batches, store, CLI


def test_duplicates_found_across_batches():
    def batch(ids, names):
        nodes = pa.table({"node_id": pa.array(ids, pa.int64()), "name": names, "op": pa.array(["Op"] * len(ids)).dictionary_encode(),
                          "shape": pa.array([[]] * len(ids), pa.list_(pa.int64())), "params": pa.array([0] * len(ids), pa.int64()),
                          "float_ops": pa.array([0] * len(ids), pa.int64())})
        return {"nodes": nodes}

    v = Validator()
    v.batch(batch([0, 1], ["x", "y"]))
    v.batch(batch([2, 3, 4], ["z", "x", "z"]))
    found = v.finish({}).to_pylist()
    assert [(r["code"], r["node"]) for r in found] == [("duplicate_name", "x"), ("duplicate_name", "z")]
    assert "node id 3" in found[0]["detail"] and "node id 4" in found[1]["detail"]


def bad_inputs(tmp_path: Path) -> dict:
    g = graph(("a", "MatMul"), ("b", "MatMul"), ("c", "MatMul"))
    return write_inputs(tmp_path, g, [run_meta([{"name": "a", "dur": -5}, {"name": "b", "dur": 2**62},
                                                {"name": "c", "dur": 3}])])


def test_store_keeps_the_table(tmp_path):
    prof = tfprof.load(**bad_inputs(tmp_path))
    again = Profile.open(tfprof.save(prof, tmp_path / "store"))
    assert again.table("validation").equals(prof.table("validation"))
    by_code = again.sql("select code, sum(count) n from validation group by code order by code")
    assert dict(zip(by_code["code"], by_code["n"])) == {"negative_duration": 1, "end_before_start": 1,
                                                        "absurd_duration": 1, "absurd_timestamp": 1}


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_check_text_and_json(tmp_path, capsys):
    inputs = bad_inputs(tmp_path)
    flags = ["--graph_path", inputs["graph_path"], "--run_meta_path", inputs["run_meta_path"]]
    table = tfprof.load(**inputs).table("validation").to_pylist()
    code, out, err = cli(capsys, "check", *flags)
    assert code == 0 and err == ""
    lines = out.splitlines()
    errors = sum(r["count"] for r in table if r["severity"] == "error")
    warnings = sum(r["count"] for r in table if r["severity"] == "warning")
    assert lines[1].startswith(f"errors: {errors} (") and lines[2].startswith(f"warnings: {warnings} (")
    assert lines[3] == "info: 0"
    for r in table:
        assert f"{r['code']} ({r['severity']}, " in out and r["detail"] in out
    code, out, err = cli(capsys, "check", *flags, "--format", "json")
    data = json.loads(out)
    assert list(data) == ["profile", "counts", "entries", "ops_without_flops_rule"] and code == 0
    assert data["counts"] == {"error": errors, "warning": warnings, "info": 0}
    assert data["entries"] == table
    code, out, err = cli(capsys, "check", *flags, "--format", "yaml")
    assert code == 2 and err.count("\n") == 1 and "--format" in err


def test_check_a_store_verifies_its_files(tmp_path, capsys):
    store = tfprof.save(tfprof.load(**bad_inputs(tmp_path)), tmp_path / "store")
    code, out, _ = cli(capsys, "check", str(store))
    assert code == 0 and out.startswith(f"Validation of {store}\n")
    damaged = store / "execs.parquet"
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    damaged.write_bytes(bytes(data))
    code, out, err = cli(capsys, "check", str(store))
    assert code == 2 and out == "" and err.startswith("Error: ") and "execs.parquet" in err and err.count("\n") == 1


def test_other_commands_print_one_warning_line(tmp_path, capsys):
    inputs = bad_inputs(tmp_path)
    flags = ["--graph_path", inputs["graph_path"], "--run_meta_path", inputs["run_meta_path"]]
    prof = tfprof.load(**inputs)
    table = prof.table("validation").to_pylist()
    n = sum(r["count"] for r in table if r["severity"] != "info")
    code, out, err = cli(capsys, "scope", *flags)
    assert code == 0 and out == run_view(prof, "scope", {}).text  # stdout as without problems
    assert err.count("\n") == 1 and err.startswith(f"Warning: {n} validation problems (")
    assert err.rstrip().endswith(f"see tfprof check {' '.join(flags)}")
    store = tfprof.save(prof, tmp_path / "store")
    code, out, err = cli(capsys, "sql", "select count(*) n from validation", str(store))
    assert code == 0 and err.startswith("Warning: ") and err.count("\n") == 1 and f" in {store};" in err
    assert str(len(table)) in out
    # ingest says what it found, once, after the line saying what it wrote
    code, out, err = cli(capsys, "ingest", *flags, "--out", str(tmp_path / "again"))
    assert code == 0 and out.startswith("wrote ")
    assert err.count("\n") == 1 and err.startswith(f"Warning: {n} validation problems (")
    code, _, err = cli(capsys, "ingest", str(FIXTURES / "cnn" / "profile.pb"), "--out", str(tmp_path / "clean"))
    assert code == 0 and err == ""


def test_golden_fixtures_and_demo_print_no_warning(capsys):
    for name in ("cnn", "rnn", "multistep", "gpu_tiny"):
        code, _, err = cli(capsys, "scope", str(FIXTURES / name / "profile.pb"))
        assert code == 0 and err == "", name
    code, _, err = cli(capsys, "demo")
    assert code == 0 and err == ""

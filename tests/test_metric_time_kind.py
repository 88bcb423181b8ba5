"""A registered metric of kind ``time`` is a time wherever tfprof's own are: in µs in the tables,
sinks and diff, compared in µs by its ``min_*`` option, and printed as one. A foreign profile's
times are summed in ns (``tfprof.queries.ticks``) and turned back by the metric's kind, not by
its name: a metric registered at run time is scaled as ``cpu_micros`` is.

The metric, ``host``, is each node's cpu time computed from the node frame. On tfprof's own
profile (whole µs) and on a Kineto and an XSpace trace (exact ns), in every view the profile
has, it equals the built-in ``cpu_micros``; its expected values are also summed here from the
profile's ``execs`` table, and its threshold is checked against the rows it keeps.
"""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest
from conftest import FIXTURES

import tfprof
from tfprof import kernels
from tfprof.api import check_output, run_view, write_output
from tfprof.api.diff import run_diff
from tfprof.api.options import Metric, Options, register_metric, unregister
from tfprof.schema.proto import pprof_pb2
from tfprof.views.export import render_json

HOST = Metric("host", "host_micros", "time", "cpu time, computed from the node frame (µs)", order_by="host",
              threshold="min_host", compute=pl.col("cpu_exec_micros"), legend="host time")
# (profile, the unit its execs keep, its views)
PROFILES = {
    "tfprof": (FIXTURES / "cnn" / "profile.pb", "us", ("scope", "graph", "op", "code")),
    "kineto": (FIXTURES / "foreign" / "torch_cnn.pt.trace.json", "ns", ("scope", "graph", "op", "code")),
    "xspace": (FIXTURES / "foreign" / "jax_mlp.xplane.pb", "ns", ("scope", "graph", "op")),
}
CASES = [(name, cmd) for name, (_, _, cmds) in PROFILES.items() for cmd in cmds]


@pytest.fixture(scope="module")
def host():
    register_metric(HOST)
    yield
    unregister("host")


@pytest.fixture(scope="module")
def profiles():
    return {name: tfprof.load(path) for name, (path, _, _) in PROFILES.items()}


def _first_step(prof) -> int:
    return prof.frame("steps")["step"].min()


def _own_cpu(prof, unit: str, step: int) -> pl.DataFrame:
    """Per node that ran on the cpu in ``step``: its time (``micros``), from the execs table in
    the unit the profile keeps (a trace's exact ns, else whole µs), as µs."""
    execs = prof.frame("execs").filter((pl.col("step") == step) & (pl.col("kind").cast(pl.String) == "cpu"))
    ticks = pl.coalesce("duration_ns", pl.col("duration_micros") * 1000) if unit == "ns" else pl.col("duration_micros")
    per_node = execs.group_by("node_id").agg(ticks.sum().alias("ticks"))
    return per_node.select("node_id", (pl.col("ticks") / 1000 if unit == "ns" else pl.col("ticks")).alias("micros"))


@pytest.mark.parametrize("name,cmd", CASES)
def test_the_table_holds_the_builtin_time_in_microseconds(host, profiles, name, cmd):
    prof, unit = profiles[name], PROFILES[name][1]
    step = _first_step(prof)
    table = tfprof.view(prof, cmd, select=["host", "cpu_micros"], max_depth=1000, step=step)
    assert table.height > 1
    for own in ("host_micros", "total_host_micros"):
        builtin = own.replace("host_micros", "cpu_exec_micros")
        assert table[own].dtype == table[builtin].dtype == (pl.Float64 if unit == "ns" else pl.Int64)
        assert table[own].to_list() == table[builtin].to_list(), own
    own = _own_cpu(prof, unit, step)
    if cmd == "scope":  # each node's own time, and the root's total: every node's
        assert table["total_host_micros"][0] == pytest.approx(own["micros"].sum(), rel=1e-12, abs=0)
        nodes = table.filter(pl.col("node_id").is_not_null()).join(own, on="node_id", how="left")
        assert nodes["host_micros"].to_list() == pytest.approx(nodes["micros"].fill_null(0).to_list(), rel=1e-12)
    if cmd == "op":  # each op type's time: its nodes'
        ops = prof.frame("nodes").select("node_id", pl.col("op").cast(pl.String)).join(own, on="node_id")
        want = dict(ops.group_by("op").agg(pl.col("micros").sum()).rows())
        assert dict(zip(table["name"], table["host_micros"])) == pytest.approx(
            {op: want.get(op, 0) for op in table["name"]}, rel=1e-12)


@pytest.mark.parametrize("name,cmd", CASES)
def test_the_threshold_compares_in_microseconds(host, profiles, name, cmd):
    prof = profiles[name]
    step = _first_step(prof)
    full = tfprof.view(prof, cmd, select=["host"], max_depth=1000, step=step)
    times = sorted(v for v in full["total_host_micros"].to_list()[cmd != "op":] if v > 0)  # a tree: not its root
    limit = max(1, int(times[len(times) // 2]))  # µs: about half the rows are below it
    cut = tfprof.view(prof, cmd, select=["host"], max_depth=1000, step=step, min_host=limit)
    # the rows whose time (µs, as the table shows it) reaches the limit, and only those
    assert set(cut["name"]) == {n for n, v in zip(full["name"], full["total_host_micros"]) if v >= limit}
    assert 0 < cut.height < full.height
    builtin = tfprof.view(prof, cmd, select=["cpu_micros"], max_depth=1000, step=step, min_cpu_micros=limit)
    assert cut["name"].to_list() == builtin["name"].to_list()
    # sorting on it sorts as on the built-in time
    by_host = tfprof.view(prof, cmd, select=["host"], max_depth=1000, step=step, order_by="host")
    by_cpu = tfprof.view(prof, cmd, select=["cpu_micros"], max_depth=1000, step=step, order_by="cpu_micros")
    assert by_host["name"].to_list() == by_cpu["name"].to_list()


@pytest.mark.parametrize("name", [n for n, (_, unit, _) in PROFILES.items() if unit == "ns"])
def test_a_trace_has_rows_a_threshold_in_nanoseconds_would_keep(host, profiles, name):
    """What makes the threshold's unit matter: rows below the limit in µs and above it in ns."""
    prof = profiles[name]
    full = tfprof.view(prof, "scope", select=["host"], max_depth=1000)
    limit = 2
    between = {n for n, v in zip(full["name"], full["total_host_micros"]) if limit / 1000 <= v < limit}
    assert between
    cut = tfprof.view(prof, "scope", select=["host"], max_depth=1000, min_host=limit)
    assert not between & set(cut["name"])


@pytest.mark.parametrize("name,cmd", CASES)
def test_the_report_prints_it_as_the_builtin_time(host, profiles, name, cmd):
    prof = profiles[name]
    opts = {"max_depth": 1000, "step": _first_step(prof)}
    mine = run_view(prof, cmd, {**opts, "select": ["host"]}, full_rows=True)
    builtin = run_view(prof, cmd, {**opts, "select": ["cpu_micros"]}, full_rows=True)
    assert mine.lines == builtin.lines


@pytest.mark.parametrize("name", list(PROFILES))
def test_json_rows_and_the_diff_carry_microseconds(host, profiles, name):
    prof, step = profiles[name], _first_step(profiles[name])
    table = tfprof.view(prof, "scope", select=["host", "cpu_micros"], max_depth=1000, step=step)
    rows = json.loads(render_json(table))  # --format json's bytes
    assert [r["total_host_micros"] for r in rows] == [r["total_cpu_exec_micros"] for r in rows]
    assert rows[0]["total_host_micros"] == pytest.approx(_own_cpu(prof, PROFILES[name][1], step)["micros"].sum(),
                                                         rel=1e-12, abs=0)
    frame = run_diff(prof, prof, "scope", {"select": ["host", "cpu_micros"], "max_depth": 1000}).frame
    for part in ("a", "b", "noise"):  # the noise band of a trace's steps: from each step's values, in µs
        assert frame[f"total_host_micros_{part}"].to_list() == frame[f"total_cpu_exec_micros_{part}"].to_list()


@pytest.mark.parametrize("name", [n for n, (_, _, cmds) in PROFILES.items() if "code" in cmds])
def test_pprof_carries_it_as_the_builtin_time(host, profiles, name, tmp_path):
    """The code view's pprof: a trace's times in whole ns, unit ``nanoseconds``; tfprof's own in µs."""
    prof, unit = profiles[name], PROFILES[name][1]
    got = {}
    for select in ("host", "cpu_micros"):
        out = tmp_path / f"{select}.pb.gz"
        opts = Options.from_tfprof({"select": [select], "max_depth": 1000, "output": f"pprof:outfile={out}"})
        check_output("code", opts, prof)
        write_output(prof, run_view(prof, "code", opts))
        profile = pprof_pb2.Profile.FromString(gzip.decompress(out.read_bytes()))
        got[select] = (profile.string_table[profile.sample_type[1].unit], sorted(s.value[1] for s in profile.sample))
    assert got["host"] == got["cpu_micros"]
    assert got["host"][0] == ("nanoseconds" if unit == "ns" else "microseconds")
    total = tfprof.view(prof, "code", select=["host"], max_depth=0)["total_host_micros"][0]
    assert sum(got["host"][1]) == round(total * (1000 if unit == "ns" else 1))


@pytest.mark.parametrize("name,cmd", [c for c in CASES if c[1] != "op"])
def test_both_engines_compare_it_in_microseconds(host, profiles, name, cmd):
    prof = profiles[name]
    opts = {"select": ["host"], "max_depth": 100, "min_host": 5, "order_by": "host"}
    kernel = run_view(prof, cmd, opts).text
    with kernels.using(False):
        assert run_view(prof, cmd, opts).text == kernel

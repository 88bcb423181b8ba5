"""docs/ARCHITECTURE.md's recipe "A metric", as a test: a metric registered at run time (one
``Metric`` record and its computation, no other change) is shown, sorted on and filtered on in
every view and every shell, as tfprof's own metrics are: the report, the rows as a table, the
proto, the diff, the gates, the files, the UI's columns and option panel, and the help.

Two metrics are registered: ``kflops`` (additive: each node's float_ops in whole thousands,
computed from the node frame) and ``flops_per_byte`` (a ratio: float_ops over requested bytes,
of a row and of its subtree). The expected values are computed here from the built-in metrics'
columns, not by the registry.
"""

from __future__ import annotations

import gzip

import polars as pl
import pytest
from conftest import FIXTURES
from starlette.testclient import TestClient

import tfprof
from tfprof import kernels
from tfprof.api import check_output, run_view, write_output
from tfprof.api.diff import run_diff
from tfprof.api.gates import view_failures
from tfprof.api.options import Metric, Options, register_metric, unregister
from tfprof.cli.viewopts import option_help, options_help, parse_view_args
from tfprof.errors import OptionError
from tfprof.queries.gates import parse
from tfprof.queries.pprof import PPROF_METRICS
from tfprof.schema.metrics import generation
from tfprof.schema.proto import pprof_pb2
from tfprof.ui.app import make_app
from tfprof.ui.guard import TOKEN_HEADER
from tfprof.ui.profiles import Profiles

PROFILE = FIXTURES / "cnn" / "profile.pb"
KFLOPS = Metric("kflops", "kflops", "number", "float operations, in whole thousands per node (count)",
                order_by="kflops", threshold="min_kflops", compute=pl.col("float_ops") // 1000,
                legend="# kflops", cell_unit=" kflops", op_unit="kflops")
INTENSITY = Metric("flops_per_byte", "flops_per_byte", "ratio", "float operations per requested byte",
                   aggregate="ratio", of=("float_ops", "bytes"), order_by="flops_per_byte",
                   threshold="min_flops_per_byte", legend="flops/byte")
SELECT = ["kflops", "flops_per_byte", "float_ops", "bytes"]


@pytest.fixture(scope="module")
def prof():
    return tfprof.load(PROFILE)


@pytest.fixture
def metrics():
    """The two metrics, registered for one test and taken back after it."""
    before = generation()
    register_metric(KFLOPS)
    register_metric(INTENSITY)
    yield
    unregister("flops_per_byte")
    unregister("kflops")
    assert generation() > before


def _ratio(num, den):
    return num / den if den else 0.0


def test_both_kinds_in_every_view_report_and_table(prof, metrics):
    for cmd in ("scope", "graph", "op", "code"):
        opts = Options.from_tfprof({"select": SELECT, "max_depth": 100})
        result = run_view(prof, cmd, opts)
        assert "# kflops" in result.text and "flops/byte" in result.text, cmd
        assert "kflops: float operations, in whole thousands per node (count)" in result.text  # the doc block
        table = tfprof.view(prof, cmd, select=SELECT, max_depth=100)
        assert {"kflops", "total_kflops", "flops_per_byte", "total_flops_per_byte"} <= set(table.columns)
        assert table.schema["kflops"] == pl.Int64 and table.schema["flops_per_byte"] == pl.Float64
        # the ratio is the quotient of the row's own and of its subtree's parts
        for row in table.iter_rows(named=True):
            assert row["total_flops_per_byte"] == pytest.approx(
                _ratio(row["total_float_ops"], row["total_requested_bytes"])), (cmd, row["name"])
            if row["depth"] > 0 or cmd == "op":
                assert row["flops_per_byte"] == pytest.approx(_ratio(row["float_ops"], row["requested_bytes"]))
        # the printed cell is the table's value, two decimals
        first = table.filter(pl.col("depth") == (0 if cmd == "op" else 1)).row(0, named=True)
        line = next(ln for ln in result.lines if ln.strip().startswith(first["name"]))
        assert "%.2f" % first["total_flops_per_byte"] in line, line
        # without select, the registered metrics stay out of the table, as macs does
        assert "kflops" not in tfprof.view(prof, cmd, max_depth=1).columns


def test_the_additive_metric_adds_up_the_computed_values(prof, metrics):
    nodes = tfprof.view(prof, "op", select=["float_ops"], max_depth=1000)  # no registered column asked for
    assert "kflops" not in nodes.columns
    scope = tfprof.view(prof, "scope", select=["kflops", "float_ops"], max_depth=1000)
    leaves = scope.filter(pl.col("node_id").is_not_null())
    # each node's own kflops is its own float_ops // 1000; the root's total is the sum over nodes
    assert (leaves["kflops"] == leaves["float_ops"] // 1000).all()
    assert scope["total_kflops"][0] == int((leaves["float_ops"] // 1000).sum())
    assert scope["total_kflops"][0] < scope["total_float_ops"][0] // 1000 + leaves.height


def test_order_by_and_thresholds_on_both_kinds(prof, metrics):
    ops = tfprof.view(prof, "op", select=SELECT, order_by="flops_per_byte", max_depth=1000)
    ratios = ops["flops_per_byte"].to_list()
    assert ratios == sorted(ratios, reverse=True) and ratios[0] > 0
    cut = tfprof.view(prof, "op", select=SELECT, order_by="kflops", min_kflops=1000, max_depth=1000)
    assert cut.height and (cut["kflops"] >= 1000).all()
    assert cut["kflops"].to_list() == sorted(cut["kflops"].to_list(), reverse=True)
    dense = tfprof.view(prof, "scope", select=SELECT, min_flops_per_byte=2, max_depth=1000)
    assert dense.height > 1 and (dense["total_flops_per_byte"].tail(-1) >= 2).all()
    # the option reads like tfprof's own, and round-trips
    opts = Options.from_tfprof({"min_kflops": 5, "select": ["kflops"]})
    assert opts.min_kflops == 5 and opts.min_flops_per_byte == 0
    assert opts.to_tfprof()["min_kflops"] == 5 and Options.from_tfprof(opts.to_tfprof()) == opts
    with pytest.raises(OptionError, match="min_kflops"):
        Options.from_tfprof({"min_kflops": -1})


def test_both_engines_agree(prof, metrics):
    for cmd in ("scope", "graph", "code"):
        opts = Options.from_tfprof({"select": SELECT, "max_depth": 100, "order_by": "flops_per_byte",
                                    "min_kflops": 1})
        kernel = run_view(prof, cmd, opts).text
        with kernels.using(False):
            reference = run_view(prof, cmd, opts).text
        assert kernel == reference, cmd


def test_proto_diff_gates_and_files(prof, metrics, tmp_path):
    opts = Options.from_tfprof({"select": SELECT, "max_depth": 3})
    # the proto is tfprof's GraphNodeProto: it has no field for a metric of ours, and fills its own
    proto = run_view(prof, "scope", opts).proto
    assert proto.total_float_ops > 0 and proto.total_requested_bytes > 0
    # the diff compares both, in the report and in its frame
    d = run_diff(prof, prof, "scope", {"select": ["kflops", "flops_per_byte"], "max_depth": 2})
    assert {"total_kflops_delta", "total_flops_per_byte_a"} <= set(d.frame.columns)
    assert "kflops A" in d.text and "flops_per_byte B" in d.text
    # a gate reads a registered metric by its select name
    result = run_view(prof, "scope", opts)
    assert view_failures("scope", result, [parse("kflops > 1")])
    assert not view_failures("scope", result, [parse("kflops > 10m")])
    assert view_failures("scope", result, [parse("flops_per_byte > 2")])
    # pprof carries the additive metric (its unit: its kind's), never the ratio
    assert "kflops" in PPROF_METRICS and "flops_per_byte" not in PPROF_METRICS
    out = tmp_path / "k.pb.gz"
    result = run_view(prof, "code", Options.from_tfprof({"select": ["kflops"], "output": f"pprof:outfile={out}"}))
    check_output("code", result.options, prof)
    write_output(prof, result)
    profile = pprof_pb2.Profile.FromString(gzip.decompress(out.read_bytes()))
    assert [profile.string_table[t.type] for t in profile.sample_type] == ["count", "kflops"]
    assert sum(s.value[1] for s in profile.sample) > 0
    with pytest.raises(OptionError, match="flops_per_byte"):
        check_output("code", Options.from_tfprof({"select": ["flops_per_byte"], "output": f"pprof:outfile={out}2"}),
                     prof)


def test_ui_columns_and_option_panel(metrics):
    app = make_app(Profiles.load([PROFILE]))
    client = TestClient(app, base_url="http://127.0.0.1:8765", headers={TOKEN_HEADER: app.state.token})
    listing = client.get("/api/profiles").json()["options"]
    assert "kflops" in listing["select"] and "flops_per_byte" in listing["select"]
    assert {"kflops", "flops_per_byte"} <= set(listing["order_by"])
    assert {"min_kflops", "min_flops_per_byte"} <= set(listing["thresholds"])
    got = client.get("/api/view/0/scope?select=kflops,flops_per_byte&order_by=kflops&min_kflops=1").json()
    kinds = {c["name"]: (c["kind"], c["order_by"]) for c in got["columns"]}
    assert kinds["total_kflops"] == ("number", "kflops")
    assert kinds["total_flops_per_byte"] == ("ratio", "flops_per_byte")


def test_help_and_command_line_options(metrics):
    assert "min_kflops" in options_help() and "flops_per_byte" in options_help()
    assert "kflops (float operations" in option_help("select")
    assert "flops_per_byte" in option_help("order_by")
    assert "hide rows whose # kflops" in option_help("min_kflops")
    opts, rest = parse_view_args(["-min_kflops", "3", "--select=kflops,flops_per_byte", "profile.pb"])
    assert (opts.min_kflops, opts.select, rest) == (3, ("flops_per_byte", "kflops"), ["profile.pb"])
    assert not opts.unknown_select


def test_taken_back_and_bad_records(prof):
    register_metric(KFLOPS)
    unregister("kflops")
    assert "kflops" not in tfprof.view(prof, "scope", select=["kflops"], max_depth=1).columns
    with pytest.raises(OptionError, match="min_kflops"):
        Options.from_tfprof({"min_kflops": 1})
    bad = [
        (Metric("bytes", "x", "number", "d", compute=pl.lit(1)), "taken"),
        (Metric("x", "x", "number", "d"), "needs `compute`"),
        (Metric("x", "x", "ratio", "d", aggregate="ratio", of=("float_ops", "device")), "two additive"),
        (Metric("x", "x", "speed", "d", compute=pl.lit(1)), "kind"),
        (Metric("x", "x", "number", "d", compute=pl.lit(1), threshold="min_bytes"), "threshold"),
        (Metric("x", "x", "number", "d", compute=pl.lit(1), order_by="micros"), "order_by"),
    ]
    for metric, words in bad:
        with pytest.raises(OptionError, match=words):
            register_metric(metric)
    with pytest.raises(OptionError, match="no registered metric"):
        unregister("bytes")
    broken = Metric("broken", "broken", "number", "d", compute=pl.col("nosuch") + 1)
    register_metric(broken)
    try:
        with pytest.raises(OptionError, match="compute expression failed"):
            tfprof.view(prof, "scope", select=["broken"], max_depth=1)
    finally:
        unregister("broken")


LARGEST = Metric("largest_peak", "largest_peak", "memory", "the largest peak of one node (bytes)", aggregate="max",
                 order_by="largest_peak", threshold="min_largest_peak", compute=pl.col("peak_bytes"),
                 legend="largest peak")


@pytest.fixture
def largest():
    register_metric(LARGEST)
    yield
    unregister("largest_peak")


def test_a_largest_of_metric_takes_the_subtrees_largest(prof, largest):
    scope = tfprof.view(prof, "scope", select=["largest_peak", "peak_bytes"], max_depth=1000)
    names = scope["name"].to_list()
    own = dict(zip(names, scope["largest_peak"].to_list()))
    assert (scope.filter(pl.col("node_id").is_not_null())["largest_peak"]
            == scope.filter(pl.col("node_id").is_not_null())["peak_bytes"]).all()  # computed per node
    for row in scope.iter_rows(named=True):
        name = row["name"]
        below = [v for n, v in own.items() if name == "_TFProfRoot" or n == name or n.startswith(name + "/")]
        assert row["total_largest_peak"] == max(below), name
    # an op type holds its largest member's; the list's totals are the largest from the row down
    ops = tfprof.view(prof, "op", select=["largest_peak"], order_by="largest_peak", max_depth=1000)
    members = scope.filter(pl.col("node_id").is_not_null()).join(
        prof.frame("nodes").select("node_id", pl.col("op").cast(pl.String)), on="node_id")
    want = dict(members.group_by("op").agg(pl.col("largest_peak").max()).rows())
    assert dict(zip(ops["name"], ops["largest_peak"])) == {k: v for k, v in want.items() if k in set(ops["name"])}
    values = ops["largest_peak"].to_list()
    assert values == sorted(values, reverse=True) and ops["total_largest_peak"].to_list() == values  # sorted: equal
    assert "largest_peak" not in PPROF_METRICS  # a largest-of value does not add up along stacks
    cut = tfprof.view(prof, "scope", select=["largest_peak"], min_largest_peak=10**6, max_depth=1000)
    assert cut.height > 1 and (cut["total_largest_peak"].tail(-1) >= 10**6).all()


def test_both_engines_agree_on_a_largest_of_metric(prof, largest):
    for cmd in ("scope", "graph", "code"):
        for extra in ({}, {"account_displayed_op_only": True, "hide_name_regexes": [".*Adam.*"]}):
            opts = Options.from_tfprof({"select": ["largest_peak", "bytes"], "max_depth": 100,
                                        "order_by": "largest_peak", **extra})
            kernel = run_view(prof, cmd, opts).text
            with kernels.using(False):
                reference = run_view(prof, cmd, opts).text
            assert kernel == reference, (cmd, extra)
            assert "largest peak" in kernel

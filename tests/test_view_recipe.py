"""docs/ARCHITECTURE.md's recipe "A view", as a test: a view registered in ``VIEWS`` (one
``TreeSpec``, no other change) works in every shell and every sink, as the built-in view of its
layout does: the report, the rows as a table, the proto, each file output, the diff, the gates,
the UI's listing and tree, the interactive shell and the command line.

Two views are registered: ``device`` (the ``groups`` layout over the nodes' devices) and
``trainable`` (a ``scope`` tree with options of its own: it accounts the trainable variables
only, sorted by their parameters, unless the user says otherwise).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest
from conftest import FIXTURES
from starlette.testclient import TestClient

import tfprof
from tfprof.api import check_output, run_view, write_output
from tfprof.api.diff import run_diff
from tfprof.api.gates import view_failures
from tfprof.cli.viewopts import parse_view_args
from tfprof.errors import OptionError
from tfprof.queries.gates import parse
from tfprof.queries.options import Options
from tfprof.queries.spec import SCOPE_PARENT, VIEWS, TreeSpec, view_help
from tfprof.schema.proto import pprof_pb2
from tfprof.ui.app import make_app
from tfprof.ui.guard import TOKEN_HEADER
from tfprof.ui.profiles import Profiles

ROOT = Path(__file__).resolve().parent.parent
PROFILE = FIXTURES / "gpu_tiny" / "profile.pb"
TRAINED = FIXTURES / "cnn" / "profile.pb"  # a model with trainable variables (and variables that are not)
DEVICE = TreeSpec(name="device", layout="groups", group_key="canonical_device",
                  doc="device: The nodes are grouped by the device they ran on.",
                  help="Statistics aggregated per device.")
TRAINABLE = TreeSpec(name="trainable", layout="scope", root_op_type=SCOPE_PARENT,
                     defaults={"account_type_regexes": ["_trainable_variables"], "order_by": "params",
                               "select": ["params"]})
# the registration a user's code does, for the processes started below
REGISTER = textwrap.dedent("""
    from tfprof.queries.spec import SCOPE_PARENT, VIEWS, TreeSpec
    VIEWS["device"] = TreeSpec(name="device", layout="groups", group_key="canonical_device",
                               doc="device: The nodes are grouped by the device they ran on.",
                               help="Statistics aggregated per device.")
    VIEWS["trainable"] = TreeSpec(name="trainable", layout="scope", root_op_type=SCOPE_PARENT,
                                  defaults={"account_type_regexes": ["_trainable_variables"], "order_by": "params",
                                            "select": ["params"]})
""")


@pytest.fixture
def registered(monkeypatch):
    """The two views registered; each view's profile by its name."""
    monkeypatch.setitem(VIEWS, "device", DEVICE)
    monkeypatch.setitem(VIEWS, "trainable", TRAINABLE)
    return {"device": tfprof.load(PROFILE), "trainable": tfprof.load(TRAINED)}


@pytest.mark.parametrize("cmd,like", [("device", "op"), ("trainable", "scope")])
def test_a_registered_view_reports_tables_and_protos_as_its_layouts_view(registered, cmd, like):
    prof = registered[cmd]
    opts = {"select": ["micros", "occurrence"], "max_depth": 100, "order_by": "micros"}
    result = run_view(prof, cmd, opts, full_rows=True)
    builtin = run_view(prof, like, opts, full_rows=True)
    assert result.layout == builtin.layout and result.frame.height > 1
    table = tfprof.view(prof, cmd, **opts)
    assert table.columns == tfprof.view(prof, like, **opts).columns and table.height == result.frame.height
    assert table["name"].to_list() == result.frame["name"].cast(str).to_list()
    assert len(result.lines) == result.frame.height and all(line in result.text for line in result.lines)
    proto = result.proto
    assert type(proto) is type(builtin.proto) and proto.ByteSize() > 0
    if cmd == "trainable":  # the scope view under the view's own account, which the options leave alone
        own = run_view(prof, like, {**opts, "account_type_regexes": ["_trainable_variables"]}, full_rows=True)
        assert result.text.split("Profile:\n", 1)[1] == own.text.split("Profile:\n", 1)[1]
        assert proto == own.proto
        assert table.height < tfprof.view(prof, like, **opts).height
    else:  # one row per device, their times adding up to the op view's
        assert set(table["name"]) == set(prof.frame("nodes")["canonical_device"].drop_nulls().unique())
        assert table["exec_micros"].sum() == tfprof.view(prof, "op", **opts)["exec_micros"].sum()
        assert "device: The nodes are grouped by the device they ran on." in result.text


def _trainable_variables(prof) -> set[int]:
    """The nodes whose op types include `_trainable_variables`, from the node tables."""
    types = prof.frame("node_types").filter(pl.col("op_type").cast(pl.String) == "_trainable_variables")
    return set(types["node_id"])


def _sibling_values(table: pl.DataFrame, column: str) -> list[list]:
    """Per row of a tree table, its children's ``column`` values in display order."""
    children: dict[int, list] = {}
    above: list[int] = []  # the rows above the current one, one per depth
    for row, (depth, value) in enumerate(zip(table["depth"], table[column], strict=True)):
        del above[depth:]
        if above:
            children.setdefault(above[-1], []).append(value)
        above.append(row)
    return list(children.values())


def test_a_views_own_options_hold_where_the_user_gives_none(registered):
    prof = registered["trainable"]
    rows = tfprof.view(prof, "trainable", select=["params"], max_depth=1000)
    scope = tfprof.view(prof, "scope", select=["params"], max_depth=1000)
    # it accounts the trainable variables only: its root holds their parameters, fewer than all
    trainable = _trainable_variables(prof)
    nodes = prof.frame("nodes")
    assert rows["total_params"][0] == nodes.filter(pl.col("node_id").is_in(trainable))["params"].sum()
    assert rows["total_params"][0] < scope["total_params"][0] == nodes["params"].sum()
    assert set(rows.filter("accounted")["node_id"]) == trainable
    assert rows["name"].to_list() != scope["name"].to_list()
    # siblings by their parameters, most first, which is not their names' order here
    runs = _sibling_values(rows, "total_params")
    assert all(run == sorted(run, reverse=True) for run in runs) and any(len(set(run)) > 1 for run in runs)
    names = _sibling_values(rows, "name")
    assert any(run != sorted(run) for run in names)
    # the shells' line on the view says so
    assert view_help(TRAINABLE) == ("Nodes as the scope view organises them. Its own options: "
                                    "account_type_regexes _trainable_variables, order_by params, select params.")


def test_the_users_options_win_even_at_their_default_values(registered):
    prof = registered["trainable"]
    scope = tfprof.view(prof, "scope", max_depth=1000)
    # `.*`, `name` and `micros` are the command line's defaults: given, they replace the view's own
    assert tfprof.view(prof, "trainable", max_depth=1000, account_type_regexes=[".*"], order_by="name",
                       select=["micros"]).equals(scope)
    given, _ = parse_view_args(["-account_type_regexes", ".*", "-order_by", "name", "-max_depth", "1000",
                                "-select", "micros"])
    assert run_view(prof, "trainable", given).lines == run_view(prof, "scope", given).lines
    # set in the interactive shell first: given as well
    shell, _ = parse_view_args(["-max_depth", "1000"], base=parse_view_args(["-account_type_regexes", ".*"])[0])
    assert run_view(prof, "trainable", shell).frame["total_exec_micros"][0] == scope["total_exec_micros"][0]
    # one option given, the other stays the view's: trainable variables only, in name order
    named = tfprof.view(prof, "trainable", select=["params"], max_depth=1000, order_by="name")
    assert set(named.filter("accounted")["node_id"]) == _trainable_variables(prof)
    assert all(run == sorted(run) for run in _sibling_values(named, "name"))
    # and the diff runs the view as the view runs
    diff = run_diff(prof, prof, "trainable", {"select": ["params"], "max_depth": 1000}).frame
    assert diff.height == tfprof.view(prof, "trainable", max_depth=1000).height < scope.height


def test_options_know_what_the_user_gave():
    opts = Options.from_tfprof({"max_depth": 10, "order_by": "name"})  # both at their defaults
    assert opts == Options() and opts.explicit == {"max_depth", "order_by"} and not Options().explicit
    assert opts.with_(step=-1).explicit == {"max_depth", "order_by", "step"}
    assert Options(max_depth=3).explicit == {"max_depth"}  # built directly: what differs from the defaults
    assert "given" not in opts.to_tfprof() and Options.from_tfprof(opts.to_tfprof()) == opts
    assert Options.from_tfprof({"dump_to_file": "x"}).explicit == {"output"}
    under = opts.under({"order_by": "params", "account_type_regexes": ["x"]})
    assert (under.order_by, under.account_type_regexes, under.max_depth) == ("name", ("x",), 10)
    assert under.under({"account_type_regexes": ["y"]}) == under  # taken once, given from then on


def test_a_views_own_options_are_its_defaults_by_name(registered, monkeypatch):
    prof = registered["trainable"]
    monkeypatch.setitem(VIEWS, "bad", TreeSpec(name="bad", layout="scope", account=("_trainable_variables",)))
    with pytest.raises(OptionError, match="view `bad`: its own options go in `defaults`.*not in `account`"):
        run_view(prof, "bad")
    monkeypatch.setitem(VIEWS, "typo", TreeSpec(name="typo", layout="scope", defaults={"order": "params"}))
    with pytest.raises(OptionError, match="view `typo`'s defaults: Unknown option `order`"):
        run_view(prof, "typo")
    monkeypatch.setitem(VIEWS, "sink", TreeSpec(name="sink", layout="scope", defaults={"output": "none"}))
    with pytest.raises(OptionError, match="no default of a view"):
        run_view(prof, "sink")


@pytest.mark.parametrize("cmd", ["device", "trainable"])
def test_a_registered_view_writes_every_file_output(registered, cmd, tmp_path):
    prof = registered[cmd]
    for kind in ("file", "folded", "pprof_tree", "trace", "html"):
        out = tmp_path / f"{cmd}.{kind}"
        opts = {"select": ["micros"], "max_depth": 100, "output": f"{kind}:outfile={out}"}
        check_output(cmd, Options.from_tfprof(opts), prof)
        write_output(prof, run_view(prof, cmd, opts, full_rows=True))
        assert out.stat().st_size > 0, kind
    rows = run_view(prof, cmd, {"select": ["micros"], "max_depth": 100}, full_rows=True).frame
    folded = (tmp_path / f"{cmd}.folded").read_text().splitlines()
    # a tree's stacks add up to its root's total, a list's to the sum of its rows
    want = rows["exec_micros"].sum() if cmd == "device" else rows["total_exec_micros"][0]
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded) == want
    sample = pprof_pb2.Profile.FromString(gzip.decompress((tmp_path / f"{cmd}.pprof_tree").read_bytes()))
    assert len(sample.sample) > 0
    assert json.loads((tmp_path / f"{cmd}.trace").read_text())["traceEvents"]
    if cmd == "device":  # tfprof's own rules hold for the layout: no timeline of a list
        with pytest.raises(OptionError, match="device view doesn't support timeline"):
            check_output(cmd, Options.from_tfprof({"output": f"timeline:outfile={tmp_path}/t"}), prof)
    else:
        timeline = tmp_path / "t"
        write_output(prof, run_view(prof, cmd, {"output": f"timeline:outfile={timeline}"}))
        assert json.loads(timeline.read_text())["traceEvents"]


@pytest.mark.parametrize("cmd", ["device", "trainable"])
def test_a_registered_view_diffs_and_gates(registered, cmd):
    prof = registered[cmd]
    diff = run_diff(prof, prof, cmd, {"select": ["micros"], "max_depth": 100})
    assert diff.frame.height > 1 and diff.layout == VIEWS[cmd].layout
    assert diff.frame.select(pl.col("^.*_delta$").abs().sum()).row(0) == (0,) * len(diff.columns)
    assert f"{cmd} view" in diff.text
    result = run_view(prof, cmd, {"select": ["micros"], "max_depth": 100}, full_rows=True)
    assert view_failures(cmd, result, [parse("micros > 0us")])  # some row took time
    assert not view_failures(cmd, result, [parse("micros > 1000s")])
    assert parse(f"{cmd}:x micros > 1us").view == cmd  # a target in the registered view


def test_the_ui_offers_a_registered_view(registered):
    app = make_app(Profiles.load([PROFILE, TRAINED]))
    client = TestClient(app, base_url="http://127.0.0.1:8765", headers={TOKEN_HEADER: app.state.token})
    views = client.get("/api/profiles").json()["views"]
    assert [v["name"] for v in views] == list(VIEWS)
    assert {"name": "device", "layout": "groups", "help": "Statistics aggregated per device."} in views
    data = client.get("/api/view/0/device", params={"max_depth": 100}).json()
    assert data["layout"] == "groups" and data["label"] == "canonical device"
    assert {r["name"] for r in data["rows"]} == set(tfprof.view(registered["device"], "device", max_depth=100)["name"])
    tree = client.get("/api/view/1/trainable", params={"max_depth": 100}).json()
    assert tree["layout"] == "scope" and tree["rows"][0]["name"] == "_TFProfRoot"
    # the view's own options, which the page shows
    assert tree["total_rows"] == tfprof.view(registered["trainable"], "trainable", max_depth=100).height
    assert ({k: tree["options"][k] for k in ("order_by", "account_type_regexes", "select")}
            == {"order_by": "params", "account_type_regexes": "_trainable_variables", "select": "params"})
    assert client.get("/api/view/0/nosuch").status_code == 404


def test_the_command_line_and_the_shell_offer_a_registered_view():
    """A process that registers the view before the command line loads: a command of its own,
    in the help, and a command of the interactive shell."""
    script = REGISTER + textwrap.dedent("""
        import sys
        from tfprof.cli.main import main
        sys.exit(main(sys.argv[1:]))
    """)
    env = {"PYTHONPATH": str(ROOT), "TFPROF_SERVER": "0", "TERM": "dumb", "TFPROF_HISTORY": "", "PATH": "/usr/bin:/bin"}

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", script, *args], input=stdin, capture_output=True, text=True,
                              env=env, timeout=300, cwd=ROOT)

    listing = run("--help")
    assert listing.returncode == 0, listing.stderr
    assert "device" in listing.stdout and "Statistics aggregated per device." in listing.stdout
    want = run_view(tfprof.load(PROFILE), "op", {"max_depth": 3})  # noqa: F841 - the layout's own view runs too
    view = run("device", str(PROFILE), "--max_depth", "100")
    assert view.returncode == 0, view.stderr
    assert "device: The nodes are grouped by the device they ran on." in view.stdout
    devices = tfprof.load(PROFILE).frame("nodes")["canonical_device"].drop_nulls().unique().to_list()
    assert all(d in view.stdout for d in devices)
    shell = run(str(PROFILE), stdin="help\ndevice -max_depth 100\nquit\n")
    assert shell.returncode == 0, shell.stderr
    assert "device  Statistics aggregated per device." in shell.stdout
    assert shell.stdout.count("device: The nodes are grouped by the device they ran on.") == 1
    # a view's own options hold in the command's rows as in its report
    rows = run("trainable", str(TRAINED), "--max_depth", "1000", "--format", "json")
    assert rows.returncode == 0, rows.stderr
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(VIEWS, "trainable", TRAINABLE)
        want = tfprof.view(tfprof.load(TRAINED), "trainable", max_depth=1000)
    assert json.loads(rows.stdout) == want.to_dicts() and "total_params" in want.columns

"""docs/ARCHITECTURE.md's recipe "A view", as a test: a view registered in ``VIEWS`` (one
``TreeSpec``, no other change) works in every shell and every sink, as the built-in view of its
layout does: the report, the rows as a table, the proto, each file output, the diff, the gates,
the UI's listing and tree, the interactive shell and the command line.

Two views are registered: ``device`` (the ``groups`` layout over the nodes' devices) and
``trainable`` (a ``scope`` tree accounting the trainable variables only).
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
from tfprof.errors import OptionError
from tfprof.queries.gates import parse
from tfprof.queries.options import Options
from tfprof.queries.spec import SCOPE_PARENT, VIEWS, TreeSpec
from tfprof.schema.proto import pprof_pb2
from tfprof.ui.app import make_app
from tfprof.ui.guard import TOKEN_HEADER
from tfprof.ui.profiles import Profiles

ROOT = Path(__file__).resolve().parent.parent
PROFILE = FIXTURES / "gpu_tiny" / "profile.pb"
DEVICE = TreeSpec(name="device", layout="groups", group_key="canonical_device",
                  doc="device: The nodes are grouped by the device they ran on.",
                  help="Statistics aggregated per device.")
TRAINABLE = TreeSpec(name="trainable", layout="scope", root_op_type=SCOPE_PARENT)
# the registration a user's code does, for the processes started below
REGISTER = textwrap.dedent("""
    from tfprof.queries.spec import SCOPE_PARENT, VIEWS, TreeSpec
    VIEWS["device"] = TreeSpec(name="device", layout="groups", group_key="canonical_device",
                               doc="device: The nodes are grouped by the device they ran on.",
                               help="Statistics aggregated per device.")
""")


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(VIEWS, "device", DEVICE)
    monkeypatch.setitem(VIEWS, "trainable", TRAINABLE)
    return tfprof.load(PROFILE)


@pytest.mark.parametrize("cmd,like", [("device", "op"), ("trainable", "scope")])
def test_a_registered_view_reports_tables_and_protos_as_its_layouts_view(registered, cmd, like):
    prof = registered
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
    if cmd == "trainable":  # the same tree as the scope view: same rows, same proto
        assert result.text.split("Profile:\n", 1)[1] == builtin.text.split("Profile:\n", 1)[1]
        assert proto == builtin.proto
    else:  # one row per device, their times adding up to the op view's
        assert set(table["name"]) == set(prof.frame("nodes")["canonical_device"].drop_nulls().unique())
        assert table["exec_micros"].sum() == tfprof.view(prof, "op", **opts)["exec_micros"].sum()
        assert "device: The nodes are grouped by the device they ran on." in result.text


@pytest.mark.parametrize("cmd", ["device", "trainable"])
def test_a_registered_view_writes_every_file_output(registered, cmd, tmp_path):
    prof = registered
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
    prof = registered
    diff = run_diff(prof, prof, cmd, {"select": ["micros"], "max_depth": 100})
    assert diff.frame.height > 1 and diff.layout == VIEWS[cmd].layout
    assert diff.frame.select(pl.col("^.*_delta$").abs().sum()).row(0) == (0,) * len(diff.columns)
    assert f"{cmd} view" in diff.text
    result = run_view(prof, cmd, {"select": ["micros"], "max_depth": 100}, full_rows=True)
    assert view_failures(cmd, result, [parse("micros > 0us")])  # some row took time
    assert not view_failures(cmd, result, [parse("micros > 1000s")])
    assert parse(f"{cmd}:x micros > 1us").view == cmd  # a target in the registered view


def test_the_ui_offers_a_registered_view(registered):
    app = make_app(Profiles.load([PROFILE]))
    client = TestClient(app, base_url="http://127.0.0.1:8765", headers={TOKEN_HEADER: app.state.token})
    views = client.get("/api/profiles").json()["views"]
    assert [v["name"] for v in views] == list(VIEWS)
    assert {"name": "device", "layout": "groups", "help": "Statistics aggregated per device."} in views
    data = client.get("/api/view/0/device", params={"max_depth": 100}).json()
    assert data["layout"] == "groups" and data["label"] == "canonical device"
    assert {r["name"] for r in data["rows"]} == set(tfprof.view(registered, "device", max_depth=100)["name"])
    tree = client.get("/api/view/0/trainable").json()
    assert tree["layout"] == "scope" and tree["rows"][0]["name"] == "_TFProfRoot"
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

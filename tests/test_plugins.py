"""Plugins (``TFPROF_PLUGINS``): a module the command line imports before it builds its commands.
A view and a metric it registers are the command line's own — a command, select, order and
threshold options, the help — run in their own process and through the resident server, which
imports the same plugins; a plugin that does not import is one line and exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tfprof import plugins

ROOT = Path(__file__).resolve().parent.parent
CNN = ROOT / "tests" / "fixtures" / "cnn" / "profile.pb"
PLUGIN = textwrap.dedent('''
    import polars as pl
    from tfprof.api import VIEWS
    from tfprof.api.options import Metric, register_metric
    from tfprof.queries.spec import TreeSpec

    VIEWS["device"] = TreeSpec(name="device", layout="groups", group_key="canonical_device",
                               help="Statistics aggregated per device.")
    register_metric(Metric("kflops", "kflops", "number", "float operations in thousands (count)",
                           order_by="kflops", threshold="min_kflops", compute=pl.col("float_ops") // 1000,
                           legend="# kflops", cell_unit=" kflops", op_unit="kflops"))
''')


def tfprof(args, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfprof", *args], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def env(tmp_path):
    (tmp_path / "team_plugin.py").write_text(PLUGIN)
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "TFPROF_PLUGINS": "team_plugin", "TFPROF_SERVER": "0"}


def test_names_are_read_from_the_environment():
    assert plugins.names({"TFPROF_PLUGINS": "a, b.c,,"}) == ["a", "b.c"]
    assert plugins.names({}) == []


def test_a_plugins_view_and_metric_are_commands_and_options(env):
    got = tfprof(["device", str(CNN), "--select", "kflops,float_ops", "--order_by", "kflops", "--min_kflops", "1"],
                 env)
    assert got.returncode == 0, got.stderr
    assert "node name | # float_ops | # kflops" in got.stdout and "kflops" in got.stdout.splitlines()[-1]
    assert "Statistics aggregated per device." in tfprof(["--help"], env).stdout
    help_text = tfprof(["scope", "--help"], env).stdout
    assert "--min_kflops" in help_text and "kflops (float operations in thousands" in help_text
    # without the plugin, neither exists
    plain = {k: v for k, v in env.items() if k != "TFPROF_PLUGINS"}
    assert tfprof(["device", str(CNN)], plain).returncode == 2
    assert "Unknown option `min_kflops`" in tfprof(["scope", str(CNN), "--min_kflops", "1"], plain).stderr


def test_a_plugin_that_does_not_import_is_one_line(env, tmp_path):
    for value, words in (("no_such_plugin", "cannot import `no_such_plugin`: ModuleNotFoundError"),
                         ("bad name!", "is no module name")):
        got = tfprof(["scope", str(CNN)], {**env, "TFPROF_PLUGINS": value})
        assert got.returncode == 2 and got.stderr.startswith("Error: TFPROF_PLUGINS: ") and words in got.stderr
        assert "Traceback" not in got.stderr and len(got.stderr.splitlines()) == 1
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('the team server is down')\n")
    got = tfprof(["scope", str(CNN)], {**env, "TFPROF_PLUGINS": "broken_plugin"})
    assert got.returncode == 2 and "RuntimeError: the team server is down" in got.stderr


def test_the_resident_server_serves_a_plugins_view(env, tmp_path):
    folder = tmp_path / "sockets"
    folder.mkdir(mode=0o700)
    served_env = {**env, "TFPROF_SERVER": "1", "TFPROF_SERVER_DIR": str(folder)}
    command = ["device", str(CNN), "--select", "kflops", "--order_by", "kflops"]
    alone = tfprof(command, env)
    first = tfprof(command, served_env)  # no server yet: runs here, then starts one
    assert first.returncode == 0 and first.stdout == alone.stdout
    status = [sys.executable, "-c", "import json; from tfprof.cli import resident; print(json.dumps(resident.status()))"]
    deadline = time.monotonic() + 120
    while (facts := __import__("json").loads(subprocess.run(status, env=served_env, capture_output=True,
                                                             text=True).stdout)) is None:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.2)
    try:
        assert "device" in facts["commands"]
        again = tfprof(command, served_env)
        assert again.returncode == 0 and again.stdout == alone.stdout
        after = __import__("json").loads(subprocess.run(status, env=served_env, capture_output=True, text=True).stdout)
        assert after["served"] == facts["served"] + 1  # it went through the server
    finally:
        subprocess.run([sys.executable, "-m", "tfprof", "server", "stop"], env=served_env, timeout=60)

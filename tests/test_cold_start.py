"""The command line's cold paths stay light: ``tfprof --help``, every ``tfprof CMD --help`` and
the error for a missing input answer without importing the data libraries (tfprof/cli/__init__.py
says how). Each case runs in a fresh interpreter, as a user's command does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("polars", "pyarrow", "numba", "duckdb", "numpy", "google.protobuf", "starlette", "pyspark")

# Runs tfprof's main on each argv of a JSON list; prints per argv its exit code, what it wrote
# and which heavy modules were loaded by then.
_DRIVER = """
import contextlib, io, json, sys
from tfprof.cli.main import main
out = []
for argv in json.loads(sys.argv[1]):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    out.append({"argv": argv, "code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue(),
                "heavy": sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)})
print(json.dumps(out))
"""


def _run(argvs: list[list[str]], cwd) -> list[dict]:
    done = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(argvs), json.dumps(HEAVY)], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env={**_env(), "TFPROF_SERVER": "0"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k != "TFPROF_PLUGINS"}


def _commands() -> list[str]:
    import typer

    from tfprof.cli.main import app

    return sorted(typer.main.get_command(app).commands)


def test_help_loads_no_data_library(tmp_path):
    """The root help and every command's help, one after the other in one process: none of them
    imports a data library (the last result lists what all of them loaded)."""
    commands = _commands()
    assert {"scope", "graph", "op", "code", "ingest", "steps", "ranks", "ui"} <= set(commands)
    results = _run([["--help"]] + [[c, "--help"] for c in commands], tmp_path)
    for r in results:
        assert r["code"] == 0, r
        assert "Usage:" in r["stdout"], r
        assert r["heavy"] == [], f"{r['argv']} imported {r['heavy']}"


MISSING = [
    ["scope", "missing.pb"],
    ["graph", "missing.pb", "--max_depth", "2"],
    ["op", "--profile_path", "missing.pb"],
    ["code", "--graph_path", "missing.pbtxt"],
    ["scope", "--run_meta_path", "missing_0.pb,missing_1.pb"],
    ["overview", "missing.pt.trace.json"],
    ["steps", "missing.pt.trace.json.gz"],
    ["memory", "missing.xplane.pb"],
    ["advise", "missing.pb"],
    ["tables", "missing.tfprof"],
    ["check", "missing.tfprof"],
    ["sql", "select 1", "missing.tfprof"],
    ["ingest", "missing.pb", "--out", "out.tfprof"],
    ["ingest", "--catalog", "cat", "--run", "job", "missing-rank-0.json", "missing-rank-1.json"],  # a job's traces
    ["ranks", "missing-rank-0.json", "missing-rank-1.json"],
    ["diff", "missing_a.pb", "missing_b.pb"],
    ["ui", "missing.tfprof", "--no-browser"],
    ["missing.pb"],  # the interactive shell's inputs
]


def test_a_missing_input_is_named_before_any_data_library_loads(tmp_path):
    """Each command's error for a file that does not exist: one Error line naming it, exit 2,
    nothing written, and no data library imported for it."""
    for r in _run(MISSING, tmp_path):
        named = next(a for a in r["argv"] if "missing" in a).split(",")[0]
        assert r["code"] == 2, r
        lines = r["stderr"].splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and f"`{named}` does not exist" in lines[0], r
        assert r["heavy"] == [], f"{r['argv']} imported {r['heavy']}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["scope", "--max_depth", "2"]])
def test_the_same_commands_still_load_the_libraries_when_they_read(tmp_path, argv):
    """The check can fail: a command that reads a profile does import them (the sample)."""
    from tfprof.samples import sample_path

    (r,) = _run([[*argv, str(sample_path("cnn"))]], tmp_path)
    assert r["code"] == 0, r
    assert {"polars", "pyarrow"} <= set(r["heavy"])

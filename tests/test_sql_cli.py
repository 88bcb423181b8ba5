"""`tfprof sql` and the views' `--format`, driven as a user runs them (subprocesses, real files)."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import polars as pl
import pytest
from conftest import FIXTURES

from tfprof import QueryError, api

PB = str(FIXTURES / "multistep" / "profile.pb")
PER_STEP = "select step, sum(duration_micros) as us from execs group by step order by step"


def tfprof(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfprof", *args], capture_output=True, timeout=120)


def _ok(proc: subprocess.CompletedProcess) -> bytes:
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


def _error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr.decode())
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    return lines[0]


def test_sql_formats_carry_the_same_rows():
    want = api.load(profile_path=PB).sql(PER_STEP, output="polars")
    assert want.height == 3 and want["us"].min() > 0
    assert pl.read_csv(io.BytesIO(_ok(tfprof("sql", PER_STEP, PB, "--format", "csv")))).equals(want)
    rows = json.loads(_ok(tfprof("sql", PER_STEP, PB, "-f", "json")))
    assert rows == want.to_dicts()
    table = _ok(tfprof("sql", PER_STEP, PB)).decode().splitlines()
    assert table[0].split("|")[0].strip() == "step" and table[-1] == "(3 rows)"
    assert [int(line.split("|")[1]) for line in table[2:-1]] == want["us"].to_list()


def test_sql_parquet_to_a_file(tmp_path):
    out = tmp_path / "steps.parquet"
    _ok(tfprof("sql", PER_STEP, "--profile_path", PB, "--format", "parquet", "--out", str(out)))
    assert pl.read_parquet(out).equals(api.load(profile_path=PB).sql(PER_STEP, output="polars"))


def test_sql_errors_are_one_line():
    assert "nodez" in _error_line(tfprof("sql", "select * from nodez", PB))
    assert "Parser Error" in _error_line(tfprof("sql", "selec 1", PB))
    assert "`yaml`" in _error_line(tfprof("sql", "select 1", PB, "--format", "yaml"))
    assert "does not exist" in _error_line(tfprof("sql", "select 1", str(FIXTURES / "nope.pb")))


def test_sql_error_in_python_names_the_problem():
    with pytest.raises(QueryError, match="Binder Error.*nme"):
        api.load(profile_path=PB).sql("select nme from nodes")


def test_sql_to_a_missing_directory_writes_nothing(tmp_path):
    line = _error_line(tfprof("sql", "select 1", PB, "--out", str(tmp_path / "no" / "x.csv"), "-f", "csv"))
    assert "does not exist" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cmd", ["scope", "graph", "op", "code"])
def test_view_formats_give_the_view_rows(cmd):
    want = api.view(api.load(profile_path=PB), cmd, max_depth=4, select=["micros", "params"])
    got = pl.read_csv(io.BytesIO(_ok(tfprof(cmd, PB, "--max_depth", "4", "--select", "micros,params", "--format", "csv"))))
    assert got.columns == want.columns
    assert got["name"].to_list() == want["name"].to_list()
    assert got["total_exec_micros"].to_list() == want["total_exec_micros"].to_list()
    rows = json.loads(_ok(tfprof(cmd, PB, "-max_depth", "4", "--format", "json")))
    assert [r["name"] for r in rows] == want["name"].to_list()


def test_view_format_follows_output_file(tmp_path):
    out = tmp_path / "ops.parquet"
    proc = tfprof("op", PB, "--format", "parquet", "-output", f"file:outfile={out}")
    assert _ok(proc) == b""
    want = api.view(api.load(profile_path=PB), "op")
    assert pl.read_parquet(out).equals(want)


def test_view_bad_format_is_one_line():
    assert "text, table, csv, json, parquet" in _error_line(tfprof("scope", PB, "--format", "xml"))


def test_written_files_follow_the_umask(tmp_path):
    import os
    import stat

    out = tmp_path / "rows.csv"
    _ok(tfprof("sql", "select 1 as one", PB, "-f", "csv", "--out", str(out)))
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask

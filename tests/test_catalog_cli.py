"""The catalog on the command line: `ingest --catalog`, `runs` (text, json, --remove), a view of
one run and of runs aggregated, and `sql --catalog`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tfprof
from tfprof.cli.main import main
from tfprof.errors import OptionError


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cat(tmp_path, capsys):
    root = tmp_path / "cat"
    for run, kind in (("night-1", "cnn"), ("night-2", "multistep")):
        code, out, err = _run(capsys, "ingest", "--catalog", root, "--run", run, "--tag", "host=w1",
                              tfprof.sample_path(kind))
        assert code == 0, err
        assert out.startswith(f"added run {run} to {root} (")
    return root


def test_runs_lists_and_removes(cat, capsys):
    code, out, _ = _run(capsys, "runs", cat)
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:5] == ["run", "format", "ranks", "nodes", "steps"]
    assert [line.split()[0] for line in lines[1:3]] == ["night-1", "night-2"] and lines[-1] == "2 runs"
    code, out, _ = _run(capsys, "runs", cat, "--format", "json")
    rows = json.loads(out)
    assert [r["run"] for r in rows] == ["night-1", "night-2"] and rows[0]["tags"] == {"host": "w1"}
    code, _, err = _run(capsys, "ingest", "--catalog", cat, "--run", "night-1", tfprof.sample_path())
    assert code == 2 and "already in the catalog" in err and "--force" in err
    assert _run(capsys, "runs", cat, "--remove", "night-1")[0] == 0
    assert [r["run"] for r in json.loads(_run(capsys, "runs", cat, "--format", "json")[1])] == ["night-2"]


def test_view_of_a_run_is_the_view_of_its_profile(cat, capsys):
    for cmd in ("scope", "graph", "op", "code"):
        flags = ["--max_depth", "4", "--select", "micros,bytes,occurrence"]
        _, alone, _ = _run(capsys, cmd, tfprof.sample_path("multistep"), *flags)
        code, out, err = _run(capsys, cmd, "--catalog", cat, "--run", "night-2", *flags)
        assert code == 0, err
        assert out == alone


def test_view_of_runs_aggregated(cat, capsys):
    code, total, err = _run(capsys, "scope", "--catalog", cat, "--runs", "night-*", "--aggregate", "sum",
                            "--max_depth", "0")
    assert code == 0, err
    one = [_run(capsys, "scope", "--catalog", cat, "--run", r, "--max_depth", "0")[1] for r in ("night-1", "night-2")]
    root = [line for line in total.splitlines() if line.startswith("_TFProfRoot")][0]
    assert root != [line for line in one[0].splitlines() if line.startswith("_TFProfRoot")][0]
    code, _, err = _run(capsys, "scope", "--catalog", cat, "--runs", "night-*", "--step", "0")
    assert code == 2 and "no steps" in err
    code, _, err = _run(capsys, "scope", "--catalog", cat, "--runs", "zzz*")
    assert code == 2 and "no run" in err
    code, _, err = _run(capsys, "scope", "--catalog", cat, "--run", "night-1", "--aggregate", "max")
    assert code == 2 and "--runs" in err


def test_sql_over_the_catalog(cat, capsys, tmp_path):
    code, out, err = _run(capsys, "sql", "select run, count(*) n from steps group by run order by run",
                          "--catalog", cat, "--format", "csv")
    assert code == 0, err
    steps = {r: tfprof.load(tfprof.sample_path(k)).row_counts()["steps"] for r, k in
             (("night-1", "cnn"), ("night-2", "multistep"))}
    assert out.splitlines()[1:] == [f"{r},{n}" for r, n in steps.items()]
    target = cat / "nodes" / "x.csv"
    code, _, err = _run(capsys, "sql", "select 1", "--catalog", cat, "--out", target, "--format", "csv")
    assert code == 2 and "input" in err and not target.exists()


def test_diff_between_two_runs_of_a_catalog(tmp_path, capsys):
    root = tmp_path / "cat"
    pairs = Path(__file__).parent / "fixtures" / "diff"
    for run, name in (("base", "base"), ("wide", "wide")):
        assert _run(capsys, "ingest", "--catalog", root, "--run", run, pairs / name / "profile.pb")[0] == 0
    code, out, err = _run(capsys, "diff", "--catalog", root, "base", "wide", "op", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    alone = json.loads(_run(capsys, "diff", pairs / "base" / "profile.pb", pairs / "wide" / "profile.pb", "op",
                            "--format", "json")[1])
    assert doc["rows"] == alone["rows"] and doc["rows"][0]["path"] == "MatMul"
    code, _, err = _run(capsys, "diff", "--catalog", root, "base", "nope")
    assert code == 2 and "nope" in err
    before = sorted(p.name for p in root.iterdir())
    code, _, err = _run(capsys, "diff", "--catalog", root, "base", "wide", "--format", "csv", "--out", root / "runs.parquet")
    assert code == 2 and sorted(p.name for p in root.iterdir()) == before


def test_spark_driver_memory_is_checked(monkeypatch):
    from tfprof.catalog.spark import driver_memory

    assert driver_memory() in ("4g", os.environ.get("TFPROF_SPARK_MEMORY", "4g"))
    monkeypatch.setenv("TFPROF_SPARK_MEMORY", "16g")
    assert driver_memory() == "16g"
    for bad in ("lots", "0g", "4 gb", "-1g"):
        monkeypatch.setenv("TFPROF_SPARK_MEMORY", bad)
        with pytest.raises(OptionError, match="TFPROF_SPARK_MEMORY"):
            driver_memory()

"""The overview (``tfprof overview``, ``tfprof.overview``, the UI's landing page): its op types
are the op view's by time with shares of the op view's total, its steps ``tfprof.steps``' rows,
its findings the advisor's first line per checker; on tfprof's own profile and a Kineto GPU one."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import FIXTURES

import tfprof
from tfprof.api.advice import advise
from tfprof.cli.main import main as cli_main

PROFILES = [str(tfprof.sample_path()), str(FIXTURES / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz")]


@pytest.mark.parametrize("path", PROFILES, ids=["tfprof", "kineto_gpu"])
def test_the_overview_is_the_op_view_steps_and_advisor(path, capsys):
    prof = tfprof.load(path)
    got = tfprof.overview(prof)
    ops = tfprof.view(prof, "op", order_by="micros", max_depth=1000, select=["micros", "occurrence"])
    total = ops["exec_micros"].sum()
    assert got["total_micros"] == pytest.approx(total)
    assert [r["name"] for r in got["top_ops"]] == ops["name"].head(10).to_list()
    assert [r["micros"] for r in got["top_ops"]] == pytest.approx(ops["exec_micros"].head(10).to_list())
    assert [r["share"] for r in got["top_ops"]] == pytest.approx((ops["exec_micros"].head(10) / total).to_list())
    assert [r["count"] for r in got["top_ops"]] == ops["definition_count"].head(10).to_list()
    steps = tfprof.steps(prof)
    assert got["steps"] == steps.select("step", "device", "window_ns", "utilization").to_dicts()
    assert got["facts"] == tfprof.summarize(prof).facts

    assert cli_main(["overview", path]) == 0
    text = capsys.readouterr().out
    first = got["top_ops"][0]
    assert f"{100 * first['share']:.1f}%" in text.split("op types by execution time")[1].splitlines()[1]
    for name, reports in advise(prof).reports.items():
        if reports:
            assert f"{name}: {reports[0].splitlines()[0]}" in text
    assert cli_main(["overview", path, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in doc["top_ops"]] == [
        r["name"] for r in got["top_ops"]]


def test_a_gpu_trace_says_how_busy_the_gpu_was(capsys):
    assert cli_main(["overview", PROFILES[1]]) == 0
    text = capsys.readouterr().out
    rows = tfprof.steps(tfprof.load(PROFILES[1])).filter(pl.col("device").is_not_null())
    assert rows.height and all(f"{100 * u:.1f}% busy" in text for u in rows["utilization"])


def test_bad_format_is_one_line(capsys):
    assert cli_main(["overview", PROFILES[0], "--format", "yaml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: Unknown --format `yaml`") and len(err.splitlines()) == 1

"""A distributed job in a catalog: its traces added as one run, each rank in its own partition
(``rank=N``), every view on one rank or on all of them aggregated, SQL with a ``rank`` column,
``tfprof ranks`` over the catalog, and catalogs of the older layouts upgraded by the next add."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import FIXTURES

import tfprof
from tfprof.api.run import run_view
from tfprof.catalog import add_job, add_run, aggregate_profile, remove_run, run_profile, run_ranks, runs, sql
from tfprof.catalog.layout import NO_VALUE, listed_files, write_runs
from tfprof.cli.main import main as cli_main
from tfprof.errors import OptionError

GLOO = FIXTURES / "ranks" / "gloo4"
TRACES = {r: GLOO / f"rank-{r}.pt.trace.json.gz" for r in range(4)}


@pytest.fixture(scope="module")
def cat(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("jobs") / "cat"
    add_job(root, "gloo", [GLOO], tags=["host=h1"])
    add_run(root, "single", profile_path=tfprof.sample_path())
    return root


def _text(prof, **opts) -> str:
    return run_view(prof, "scope", {"max_depth": 3, **opts}).text


def test_each_rank_is_its_trace(cat):
    row = next(r for r in runs(cat).to_pylist() if r["run"] == "gloo")
    assert run_ranks(row) == [0, 1, 2, 3] and len(row["files"]) == 4 * len({f["table"] for f in row["files"]})
    assert all(f"/run=gloo/host=h1/worker={NO_VALUE}/rank=" in f["path"] for f in row["files"])
    for rank, trace in TRACES.items():
        assert _text(run_profile(cat, "gloo", rank)) == _text(tfprof.load(trace))
    assert row["nodes"] == sum(tfprof.load(t).row_counts()["nodes"] for t in TRACES.values())


def test_a_job_needs_a_rank_or_an_aggregate(cat):
    with pytest.raises(OptionError, match=r"run `gloo` is a job of 4 ranks \(0-3\): give --rank R"):
        run_profile(cat, "gloo")
    with pytest.raises(OptionError, match="has no rank 7; its ranks: 0, 1, 2, 3"):
        run_profile(cat, "gloo", 7)
    with pytest.raises(OptionError, match="it is no job"):
        run_profile(cat, "single", 0)
    total = tfprof.view(aggregate_profile(cat, ["gloo"], "sum"), "scope", max_depth=0)["total_exec_micros"][0]
    each = [tfprof.view(run_profile(cat, "gloo", r), "scope", max_depth=0)["total_exec_micros"][0] for r in TRACES]
    assert total == pytest.approx(sum(each), abs=1e-3)


def test_sql_has_a_rank_column(cat):
    rows = sql(cat, "select run, rank, count(*) n from nodes group by all order by run, rank").to_pylist()
    want = [{"run": "gloo", "rank": str(r), "n": tfprof.load(t).row_counts()["nodes"]} for r, t in TRACES.items()]
    assert rows == want + [{"run": "single", "rank": None, "n": 467}]
    assert sql(cat, "select * from execs limit 1").column_names[-4:] == ["run", "host", "worker", "rank"]


def test_the_command_line(cat, capsys, tmp_path):
    assert cli_main(["scope", "--catalog", str(cat), "--run", "gloo", "--rank", "2", "--max_depth", "3"]) == 0
    assert capsys.readouterr().out.endswith(_text(tfprof.load(TRACES[2])))
    assert cli_main(["scope", "--catalog", str(cat), "--run", "gloo", "--max_depth", "1"]) == 2
    assert "give --rank R for one of them, or --aggregate sum|mean|max" in capsys.readouterr().err
    assert cli_main(["op", "--catalog", str(cat), "--run", "gloo", "--aggregate", "mean", "--max_depth", "2"]) == 0
    assert "\nProfile:\nnode name | total execution time" in capsys.readouterr().out
    assert cli_main(["scope", "--catalog", str(cat), "--run", "single", "--aggregate", "max"]) == 2
    assert "run `single` is no job; --runs PATTERN aggregates runs" in capsys.readouterr().err
    assert cli_main(["ranks", "--catalog", str(cat), "--run", "gloo"]) == 0
    out = capsys.readouterr().out
    assert "  straggler: rank 2 joins the collectives" in out
    assert out.split("\n", 1)[1] == str(tfprof.ranks(GLOO)).split("\n", 1)[1]  # all but the line saying how ranks were found
    assert cli_main(["runs", str(cat)]) == 0
    assert [line.split()[:3] for line in capsys.readouterr().out.splitlines()[1:3]] == [["gloo", "kineto", "4"],
                                                                                      ["single", "profile", "-"]]
    copy = tmp_path / "c2"
    assert cli_main(["ingest", "--catalog", str(copy), "--run", "j", str(GLOO)]) == 0
    assert capsys.readouterr().out.startswith(f"added job j to {copy}: 4 ranks")


def test_replacing_and_removing_a_job(tmp_path):
    root = tmp_path / "cat"
    add_job(root, "j", [GLOO])
    with pytest.raises(tfprof.OutputError, match="already in the catalog"):
        add_job(root, "j", [GLOO])
    add_job(root, "j", [TRACES[0], TRACES[1]], force=True)  # now a job of two ranks
    assert run_ranks(runs(root).to_pylist()[0]) == [0, 1]
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("part-*.parquet")}
    assert on_disk == listed_files(runs(root))  # the replaced ranks' files went
    remove_run(root, "j")
    assert not list(root.rglob("part-*.parquet"))


def test_two_traces_claiming_one_rank_add_nothing(tmp_path):
    twin = tmp_path / "traces"
    twin.mkdir()
    shutil.copy(TRACES[0], twin / "a.pt.trace.json.gz")
    shutil.copy(TRACES[0], twin / "b.pt.trace.json.gz")
    root = tmp_path / "cat"
    with pytest.raises(OptionError, match="are both rank 0"):
        add_job(root, "j", [twin])
    assert not (root / "runs.parquet").exists() and not list(root.rglob("part-*.parquet"))
    assert not [p for p in (root / ".staging").iterdir() if p.is_dir()]
    with pytest.raises(OptionError, match="--tag rank"):
        add_run(root, "x", tags=["rank=3"], profile_path=tfprof.sample_path())


def test_a_catalog_of_the_three_level_layout_is_upgraded_by_the_next_add(tmp_path):
    root = tmp_path / "cat"
    add_run(root, "a", tags=["worker=2"], profile_path=tfprof.sample_path())
    table = runs(root).to_pylist()
    for row in table:  # as the previous tfprof wrote it: run=/host=/worker=/part-*.parquet
        for f in row["files"]:
            old = f"{Path(f['path']).parent.parent.as_posix()}/{Path(f['path']).name}"
            os.replace(root / f["path"], root / old)
            f["path"] = old
    write_runs(root, pa.Table.from_pylist(table, runs(root).schema))
    assert _text(run_profile(root, "a")) == _text(tfprof.load(tfprof.sample_path()))
    add_job(root, "j", [TRACES[0], TRACES[3]])
    assert all("/rank=" in p for p in listed_files(runs(root)))
    assert sql(root, "select run, worker, rank, count(*) n from nodes group by all order by all").to_pylist() == [
        {"run": "a", "worker": "2", "rank": None, "n": 467},
        {"run": "j", "worker": None, "rank": "0", "n": tfprof.load(TRACES[0]).row_counts()["nodes"]},
        {"run": "j", "worker": None, "rank": "3", "n": tfprof.load(TRACES[3]).row_counts()["nodes"]}]
